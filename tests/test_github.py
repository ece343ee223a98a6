"""bot/github.py against the GitHub test server over real HTTP: installation tokens, bounded
retries and rate-limit waits, the bot's login, archive downloads, a refused token, and how GitHub's
faults reach the worker (RateLimited, TransientError, FileTooLarge)."""

from __future__ import annotations

import gzip
import io
import tarfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from github import BadCredentialsException, GithubException, RateLimitExceededException
from github.GithubException import RateLimitExceededExceedsMaxWait

from alignbot.bot.alignment import JOB_KIND, AlignmentJob
from alignbot.bot.archive import ArchiveError
from alignbot.bot.errors import TransientError, is_transient
from alignbot.bot.github import (
    MAX_CONTENT,
    REFRESH_MARGIN,
    ApiOptions,
    FileTooLarge,
    GitHubApp,
    RateLimited,
    read_text,
    transient_failures,
)
from alignbot.bot.queue import JobRecord, JobState, SqlJobQueue
from alignbot.bot.storage import make_engine, migrate
from alignbot.bot.testing.github import GitHubServer

OWNER, NAME, INSTALLATION, NUMBER = "octo-org", "ops-lib", 4242, 7
BASE, HEAD = "b" * 40, "c" * 40
TREE = {"README.md": "ops library\n", "ops/add.py": "def add(a, b):\n    return a + b\n"}
TOKENS = r"/app/installations/\d+/access_tokens$"
REPO_PATH = rf"^/repos/{OWNER}/{NAME}$"


def make_app(server: GitHubServer, *, retries: int = 5, max_wait: float = 5.0) -> GitHubApp:
    """The app as the service builds it, with no write throttling and a short wait bound."""
    return GitHubApp(server.app_id, server.private_key_pem, ApiOptions(
        base_url=server.url, seconds_between_writes=0, max_wait=max_wait, retries=retries))


def seed(server: GitHubServer) -> None:
    server.add_installation(INSTALLATION, OWNER)
    server.add_repo(OWNER, NAME, INSTALLATION, files_by_ref={BASE: TREE})
    server.add_pull(OWNER, NAME, NUMBER, HEAD, BASE, "Faster add", "contributor",
                    head_tree={**TREE, "ops/add.py": "def add(a, b):\n    return b + a\n"},
                    files=[{"filename": "ops/add.py", "patch": "@@ -2 +2 @@\n-a + b\n+b + a"}])


@pytest.fixture()
def server(github_server: GitHubServer) -> GitHubServer:
    seed(github_server)
    return github_server


# -- installation tokens ---------------------------------------------------------------------


def test_installation_token_is_cached(server: GitHubServer) -> None:
    app = make_app(server)
    first, second = app.client(INSTALLATION), app.client(INSTALLATION)
    assert first.get_repo(f"{OWNER}/{NAME}").full_name == f"{OWNER}/{NAME}"
    assert second.get_repo(f"{OWNER}/{NAME}").id == first.get_repo(f"{OWNER}/{NAME}").id
    assert server.count("POST", TOKENS) == 1 and app.tokens_issued == 1
    assert app.installation_token(INSTALLATION) == app.installation_token(INSTALLATION)
    assert server.count("POST", TOKENS) == 1


@pytest.mark.parametrize(("lifetime", "issued"), [
    (timedelta(minutes=9), 2),  # always inside the refresh margin: renewed on every call
    (timedelta(minutes=11), 1),  # a minute outside it: cached
])
def test_token_inside_the_refresh_margin_is_renewed(lifetime: timedelta, issued: int) -> None:
    assert (lifetime < REFRESH_MARGIN) == (issued == 2)
    with GitHubServer(token_lifetime=lifetime) as server:
        seed(server)
        app = make_app(server)
        first = app.installation_token(INSTALLATION)
        second = app.installation_token(INSTALLATION)
        assert (first != second) == (issued == 2)
        assert server.count("POST", TOKENS) == issued and app.tokens_issued == issued
        assert app.client(INSTALLATION).get_repo(f"{OWNER}/{NAME}").name == NAME


def test_forget_token_makes_the_next_call_fetch_a_new_one(server: GitHubServer) -> None:
    app = make_app(server)
    old = app.installation_token(INSTALLATION)
    app.forget_token(INSTALLATION)
    app.forget_token(INSTALLATION)  # forgetting twice (or an unknown id) is harmless
    app.forget_token(999)
    new = app.installation_token(INSTALLATION)
    assert new != old and server.count("POST", TOKENS) == 2
    assert app.client(INSTALLATION).get_repo(f"{OWNER}/{NAME}").name == NAME
    assert server.count("POST", TOKENS) == 2


