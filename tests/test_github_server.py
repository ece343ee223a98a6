"""The GitHub test server, driven with PyGithub and httpx, checked against GitHub's OpenAPI."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import io
import json
import tarfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from github import Auth, Github, GithubException, GithubIntegration, GithubRetry
from github.GithubException import (
    BadCredentialsException,
    RateLimitExceededException,
    UnknownObjectException,
)
from github_server import Exchange, GitHubServer, OpenApiSubset, load_subset

OWNER, NAME, INSTALLATION = "octo-org", "ops-lib", 4242
BASE, HEAD, HEAD2 = "b" * 40, "c" * 40, "d" * 40
BASE_TREE = {"README.md": "ops library\n", "ops/add.py": "def add(a, b):\n    return a + b\n"}
HEAD_TREE = {**BASE_TREE, ".alignbot.yml": "candidate: ops\n", "ops/add.py": "add = None\n"}
WEBHOOKS = Path(__file__).parent / "fixtures" / "github" / "webhooks"
INTERNAL = ("/_codeload/", "/_raw/")
ERROR_SCHEMAS = {
    True: {"$ref": "#/components/schemas/validation-error"},
    False: {"$ref": "#/components/schemas/basic-error"},
}
# Where the real example payloads differ from GitHub's own webhook schemas: (path, message start).
KNOWN_DEVIATIONS: dict[str, set[tuple[str, str]]] = {
    "check_run.rerequested": {
        ("check_run", "'node_id' is a required"),
        ("check_run", "'details_url' is a required"),
        ("repository", "'disabled' is a required"),
        ("check_run/app", "{"),
        ("check_run/check_suite/app", "{"),
    },
    "installation.created": {
        ("installation", "'app_slug' is a required"),
        ("installation/created_at", "1557933591 is not of type 'string'"),
        ("installation/updated_at", "1557933591 is not of type 'string'"),
    },
    "installation_repositories.added": {
        ("", "'requester' is a required"),
        ("installation", "'app_slug' is a required"),
        ("installation", "'suspended_by' is a required"),
        ("installation", "'suspended_at' is a required"),
        ("installation/created_at", "1557933591 is not of type 'string'"),
        ("installation/updated_at", "1557933591 is not of type 'string'"),
    },
    "pull_request.synchronize": {
        ("pull_request/base/repo", "'has_discussions' is a required"),
        ("pull_request/head/repo", "'has_discussions' is a required"),
    },
    "pull_request_review.submitted": {
        ("pull_request/base/repo", "'has_discussions' is a required"),
        ("pull_request/head/repo", "{"),
    },
}


def fast(**options: Any) -> dict[str, Any]:
    """PyGithub options for tests: no client-side throttling, no retries unless asked."""
    return {"seconds_between_requests": None, "seconds_between_writes": None, **options}


def schema_problems(subset: OpenApiSubset, exchange: Exchange) -> list[str]:
    """Why a recorded response body breaks GitHub's schema for its operation and status."""
    where = f"{exchange.method} {exchange.path} -> {exchange.status}"
    if exchange.path.startswith(INTERNAL) or exchange.status == 302 or exchange.raw:
        return []
    schema = None
    if exchange.template is not None:
        if subset.operation(exchange.method, exchange.template) is None:
            return [f"{where}: {exchange.template} is not in the OpenAPI subset"]
        schema = subset.response_schema(exchange.method, exchange.template, exchange.status)
    if schema is None and exchange.status >= 400:
        schema = ERROR_SCHEMAS["errors" in (exchange.response or {})]
    if schema is None:
        return [f"{where}: status not documented for this operation"]
    return [f"{where}: {explain(error)}" for error in subset.errors(schema, exchange.response)]


def explain(error: jsonschema.ValidationError) -> str:
    """The most specific reason behind a (possibly anyOf/oneOf) schema violation."""
    while error.context:
        error = jsonschema.exceptions.best_match(error.context)
    return f"{'/'.join(map(str, error.absolute_path))}: {error.message[:160]}"


@pytest.fixture()
def server() -> Iterator[GitHubServer]:
    """A started server with one installed repository and pull request #7; every response it
    sent is checked against the OpenAPI schemas when the test ends."""
    with GitHubServer() as github:
        github.add_repo(OWNER, NAME, INSTALLATION, {BASE: BASE_TREE})
        github.add_pull(OWNER, NAME, 7, HEAD, BASE, "Speed up add", "alice", head_tree=HEAD_TREE,
                        files=[{"filename": "ops/add.py", "patch": "@@ -1,2 +1 @@\n-a\n-b\n+c"}])
        yield github
    assert_documented(github)


def assert_documented(server: GitHubServer) -> None:
    """Every response the server sent matches GitHub's schema, and no handler crashed."""
    subset = load_subset()
    problems = [p for exchange in server.exchanges for p in schema_problems(subset, exchange)]
    assert not server.errors, server.errors[0]
    assert not problems, "\n".join(problems[:20])


@pytest.fixture()
def integration(server: GitHubServer) -> GithubIntegration:
    """PyGithub's App client pointed at the server."""
    auth = Auth.AppAuth(server.app_id, server.private_key_pem)
    return GithubIntegration(auth=auth, base_url=server.url, **fast())