# -- retries ---------------------------------------------------------------------------------


def test_server_errors_are_retried(server: GitHubServer) -> None:
    gh = make_app(server, retries=3).client(INSTALLATION)
    server.fail_next(REPO_PATH, count=2, status=502)
    assert gh.get_repo(f"{OWNER}/{NAME}").name == NAME
    assert [status for _, path, status in server.requests if path == f"/repos/{OWNER}/{NAME}"] \
        == [502, 502, 200]


def test_more_failures_than_retries_raise_without_hanging(server: GitHubServer) -> None:
    gh = make_app(server, retries=2).client(INSTALLATION)
    server.fail_next(REPO_PATH, count=10, status=503)
    started = time.monotonic()
    # exhausted retries surface as requests' RetryError, not as a GithubException
    with pytest.raises((requests.exceptions.RetryError, GithubException)):
        gh.get_repo(f"{OWNER}/{NAME}")
    assert time.monotonic() - started < 10
    assert server.count("GET", REPO_PATH) == 3  # the first try and two retries


# -- rate limits -----------------------------------------------------------------------------


def test_long_secondary_rate_limit_raises_instead_of_retrying_early(server: GitHubServer) -> None:
    gh = make_app(server, max_wait=2).client(INSTALLATION)
    server.secondary_rate_limit(REPO_PATH, count=1, retry_after=30)
    started = time.monotonic()
    try:
        gh.get_repo(f"{OWNER}/{NAME}")
        raised = False
    except (GithubException, requests.exceptions.RetryError):
        raised = True
    elapsed = time.monotonic() - started
    assert elapsed < 5, f"waited {elapsed:.1f} s on a Retry-After of 30 s with max_wait=2"
    # GitHub said "Retry-After: 30". Sleeping max_wait (2 s) and asking again breaks that
    # instruction (and risks the integration being blocked); ApiOptions promises to raise.
    retried = server.count("GET", REPO_PATH) - 1
    assert raised and retried == 0, (
        f"a Retry-After of 30 s with max_wait=2 should raise at once; instead the client "
        f"slept {elapsed:.1f} s and retried {retried} time(s) "
        f"(urllib3 caps Retry-After at retry_after_max instead of refusing)")


def test_short_secondary_rate_limit_is_waited_out(server: GitHubServer) -> None:
    gh = make_app(server, max_wait=5).client(INSTALLATION)
    server.secondary_rate_limit(REPO_PATH, count=1, retry_after=1)
    started = time.monotonic()
    assert gh.get_repo(f"{OWNER}/{NAME}").name == NAME
    assert 0.9 <= time.monotonic() - started < 5
    assert [status for _, path, status in server.requests if path == f"/repos/{OWNER}/{NAME}"] \
        == [403, 200]


def test_primary_rate_limit_far_in_the_future_raises(server: GitHubServer) -> None:
    gh = make_app(server, max_wait=5).client(INSTALLATION)
    server.primary_rate_limit(REPO_PATH, count=1, reset_in=3600)
    started = time.monotonic()
    with pytest.raises(RateLimitExceededException):
        gh.get_repo(f"{OWNER}/{NAME}")
    assert time.monotonic() - started < 2
    assert server.count("GET", REPO_PATH) == 1


# -- the app itself, downloads ---------------------------------------------------------------


def test_bot_login_is_the_slug_with_bot(server: GitHubServer) -> None:
    app = make_app(server)
    assert app.bot_login() == "alignbot[bot]" and app.bot_login() == "alignbot[bot]"
    assert server.count("GET", r"^/app$") == 1  # asked once, then remembered


def test_download_returns_the_tarball_and_refuses_more_than_the_limit(
        server: GitHubServer, tmp_path: Path) -> None:
    app = make_app(server)
    repo = app.client(INSTALLATION).get_repo(f"{OWNER}/{NAME}")
    link = repo.get_archive_link("tarball", HEAD)
    with app.download(link, INSTALLATION, folder=tmp_path) as archive:
        data = archive.read()
    assert gzip.decompress(data)  # a gzip stream …
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:  # … holding the head tree
        names = tar.getnames()
        member = tar.extractfile(f"{OWNER}-{NAME}-{HEAD[:7]}/ops/add.py")
        assert member is not None and b"b + a" in member.read()
    assert f"{OWNER}-{NAME}-{HEAD[:7]}/README.md" in names
    with app.download(link, INSTALLATION, limit=len(data)) as exact:
        assert exact.read() == data
    with pytest.raises(ArchiveError, match=f"larger than {len(data) - 1} bytes"):
        app.download(link, INSTALLATION, folder=tmp_path, limit=len(data) - 1)
    assert list(tmp_path.iterdir()) == []  # an anonymous file: nothing is left behind