@pytest.fixture()
def gh(integration: GithubIntegration) -> Github:
    """PyGithub acting as the installation (it fetches and refreshes its own token)."""
    return integration.get_github_for_installation(INSTALLATION)


def token_for(server: GitHubServer, **body: Any) -> str:
    """A fresh installation token, asked for over HTTP with a JWT."""
    app_jwt = Auth.AppAuth(server.app_id, server.private_key_pem).create_jwt()
    reply = httpx.post(f"{server.url}/app/installations/{INSTALLATION}/access_tokens",
                       headers={"Authorization": f"Bearer {app_jwt}"}, json=body)
    assert reply.status_code == 201, reply.text
    return str(reply.json()["token"])


@functools.cache
def stranger_key() -> rsa.RSAPrivateKey:
    """An RSA key that is not the App's."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def file_text(repo: Any, path: str, ref: str | None = None) -> bytes:
    """A file's content through the contents API."""
    found = repo.get_contents(path, ref=ref) if ref else repo.get_contents(path)
    assert not isinstance(found, list)
    return bytes(found.decoded_content)


def signed_jwt(key: Any, **claims: Any) -> str:
    """An RS256 JWT with default iat/exp around now."""
    now = int(time.time())
    return jwt.encode({"iat": now - 60, "exp": now + 300, **claims}, key, algorithm="RS256")


# -- the App ----------------------------------------------------------------------------------


def test_app_installations_and_tokens(server: GitHubServer, integration: GithubIntegration) -> None:
    app = integration.get_app()
    assert (app.id, app.slug) == (server.app_id, "alignbot")
    assert [i.id for i in integration.get_installations()] == [INSTALLATION]
    assert integration.get_app_installation(INSTALLATION).id == INSTALLATION
    assert integration.get_repo_installation(OWNER, NAME).id == INSTALLATION
    access = integration.get_access_token(INSTALLATION)
    assert access.token.startswith("ghs_") and len(access.token) == 40
    lifetime = access.expires_at - datetime.now(UTC)
    assert timedelta(minutes=59) < lifetime <= timedelta(hours=1)
    assert server.tokens[access.token].installation_id == INSTALLATION


def test_jwt_is_verified(server: GitHubServer) -> None:
    url = f"{server.url}/app"
    stranger = stranger_key()
    now = int(time.time())
    cases = {
        "": "A JSON web token could not be decoded",
        signed_jwt(stranger, iss=str(server.app_id)): "A JSON web token could not be decoded",
        signed_jwt(server.private_key, iss="999"): "A JSON web token could not be decoded",
        signed_jwt(server.private_key, iss=str(server.app_id), iat=now - 900, exp=now - 120):
            "'Expiration time' claim ('exp') must be a numeric value",
        signed_jwt(server.private_key, iss=str(server.app_id), exp=now + 3600):
            "'Expiration time' claim ('exp') is too far in the future",
        token_for(server): "A JSON web token could not be decoded",
    }
    for credential, message in cases.items():
        headers = {"Authorization": f"Bearer {credential}"} if credential else {}
        reply = httpx.get(url, headers=headers)
        assert reply.status_code == 401
        assert reply.json()["message"].startswith(message)
    client_id_jwt = signed_jwt(server.private_key, iss=server.client_id)
    assert httpx.get(url, headers={"Authorization": f"Bearer {client_id_jwt}"}).is_success


def test_wrong_key_raises_bad_credentials(server: GitHubServer) -> None:
    pem = stranger_key().private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()).decode()
    auth = Auth.AppAuth(server.app_id, pem)
    with pytest.raises(GithubException) as caught:
        GithubIntegration(auth=auth, base_url=server.url, **fast()).get_app()
    assert caught.value.status == 401


def test_expired_tokens_are_rejected(server: GitHubServer) -> None:
    token = token_for(server)
    github = Github(base_url=server.url, auth=Auth.Token(token), **fast())
    assert github.get_repo(f"{OWNER}/{NAME}").id
    assert server.expire_tokens() == 1
    with pytest.raises(BadCredentialsException):
        github.get_repo(f"{OWNER}/{NAME}")
    fresh = Github(base_url=server.url, auth=Auth.Token(token_for(server)), **fast())
    assert fresh.get_repo(f"{OWNER}/{NAME}").name == NAME


def test_short_token_lifetime_makes_pygithub_refresh() -> None:
    with GitHubServer(token_lifetime=timedelta(seconds=10)) as server:
        server.add_repo(OWNER, NAME, INSTALLATION, {BASE: BASE_TREE})
        auth = Auth.AppAuth(server.app_id, server.private_key_pem)
        gh = GithubIntegration(auth=auth, base_url=server.url, **fast())
        repo = gh.get_github_for_installation(INSTALLATION).get_repo(f"{OWNER}/{NAME}")
        repo.get_contents("README.md")
        # PyGithub renews a token due within 20 s: every call asks for a new one.
        assert server.count("POST", "/access_tokens$") == 2
    assert_documented(server)


def test_token_scoping_and_permissions(server: GitHubServer) -> None:
    server.add_repo(OWNER, "other", INSTALLATION, {BASE: BASE_TREE}, private=True)
    narrow = Github(base_url=server.url, auth=Auth.Token(token_for(server, repositories=[NAME])),
                    **fast())
    with pytest.raises(UnknownObjectException):
        narrow.get_repo(f"{OWNER}/other")
    read_only = token_for(server, permissions={"checks": "read"})
    reply = httpx.post(f"{server.url}/repos/{OWNER}/{NAME}/check-runs",
                       headers={"Authorization": f"token {read_only}"},
                       json={"name": "alignbot", "head_sha": HEAD})
    assert (reply.status_code, reply.json()["message"]) == (
        403, "Resource not accessible by integration")
    app_id = str(server.app_id)
    too_much = httpx.post(
        f"{server.url}/app/installations/{INSTALLATION}/access_tokens",
        headers={"Authorization": f"Bearer {signed_jwt(server.private_key, iss=app_id)}"},
        json={"permissions": {"administration": "write"}},
    )
    assert too_much.status_code == 422


def test_installation_repositories_paginate(server: GitHubServer, integration: GithubIntegration,
                                            gh: Github) -> None:
    for index in range(4):
        server.add_repo(OWNER, f"extra-{index}", INSTALLATION, {BASE: BASE_TREE})
    server.add_repo("elsewhere", "not-installed", None, {BASE: BASE_TREE})
    installation = integration.get_app_installation(INSTALLATION)
    names = [repo.name for repo in installation.get_repos()]
    assert names == [NAME] + [f"extra-{i}" for i in range(4)]
    reply = httpx.get(f"{server.url}/installation/repositories?per_page=2",
                      headers={"Authorization": f"token {token_for(server)}"})
    assert reply.json()["total_count"] == 5 and len(reply.json()["repositories"]) == 2
    assert 'rel="next"' in reply.headers["Link"] and 'rel="last"' in reply.headers["Link"]


# -- repositories, contents and archives ------------------------------------------------------