# -- a token GitHub refuses ------------------------------------------------------------------


def job_record(payload: dict[str, object]) -> JobRecord:
    now = datetime.now(UTC)
    return JobRecord(id=1, kind=JOB_KIND, key=f"{OWNER}/{NAME}#{NUMBER}", payload=payload,
                     state=JobState.RUNNING, attempts=1, error=None, result=None,
                     created_at=now, updated_at=now, started_at=now, worker="test/0")


def test_expired_token_is_a_transient_error_and_is_forgotten(server: GitHubServer,
                                                             tmp_path: Path) -> None:
    app = make_app(server)
    gh = app.client(INSTALLATION)
    assert gh.get_repo(f"{OWNER}/{NAME}").name == NAME
    assert server.expire_tokens() == 1
    with pytest.raises(BadCredentialsException):
        gh.get_repo(f"{OWNER}/{NAME}")

    engine = make_engine(f"sqlite:///{tmp_path / 'jobs.db'}")
    migrate(engine)
    job = AlignmentJob(app=app, queue=SqlJobQueue(engine))
    record = job_record({"installation_id": INSTALLATION, "repo": f"{OWNER}/{NAME}",
                         "number": NUMBER, "head_sha": HEAD, "trigger": "pull_request.opened"})
    with pytest.raises(TransientError, match="refused the installation token") as caught:
        job(record)
    assert is_transient(caught.value)
    assert isinstance(caught.value.__cause__, BadCredentialsException)
    assert server.count("POST", TOKENS) == 1  # the stale cached token was used, then dropped

    # the retry gets a fresh token and runs (the pull request has no config: a skip)
    assert job(record) == {"skipped": "no .github/alignbot.yml"}
    assert server.count("POST", TOKENS) == 2
    assert server.check_runs_for(OWNER, NAME) == [] and server.comments_on(OWNER, NAME, NUMBER) \
        == []


# -- what reaches the worker: RateLimited, TransientError, FileTooLarge ----------------------


def about(moment: datetime, seconds: float, slack: float = 3) -> bool:
    return abs((moment - datetime.now(UTC)).total_seconds() - seconds) <= slack


def test_a_long_secondary_rate_limit_becomes_rate_limited_at_its_retry_after(
        server: GitHubServer) -> None:
    app = make_app(server, max_wait=2)
    gh = app.client(INSTALLATION)
    server.secondary_rate_limit(REPO_PATH, count=1, retry_after=30)
    with pytest.raises(RateLimited) as caught, transient_failures(app, INSTALLATION):
        gh.get_repo(f"{OWNER}/{NAME}")
    error = caught.value
    assert is_transient(error) and about(error.retry_at, 30)
    assert isinstance(error.__cause__, RateLimitExceededExceedsMaxWait)
    assert server.count("GET", REPO_PATH) == 1  # asked once, not again before the 30 s


def test_a_primary_rate_limit_becomes_rate_limited_at_its_reset(server: GitHubServer) -> None:
    app = make_app(server, max_wait=5)
    gh = app.client(INSTALLATION)
    server.primary_rate_limit(REPO_PATH, count=1, reset_in=1800)
    with pytest.raises(RateLimited) as caught, transient_failures(app, INSTALLATION):
        gh.get_repo(f"{OWNER}/{NAME}")
    assert about(caught.value.retry_at, 1801)  # the reset, plus the second it may fall in
    assert "rate limit" in str(caught.value)


def test_a_rate_limited_write_becomes_rate_limited(server: GitHubServer) -> None:
    """urllib3 does not retry a PATCH: PyGithub raises at once, with GitHub's headers."""
    app = make_app(server, max_wait=2)
    repo = app.client(INSTALLATION).get_repo(f"{OWNER}/{NAME}")
    run = repo.create_check_run(name="alignbot / op alignment", head_sha=HEAD,
                                status="in_progress")
    server.secondary_rate_limit(r"/check-runs/\d+$", count=1, retry_after=45, method="PATCH")
    with pytest.raises(RateLimited) as caught, transient_failures(app, INSTALLATION):
        run.edit(status="completed", conclusion="success")
    assert about(caught.value.retry_at, 45)
    server.primary_rate_limit(r"/check-runs/\d+$", count=1, reset_in=600, status=429,
                              method="PATCH")
    with pytest.raises(RateLimited) as caught, transient_failures(app, INSTALLATION):
        run.edit(status="completed", conclusion="success")
    assert about(caught.value.retry_at, 601)
    run.edit(status="completed", conclusion="success")
    assert server.check_runs_for(OWNER, NAME)[0].status == "completed"


def test_other_403s_are_not_rate_limits(server: GitHubServer) -> None:
    app = make_app(server)
    gh = app.client(INSTALLATION)
    server.fail_next(REPO_PATH, status=403,
                     body={"message": "Resource not accessible by integration"})
    with pytest.raises(GithubException) as caught, transient_failures(app, INSTALLATION):
        gh.get_repo(f"{OWNER}/{NAME}")
    assert not isinstance(caught.value, RateLimited) and caught.value.status == 403


def test_server_errors_past_the_client_retries_are_transient(server: GitHubServer) -> None:
    app = make_app(server, retries=2)
    gh = app.client(INSTALLATION)
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    server.outage(REPO_PATH, seconds=30, status=503)
    with pytest.raises(TransientError, match="did not answer") as caught, \
            transient_failures(app, INSTALLATION):
        gh.get_repo(f"{OWNER}/{NAME}")
    assert isinstance(caught.value.__cause__, requests.exceptions.RetryError)
    assert server.count("GET", REPO_PATH) == 1 + 3  # the fixture's read, a try and 2 retries
    server.clear_faults()

    # a PATCH is not retried by the client: its 5xx is transient for the worker to retry
    run = repo.create_check_run(name="alignbot / op alignment", head_sha=HEAD,
                                status="in_progress")
    server.fail_next(r"/check-runs/\d+$", status=502, method="PATCH")
    with pytest.raises(TransientError, match="GitHub answered 502"), \
            transient_failures(app, INSTALLATION):
        run.edit(status="completed", conclusion="success")
    assert server.check_runs_for(OWNER, NAME)[0].status == "in_progress"


def test_reset_connections_are_retried_then_transient(server: GitHubServer) -> None:
    app = make_app(server, retries=5)
    gh = app.client(INSTALLATION)
    assert gh.get_repo(f"{OWNER}/{NAME}").name == NAME
    server.outage(REPO_PATH, seconds=0.3, reset=True)
    assert gh.get_repo(f"{OWNER}/{NAME}").name == NAME  # urllib3 retried through the resets
    assert ("GET", f"/repos/{OWNER}/{NAME}", 0) in server.requests

    repo = gh.get_repo(f"{OWNER}/{NAME}")
    link = repo.get_archive_link("tarball", HEAD)
    for reset in (False, True):
        server.outage(r"^/_codeload/", seconds=30, reset=reset)
        with pytest.raises(TransientError, match="download") as caught, \
                transient_failures(app, INSTALLATION):
            app.download(link, INSTALLATION)
        assert is_transient(caught.value)
        server.clear_faults()
    with app.download(link, INSTALLATION) as archive:
        assert archive.read(2) == b"\x1f\x8b"


def test_a_file_over_1_mb_is_file_too_large(server: GitHubServer) -> None:
    big = b"# padding\n" * (MAX_CONTENT // 10 + 1)
    exact = b"#" * MAX_CONTENT
    sha = "e" * 40
    server.push(OWNER, NAME, NUMBER, sha, tree={**TREE, "big.yml": big, "exact.yml": exact})
    app = make_app(server)
    repo = app.client(INSTALLATION).get_repo(f"{OWNER}/{NAME}")
    with pytest.raises(FileTooLarge) as caught:
        read_text(repo, "big.yml", sha)
    error = caught.value
    assert str(error) == ("big.yml is too large: GitHub's contents API serves files up to 1 MB "
                          f"({MAX_CONTENT} bytes)")
    assert error.path == "big.yml" and error.limit == MAX_CONTENT
    assert not is_transient(error) and isinstance(error.__cause__, GithubException)
    assert server.count("GET", r"/contents/big\.yml$") == 1  # a 403 too_large is not retried
    assert read_text(repo, "exact.yml", sha) == exact.decode()  # 1 MB exactly is served
    assert read_text(repo, "missing.yml", sha) is None