def test_repository_and_contents(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    assert (repo.full_name, repo.default_branch, repo.owner.login) == (f"{OWNER}/{NAME}", "main",
                                                                      OWNER)
    assert file_text(repo, ".alignbot.yml", HEAD) == b"candidate: ops\n"
    assert file_text(repo, "README.md") == b"ops library\n"
    listing = repo.get_contents("ops", ref=HEAD)
    assert isinstance(listing, list) and [c.path for c in listing] == ["ops/add.py"]
    root = repo.get_contents("", ref="refs/pull/7/head")
    assert isinstance(root, list) and {c.name for c in root} >= {"ops", "README.md"}
    with pytest.raises(UnknownObjectException):
        repo.get_contents(".alignbot.yml", ref=BASE)
    with pytest.raises(GithubException) as caught:
        repo.get_contents("README.md", ref="no-such-branch")
    assert caught.value.status == 404 and "No commit found for the ref" in str(caught.value)
    assert repo.get_commit(HEAD).parents[0].sha == BASE


def test_tarball_layout(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    location = repo.get_archive_link("tarball", HEAD)
    assert location.startswith(server.url)
    reply = httpx.get(location)
    assert reply.headers["content-type"] == "application/x-gzip"
    with tarfile.open(fileobj=io.BytesIO(reply.content), mode="r:gz") as archive:
        names = archive.getnames()
        top = f"{OWNER}-{NAME}-{HEAD[:7]}"
        assert names[0] == top and all(n == top or n.startswith(top + "/") for n in names)
        assert archive.pax_headers["comment"] == HEAD
        member = archive.extractfile(f"{top}/.alignbot.yml")
        assert member is not None and member.read() == b"candidate: ops\n"
        assert archive.getmember(f"{top}/ops").isdir()


def test_files_over_1_mb_are_served_as_github_serves_them(server: GitHubServer) -> None:
    big, limit = b"# padding\n" * 110_000, 1024 * 1024
    assert len(big) > limit
    exact = b"x" * limit
    server.push(OWNER, NAME, 7, HEAD2, tree={**HEAD_TREE, "big.yml": big, "exact.yml": exact})
    headers = {"Authorization": f"token {token_for(server)}"}
    url = f"{server.url}/repos/{OWNER}/{NAME}/contents/%s?ref={HEAD2}"

    for accept in ("application/vnd.github+json", "application/json", ""):
        refused = httpx.get(url % "big.yml", headers={**headers, "Accept": accept})
        assert refused.status_code == 403, accept
        body = refused.json()
        assert body["errors"] == [{"resource": "Blob", "field": "data", "code": "too_large"}]
        assert body["message"].startswith("This API returns blobs up to 1 MB in size.")
    served = httpx.get(url % "exact.yml", headers=headers)  # 1 MB exactly is still served
    assert served.status_code == 200 and served.json()["size"] == limit
    assert base64.b64decode(served.json()["content"]) == exact

    raw = httpx.get(url % "big.yml", headers={**headers, "Accept": "application/vnd.github.raw"})
    assert raw.status_code == 200 and raw.content == big
    assert raw.headers["content-type"].startswith("application/vnd.github.raw")
    small = httpx.get(url % ".alignbot.yml",
                      headers={**headers, "Accept": "application/vnd.github.v3.raw"})
    assert small.content == b"candidate: ops\n"
    obj = httpx.get(url % "big.yml", headers={**headers, "Accept": "application/vnd.github.object"})
    assert obj.status_code == 200
    assert (obj.json()["content"], obj.json()["encoding"], obj.json()["size"]) == (
        "", "none", len(big))


def test_private_archive_needs_the_link_or_a_token(server: GitHubServer) -> None:
    server.add_repo(OWNER, "secret", INSTALLATION, {BASE: BASE_TREE}, private=True)
    token = token_for(server)
    headers = {"Authorization": f"token {token}"}
    assert httpx.get(f"{server.url}/repos/{OWNER}/secret").status_code == 404
    redirect = httpx.get(f"{server.url}/repos/{OWNER}/secret/tarball/main", headers=headers)
    assert redirect.status_code == 302
    location = redirect.headers["Location"]
    bare = location.split("?")[0]
    assert httpx.get(location).status_code == 200
    assert httpx.get(bare).status_code == 404
    assert httpx.get(bare, headers=headers).status_code == 200
    followed = httpx.get(f"{server.url}/repos/{OWNER}/secret/tarball/{BASE}", headers=headers,
                         follow_redirects=True)
    assert followed.status_code == 200 and followed.content[:2] == b"\x1f\x8b"


# -- pull requests ----------------------------------------------------------------------------


def test_pull_request_fields(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    pr = repo.get_pull(7)
    assert (pr.title, pr.user.login, pr.draft, pr.state) == ("Speed up add", "alice", False,
                                                            "open")
    assert (pr.head.sha, pr.base.sha, pr.base.ref) == (HEAD, BASE, "main")
    assert pr.head.repo.full_name == f"{OWNER}/{NAME}"
    assert (pr.additions, pr.deletions, pr.changed_files, pr.commits) == (1, 2, 1, 1)
    assert pr.raw_data["author_association"] == "CONTRIBUTOR"
    assert [c.sha for c in pr.get_commits()] == [HEAD]


def test_forks_and_deleted_forks(server: GitHubServer, gh: Github) -> None:
    server.add_pull(OWNER, NAME, 8, "e" * 40, BASE, user="bob", head_repo="bob/ops-lib",
                    author_association="FIRST_TIME_CONTRIBUTOR")
    server.add_pull(OWNER, NAME, 9, "f" * 40, BASE, user="carol", head_repo=None)
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    fork = repo.get_pull(8)
    assert fork.head.repo.full_name == "bob/ops-lib" and fork.head.repo.fork
    assert repo.get_pull(9).head.repo is None
    assert file_text(repo, "ops/add.py", "e" * 40).startswith(b"def add")
    run = repo.create_check_run("alignbot", "e" * 40)
    assert run.pull_requests == []  # as on GitHub: fork pull requests are not listed


def test_pull_files_are_paginated(server: GitHubServer, gh: Github) -> None:
    files = [{"filename": f"ops/op_{i:03}.py", "status": "added", "patch": "@@ +1 @@\n+x"}
             for i in range(75)]
    server.push(OWNER, NAME, 7, HEAD2, files)
    pr = gh.get_repo(f"{OWNER}/{NAME}").get_pull(7)
    server.clear_log()
    assert [f.filename for f in pr.get_files()] == [f["filename"] for f in files]
    assert server.count("GET", "/pulls/7/files$") == 3  # 30 + 30 + 15
    page = httpx.get(f"{server.url}/repos/{OWNER}/{NAME}/pulls/7/files?per_page=100&page=1")
    assert len(page.json()) == 75 and "Link" not in page.headers


def test_push_moves_the_head(server: GitHubServer, gh: Github) -> None:
    before = server.pull(OWNER, NAME, 7).updated_at - timedelta(days=3)
    server.update_pull(OWNER, NAME, 7, updated_at=before)
    server.push(OWNER, NAME, 7, HEAD2, [{"filename": "ops/mul.py", "status": "added"}])
    pr = gh.get_repo(f"{OWNER}/{NAME}").get_pull(7)
    assert pr.head.sha == HEAD2 and pr.updated_at is not None and pr.updated_at > before
    assert [c.sha for c in pr.get_commits()] == [HEAD, HEAD2]
    assert [f.filename for f in pr.get_files()] == ["ops/mul.py"]
    assert file_text(gh.get_repo(f"{OWNER}/{NAME}"), ".alignbot.yml", HEAD2)


def test_reviews_and_requested_reviewers(server: GitHubServer, gh: Github) -> None:
    server.set_permission(OWNER, NAME, "maria", "maintain")
    server.add_review(OWNER, NAME, 7, "maria", "CHANGES_REQUESTED", "please add a test")
    server.request_reviewers(OWNER, NAME, 7, users=["dave"], teams=["core"])
    pr = gh.get_repo(f"{OWNER}/{NAME}").get_pull(7)
    reviews = list(pr.get_reviews())
    assert [(r.user.login, r.state, r.commit_id) for r in reviews] == [
        ("maria", "CHANGES_REQUESTED", HEAD)]
    users, teams = pr.get_review_requests()
    assert [u.login for u in users] == ["dave"] and [t.slug for t in teams] == ["core"]


def test_pull_list_filters_and_pages(server: GitHubServer, gh: Github) -> None:
    for number in range(10, 45):
        server.add_pull(OWNER, NAME, number, f"{number:040x}", BASE, draft=number % 5 == 0)
    server.update_pull(OWNER, NAME, 10, state="closed", merged=True)
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    open_numbers = [p.number for p in repo.get_pulls(state="open")]
    assert len(open_numbers) == 35 and open_numbers[0] == 44 and 10 not in open_numbers
    assert [p.number for p in repo.get_pulls(state="closed")] == [10]
    assert repo.get_pull(10).merged
    oldest = repo.get_pulls(state="all", sort="created", direction="asc")[0]
    assert oldest.number == 7


# -- issues and comments ----------------------------------------------------------------------


def test_comments_reactions_and_bot_login(server: GitHubServer, gh: Github) -> None:
    server.set_permission(OWNER, NAME, "maria", "write")
    human = server.add_comment(OWNER, NAME, 7, "/alignbot recheck", "maria")
    pr = gh.get_repo(f"{OWNER}/{NAME}").get_pull(7)
    mine = pr.create_issue_comment("<!-- alignbot:report -->\nall aligned")
    assert (mine.user.login, mine.user.type) == ("alignbot[bot]", "Bot")
    assert mine.raw_data["performed_via_github_app"]["slug"] == "alignbot"
    mine.edit("<!-- alignbot:report -->\n1 mismatch")
    comments = list(pr.get_issue_comments())
    assert [c.id for c in comments] == [human.id, mine.id]
    assert comments[0].raw_data["author_association"] == "MEMBER"
    fetched = gh.get_repo(f"{OWNER}/{NAME}").get_issue(7).get_comment(mine.id)
    assert fetched.body.endswith("1 mismatch")
    assert comments[0].create_reaction("eyes").content == "eyes"
    url = f"{server.url}/repos/{OWNER}/{NAME}/issues/comments/{human.id}/reactions"
    again = httpx.post(url, json={"content": "eyes"},
                       headers={"Authorization": f"token {token_for(server)}"})
    assert again.status_code == 200  # the same reaction twice is not a new one
    assert server.comments[human.id].reactions[0].user.login == "alignbot[bot]"


def test_comment_pagination(server: GitHubServer, gh: Github) -> None:
    for index in range(65):
        server.add_comment(OWNER, NAME, 7, f"comment {index}", "alice")
    pr = gh.get_repo(f"{OWNER}/{NAME}").get_pull(7)
    server.clear_log()
    assert len(list(pr.get_issue_comments())) == 65
    assert server.count("GET", "/issues/7/comments$") == 3


def test_comment_length_limit(server: GitHubServer, gh: Github) -> None:
    pr = gh.get_repo(f"{OWNER}/{NAME}").get_pull(7)
    comment = pr.create_issue_comment("x" * 65536)
    with pytest.raises(GithubException) as created:
        pr.create_issue_comment("x" * 65537)
    assert created.value.status == 422
    assert created.value.data["errors"][0]["message"].startswith("Body is too long")
    with pytest.raises(GithubException) as edited:
        comment.edit("é" * 65537)
    assert edited.value.data["errors"][0] == {
        "resource": "IssueComment", "code": "custom", "field": "body",
        "message": "body is too long (maximum is 65536 characters)"}


def test_issues(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    issue = repo.create_issue("torch.add disagrees with itself", body="repro", labels=["upstream"])
    assert issue.number == 8 and issue.user.login == "alignbot[bot]"
    assert repo.get_issue(8).labels[0].name == "upstream"
    assert repo.get_issue(7).pull_request is not None
    assert [i.title for i in server.created_issues(OWNER, NAME)] == [issue.title]
    with pytest.raises(GithubException) as caught:
        repo.create_issue("too long", body="y" * 70000)
    assert caught.value.status == 422


# -- check runs -------------------------------------------------------------------------------


def make_annotations(count: int, start: int = 0) -> list[dict[str, Any]]:
    """`count` check-run annotations on ops/add.py."""
    return [{"path": "ops/add.py", "start_line": i + 1, "end_line": i + 1,
             "annotation_level": "failure", "message": f"mismatch {i}"}
            for i in range(start, start + count)]


def test_check_run_lifecycle(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    run = repo.create_check_run("alignbot", HEAD, status="in_progress", external_id="job-1",
                                output={"title": "Checking", "summary": "running",
                                        "annotations": make_annotations(50)})
    assert run.pull_requests[0].number == 7
    title = "1 mismatch"
    run.edit(output={"title": title, "summary": "s", "annotations": make_annotations(50, 50)})
    run.edit(conclusion="failure",
             output={"title": title, "summary": "done", "annotations": make_annotations(10, 100)})
    assert (run.status, run.conclusion, run.output.title) == ("completed", "failure", "1 mismatch")
    assert run.output.annotations_count == 110 and run.completed_at is not None
    assert [a.message for a in run.get_annotations()][-1] == "mismatch 109"
    stored = server.check_runs[run.id]
    assert len(stored.updates) == 3 and stored.updates[-1]["conclusion"] == "failure"
    assert [r.id for r in repo.get_commit(HEAD).get_check_runs(check_name="alignbot")] == [run.id]
    assert repo.get_check_run(run.id).external_id == "job-1"


def test_check_run_limits(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    with pytest.raises(GithubException) as many:
        repo.create_check_run("alignbot", HEAD, output={"title": "t", "summary": "s",
                                                        "annotations": make_annotations(51)})
    assert many.value.status == 422
    assert many.value.data["message"] == (
        "Invalid request.\n\nNo more than 50 items are allowed; 51 were supplied.")
    run = repo.create_check_run("alignbot", HEAD, output={"title": "t", "summary": "s" * 65535})
    with pytest.raises(GithubException) as long_text:
        run.edit(output={"title": "t", "summary": "s", "text": "t" * 65536})
    assert long_text.value.data["message"] == (
        "Invalid request.\n\nOnly 65535 characters are allowed; 65536 were supplied.")
    with pytest.raises(GithubException) as wide:
        run.edit(output={"title": "t", "summary": "é" * 40000})
    assert wide.value.data["errors"][0]["message"] == "summary exceeds a maximum bytesize of 65535"
    with pytest.raises(GithubException) as unknown:
        repo.create_check_run("alignbot", "0" * 40)
    assert unknown.value.data["message"] == f"No commit found for SHA: {'0' * 40}"


def test_check_runs_for_ref_keep_the_latest(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    first = repo.create_check_run("alignbot", HEAD, conclusion="neutral")
    second = repo.create_check_run("alignbot", HEAD, status="queued")
    other = repo.create_check_run("lint", HEAD, conclusion="success")
    assert first.status == "completed"
    latest = [r.id for r in repo.get_commit(HEAD).get_check_runs()]
    assert latest == [other.id, second.id]
    every = httpx.get(f"{server.url}/repos/{OWNER}/{NAME}/commits/{HEAD}/check-runs?filter=all")
    assert every.json()["total_count"] == 3
    assert len(server.check_runs_for(OWNER, NAME, HEAD)) == 3


def test_request_bodies_are_checked(server: GitHubServer) -> None:
    headers = {"Authorization": f"token {token_for(server)}"}
    url = f"{server.url}/repos/{OWNER}/{NAME}/check-runs"
    missing = httpx.post(url, headers=headers, json={"head_sha": HEAD})
    assert missing.json()["message"] == "Invalid request.\n\n\"name\" wasn't supplied."
    bad_level = httpx.post(url, headers=headers, json={
        "name": "a", "head_sha": HEAD,
        "output": {"title": "t", "summary": "s", "annotations": [
            {**make_annotations(1)[0], "annotation_level": "error"}]}})
    assert bad_level.status_code == 422 and "annotation_level" in bad_level.json()["message"]
    garbage = httpx.post(url, headers=headers, content=b"{not json")
    assert (garbage.status_code, garbage.json()["message"]) == (400, "Problems parsing JSON")


# -- collaborators and search -----------------------------------------------------------------


def test_collaborator_permissions(server: GitHubServer, gh: Github) -> None:
    expected = {"admin": "admin", "maintain": "write", "write": "write", "triage": "read",
                "read": "read"}
    for role in expected:
        server.set_permission(OWNER, NAME, f"user-{role}", role)
    server.user("passer-by")
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    for role, permission in expected.items():
        assert repo.get_collaborator_permission(f"user-{role}") == permission
        assert repo.get_collaborator_role_name(f"user-{role}") == role
    assert repo.get_collaborator_permission("passer-by") == "read"  # public repository
    assert gh.get_user("passer-by").login == "passer-by"
    with pytest.raises(UnknownObjectException):
        repo.get_collaborator_permission("nobody-at-all")


def test_search_open_ready_pull_requests(server: GitHubServer, gh: Github) -> None:
    for number in range(10, 50):
        server.add_pull(OWNER, NAME, number, f"{number:040x}", BASE, draft=number % 4 == 0)
    server.update_pull(OWNER, NAME, 11, state="closed")
    server.add_repo("other-org", "elsewhere", 99, {BASE: BASE_TREE})
    server.add_pull("other-org", "elsewhere", 1, HEAD, BASE)
    found = gh.search_issues(f"repo:{OWNER}/{NAME} is:pr is:open draft:false")
    numbers = sorted(issue.number for issue in found)
    assert numbers == [7] + [n for n in range(10, 50) if n % 4 and n != 11]
    assert found.totalCount == len(numbers)
    stale = gh.search_issues("", repo=f"{OWNER}/{NAME}", type="pr", state="open",
                             updated="<2000-01-01")
    assert stale.totalCount == 0
    page = httpx.get(f"{server.url}/search/issues",
                     params={"q": f"repo:{OWNER}/{NAME} is:pr", "per_page": 10, "page": 2})
    assert len(page.json()["items"]) == 10 and 'rel="prev"' in page.headers["Link"]
    assert page.headers["X-RateLimit-Resource"] == "search"
    with pytest.raises(GithubException) as unsupported:
        list(gh.search_issues("repo:octo-org/ops-lib linked:issue"))
    assert unsupported.value.status == 422


# -- faults, rate limits and the request log --------------------------------------------------


def test_server_errors_are_injected(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    server.fail_next(r"/pulls/7$", count=2, status=503)
    for _ in range(2):
        with pytest.raises(GithubException) as caught:
            repo.get_pull(7)
        assert caught.value.status == 503
    assert repo.get_pull(7).number == 7
    assert [s for m, p, s in server.requests if p.endswith("/pulls/7")] == [503, 503, 200]


def test_pygithub_retries_through_a_bad_gateway(server: GitHubServer) -> None:
    retry = GithubRetry(total=3, backoff_factor=0)
    github = Github(base_url=server.url, auth=Auth.Token(token_for(server)), **fast(retry=retry))
    server.fail_next(r"/repos/octo-org/ops-lib$", status=502, method="GET")
    assert github.get_repo(f"{OWNER}/{NAME}").name == NAME
    assert server.count("GET", r"/repos/octo-org/ops-lib$") == 2


def test_an_outage_fails_every_matching_request_until_it_ends(server: GitHubServer) -> None:
    headers = {"Authorization": f"token {token_for(server)}"}
    pull, repo = f"{server.url}/repos/{OWNER}/{NAME}/pulls/7", f"{server.url}/repos/{OWNER}/{NAME}"
    server.outage(r"/pulls/7$", seconds=0.6, status=502)
    started = time.monotonic()
    statuses = [httpx.get(pull, headers=headers).status_code for _ in range(3)]
    assert statuses == [502, 502, 502] and time.monotonic() - started < 0.6
    assert httpx.get(repo, headers=headers).status_code == 200  # other paths are unaffected
    body = httpx.get(pull, headers=headers).json()
    assert body == {"message": "Server Error", "status": "502"}
    time.sleep(max(0.0, started + 0.7 - time.monotonic()))
    assert httpx.get(pull, headers=headers).status_code == 200  # the outage is over

    server.outage(r"/pulls/7$", seconds=0.6, method="POST")  # another method: unaffected
    assert httpx.get(pull, headers=headers).status_code == 200


def test_an_outage_can_reset_connections(server: GitHubServer) -> None:
    headers = {"Authorization": f"token {token_for(server)}"}
    pull = f"{server.url}/repos/{OWNER}/{NAME}/pulls/7"
    server.outage(r"/pulls/7$", seconds=0.5, reset=True)
    with pytest.raises(httpx.TransportError):
        httpx.get(pull, headers=headers)
    assert ("GET", f"/repos/{OWNER}/{NAME}/pulls/7", 0) in server.requests
    time.sleep(0.6)
    assert httpx.get(pull, headers=headers).status_code == 200


def test_pygithub_retries_through_an_outage_shorter_than_its_retries(
        server: GitHubServer) -> None:
    retry = GithubRetry(total=8, backoff_factor=0.1)
    github = Github(base_url=server.url, auth=Auth.Token(token_for(server)), **fast(retry=retry))
    server.outage(r"/repos/octo-org/ops-lib$", seconds=0.5, status=503)
    assert github.get_repo(f"{OWNER}/{NAME}").name == NAME
    statuses = [s for _, p, s in server.requests if p == "/repos/octo-org/ops-lib"]
    assert statuses[-1] == 200 and set(statuses[:-1]) == {503} and len(statuses) > 2


def test_secondary_rate_limit(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    server.secondary_rate_limit(r"/issues/7/comments$", retry_after=7, method="POST")
    with pytest.raises(GithubException) as caught:
        repo.get_pull(7).create_issue_comment("hi")
    assert caught.value.status == 403 and (caught.value.headers or {})["retry-after"] == "7"
    assert "secondary rate limit" in caught.value.data["message"]
    retry = GithubRetry(total=2, backoff_factor=0, secondary_rate_wait=0)
    patient = Github(base_url=server.url, auth=Auth.Token(token_for(server)), **fast(retry=retry))
    server.secondary_rate_limit(r"/issues/7/comments$", retry_after=0, method="POST")
    patient.get_repo(f"{OWNER}/{NAME}").get_pull(7).create_issue_comment("hi")
    assert len(server.comments_on(OWNER, NAME, 7)) == 1


def test_primary_rate_limit(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    server.primary_rate_limit(r"/pulls$", reset_in=120)
    with pytest.raises(RateLimitExceededException) as caught:
        list(repo.get_pulls())
    headers = caught.value.headers or {}
    assert headers["x-ratelimit-remaining"] == "0"
    assert int(headers["x-ratelimit-reset"]) >= int(time.time()) + 100
    server.primary_rate_limit(r"/pulls$", status=429)
    reply = httpx.get(f"{server.url}/repos/{OWNER}/{NAME}/pulls")
    assert reply.status_code == 429 and reply.json()["message"].startswith("API rate limit")
    assert len(list(repo.get_pulls())) == 1


def test_every_response_has_rate_limit_headers(server: GitHubServer) -> None:
    headers = {"Authorization": f"token {token_for(server)}"}
    paths = ["/repos/octo-org/ops-lib", "/nowhere", "/repos/octo-org/ops-lib/pulls/999"]
    replies = [httpx.get(server.url + path, headers=headers) for path in paths]
    assert [r.status_code for r in replies] == [200, 404, 404]
    used = [int(r.headers["X-RateLimit-Used"]) for r in replies]
    assert used == [1, 2, 3] and replies[0].headers["X-RateLimit-Limit"] == "5000"
    limits = httpx.get(f"{server.url}/rate_limit", headers=headers).json()
    assert limits["resources"]["core"]["used"] == 3


# -- webhook fixtures -------------------------------------------------------------------------

EXPECTED_WEBHOOKS = [
    "check_run.rerequested", "installation.created", "installation_repositories.added",
    "issue_comment.created", "issue_comment.edited", "ping", "pull_request.closed",
    "pull_request.edited", "pull_request.opened", "pull_request.ready_for_review",
    "pull_request.reopened", "pull_request.synchronize", "pull_request_review.submitted",
]


def deviations(subset: OpenApiSubset, name: str, payload: Any) -> set[tuple[str, str]]:
    """The schema violations of one webhook fixture, as (path, message start) pairs."""
    schema = subset.webhook_schema(name.replace("_", "-").replace(".", "-"))
    found = set()
    for error in subset.errors(schema, payload):
        path = "/".join(map(str, error.absolute_path))
        known = [m for p, m in KNOWN_DEVIATIONS.get(name, set()) if p == path]
        found.add((path, next((m for m in known if error.message.startswith(m)), error.message)))
    return found


@pytest.mark.parametrize("name", EXPECTED_WEBHOOKS)
def test_webhook_fixture_matches_the_official_schema(name: str) -> None:
    payload = json.loads((WEBHOOKS / f"{name}.json").read_text())
    action = name.partition(".")[2]
    assert payload.get("action") == (action or None)
    assert deviations(load_subset(), name, payload) == KNOWN_DEVIATIONS.get(name, set())


def test_webhook_fixture_set_is_complete() -> None:
    assert sorted(p.stem for p in WEBHOOKS.glob("*.json")) == EXPECTED_WEBHOOKS


def webhook_refs(server: GitHubServer, name: str) -> dict[str, Any]:
    """Arguments of `server.webhook` for `name`, seeding what the event is about."""
    event = name.partition(".")[0]
    if name == "ping":
        return {}
    if event == "installation":
        return {"installation_id": INSTALLATION}
    if event == "installation_repositories":
        return {"installation_id": INSTALLATION, "repositories": [f"{OWNER}/{NAME}"]}
    where = {"owner": OWNER, "repo": NAME}
    if event == "issue_comment":
        return {**where, "comment_id": server.add_comment(OWNER, NAME, 7, "/alignbot", "bob").id}
    if event == "check_run":
        run = Github(base_url=server.url, auth=Auth.Token(token_for(server)), **fast()).get_repo(
            f"{OWNER}/{NAME}").create_check_run("alignbot", HEAD, conclusion="success")
        return {**where, "check_run_id": run.id}
    if event == "pull_request_review":
        return {**where, "number": 7, "review_id": server.add_review(OWNER, NAME, 7, "bob").id}
    return {**where, "number": 7}


@pytest.mark.parametrize("name", EXPECTED_WEBHOOKS)
def test_built_webhooks_match_the_official_schema(server: GitHubServer, name: str) -> None:
    if name == "pull_request.closed":
        server.update_pull(OWNER, NAME, 7, state="closed")
    payload = server.webhook(name, **webhook_refs(server, name))
    subset = load_subset()
    schema = subset.webhook_schema(name.replace("_", "-").replace(".", "-"))
    assert [explain(error) for error in subset.errors(schema, payload)] == []
    fixture = json.loads((WEBHOOKS / f"{name}.json").read_text())
    if name != "ping":  # the fixture is a repository hook's ping, not an App's
        assert set(fixture) - set(payload) <= {"enterprise"}
    if "repository" in payload:
        assert payload["repository"]["url"] == f"{server.url}/repos/{OWNER}/{NAME}"
        assert payload["installation"]["id"] == INSTALLATION


def test_synchronize_payload_follows_pushes(server: GitHubServer) -> None:
    server.push(OWNER, NAME, 7, HEAD2)
    payload = server.webhook("pull_request.synchronize", OWNER, NAME, number=7)
    assert (payload["before"], payload["after"]) == (HEAD, HEAD2)
    assert payload["pull_request"]["head"]["sha"] == HEAD2


def test_delivery_is_signed(server: GitHubServer) -> None:
    payload = server.webhook("ping")
    headers, body = server.delivery("ping", payload, "s3cret")
    expected = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers["X-Hub-Signature-256"] == f"sha256={expected}"
    assert headers["X-GitHub-Event"] == "ping" and json.loads(body) == payload
    assert len(headers["X-GitHub-Delivery"]) == 36
