"""The default branch's status (bot/status/): pushes checked and stored per op × dtype ×
kind, the pages over real HTTP (the grid, each cell's findings and repros, the history, the
known divergences and their upstream issues), who may see them (GitHub's sign-in against the
GitHub test server), and the page as headless Chromium draws it.

One world per module: a GitHub test server, the App's webhook service on loopback, three
pushes to a public repository and one to a private one, run by the real ``status`` job (the
sandbox alone is replaced: it hands back the report of the commit it was given)."""

from __future__ import annotations

import copy
import re
import threading
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import uvicorn
from browser import screenshot
from sqlalchemy import Engine, insert
from starlette.responses import Response

from alignbot.bot.alignment import AlignmentJob
from alignbot.bot.app import create_app
from alignbot.bot.demo import _files, _sha, free_port, wait_for
from alignbot.bot.engine_report import parse_report
from alignbot.bot.github import ApiOptions, GitHubApp
from alignbot.bot.jobs import ALIGN, STATUS, align_job
from alignbot.bot.queue import SqlJobQueue
from alignbot.bot.sandbox import SandboxResult
from alignbot.bot.serve import status_pages, webhook_router
from alignbot.bot.settings import load_settings
from alignbot.bot.status import StatusJob, record_run, results_at
from alignbot.bot.status.oauth import SESSION_COOKIE, STATE_COOKIE, Sessions
from alignbot.bot.status.push import on_push
from alignbot.bot.storage import UPSTREAM, make_engine, migrate, utcnow
from alignbot.bot.tenancy import Denial, Held, NotAllowed, Viewer, authorize_viewer
from alignbot.bot.testing.github import GitHubServer
from alignbot.bot.webhooks import Event
from alignbot.bot.worker import Worker
from alignbot.checks.known import KNOWN_PATH

ROOT = Path(__file__).resolve().parent.parent
SECRET = "status webhook secret"
OWNER, PUBLIC, PRIVATE, BROKEN = "acme", "kernels", "secret", "broken"
INSTALLATION, OTHER_INSTALLATION = 71, 72
SESSION_KEY = "k" * 40
UPSTREAM_ISSUE = "https://github.com/pytorch/pytorch/issues/4242"
KNOWN_FILE = f"""known:
  - op: torch.nn.functional.gelu
    dtype: float16
    reason: gelu in float16 is computed in float32 and rounded once
    upstream: {UPSTREAM_ISSUE}
"""
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def finding(fingerprint: str, op: str, dtype: str, kind: str = "value-mismatch",
            **fields: Any) -> dict[str, Any]:
    """A finding as the engine's report holds it (its dtype is in its signature)."""
    return {"fingerprint": fingerprint, "kind": kind, "op": op, "spec": "activations.x",
            "message": f"{op} differs on {dtype}: max abs diff 0.5", "count": 2,
            "observation": "v1", "node": "v1", "program": {"nodes": []},
            "signature": f"{kind.partition('-')[0]} {dtype} v1", "examples": [],
            "verdict": "candidate-bug", "repro": f"import torch\n# repro of {op}\n",
            "repro_verified": True, **fields}


SOFTPLUS = finding("aaaaaaaaaaa1", "torch.nn.functional.softplus", "float32",
                   message=f"softplus differs {HOSTILE}")
GELU = finding("bbbbbbbbbbb2", "torch.nn.functional.gelu", "float16")
TANH = finding("ccccccccccc3", "torch.tanh", "float64")
COVERED = [["torch.nn.functional.softplus", "float32"], ["torch.nn.functional.softplus",
           "float64"], ["torch.nn.functional.gelu", "float16"],
           ["torch.nn.functional.gelu", "float32"], ["torch.tanh", "float64"],
           ["torch.relu", "float32"]]


def report(*findings: dict[str, Any]) -> dict[str, Any]:
    data = {"report_version": 1, "reference": "2.13.0", "candidate": "fastops", "seed": 1,
            "specs_run": 3, "specs": ["activations.x"], "programs_run": 36,
            "findings": list(findings),
            "exploration": [{"spec": "activations.x", "seen": 1, "drawn": 1, "missed": [],
                             "covered": COVERED}]}
    return parse_report(data).dump()  # what the real sandbox's report becomes


# the report each pushed tree's check gives: the file VERSION names the push
REPORTS = {"1": report(SOFTPLUS, GELU), "2": report(SOFTPLUS, GELU, TANH),
           "3": report(SOFTPLUS, GELU), "private": report(TANH), "pull": report(GELU, TANH)}


def sandbox(repo_dir: Path, *args: Any, **kwargs: Any) -> SandboxResult:
    version = (repo_dir / "VERSION").read_text().strip()
    return SandboxResult(copy.deepcopy(REPORTS[version]), 0, None, "", "", 0.1)


@dataclass
class World:
    github: GitHubServer
    engine: Engine
    url: str
    shas: list[str]  # the public repository's pushes, oldest first
    private_sha: str
    app: GitHubApp
    queue: SqlJobQueue


def tree(version: str) -> dict[str, bytes]:
    base = _files(ROOT / "examples" / "fastops")
    return {**base, "VERSION": version.encode(), KNOWN_PATH: KNOWN_FILE.encode()}


def serve(app: Any, port: int) -> tuple[uvicorn.Server, threading.Thread]:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, 30, "the App's pages to start")
    return server, thread


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("status")
    with GitHubServer() as github:
        first = tree("0")
        github.add_repo(OWNER, PUBLIC, INSTALLATION, files_by_ref={_sha(first): first})
        github.add_repo(OWNER, PRIVATE, INSTALLATION, files_by_ref={_sha(first): first},
                        private=True)
        github.add_repo(OWNER, BROKEN, INSTALLATION, files_by_ref={_sha(first): first})
        github.add_installation(OTHER_INSTALLATION, "elsewhere")
        github.set_permission(OWNER, PRIVATE, "alice", "read")
        github.user("mallory")
        engine = make_engine(f"sqlite:///{folder / 'alignbot.db'}")
        migrate(engine)
        port = free_port()
        settings = load_settings({
            "ALIGNBOT_APP_ID": str(github.app_id), "ALIGNBOT_PRIVATE_KEY": github.private_key_pem,
            "ALIGNBOT_WEBHOOK_SECRETS": SECRET, "ALIGNBOT_GITHUB_API_URL": github.url,
            "ALIGNBOT_GITHUB_WEB_URL": github.url, "ALIGNBOT_PUBLIC_URL": f"http://127.0.0.1:{port}",
            "ALIGNBOT_OAUTH_CLIENT_ID": github.client_id,
            "ALIGNBOT_OAUTH_CLIENT_SECRET": github.client_secret,
            "ALIGNBOT_SESSION_KEY": SESSION_KEY, "ALIGNBOT_STATUS_HISTORY": "10"})
        app = GitHubApp(github.app_id, github.private_key_pem, ApiOptions(
            base_url=github.url, seconds_between_writes=0, max_wait=1, retries=1))
        queue = SqlJobQueue(engine)
        job = StatusJob(app, engine, AlignmentJob(app=app, queue=queue, sandbox=sandbox,
                                                  work_dir=folder))
        worker = Worker(queue, {STATUS: job}, name="status-test")
        web = create_app(settings, engine, webhook_router(), freeze_gc=False,
                         pages=status_pages(settings, engine, app))
        server, thread = serve(web, port)
        url = f"http://127.0.0.1:{port}"
        shas: list[str] = []

        def push(repo: str, version: str, **changed: bytes) -> str:
            files = {**tree(version), **changed}
            before = github.push_branch(OWNER, repo, _sha(files), files)
            headers, body = github.delivery("push", github.webhook(
                "push", OWNER, repo, before=before), SECRET)
            assert httpx.post(f"{url}/webhook", content=body, headers=headers).status_code == 202
            assert worker.run_once()
            return _sha(files)

        for version in ("1", "2", "3"):
            shas.append(push(PUBLIC, version))
        private_sha = push(PRIVATE, "private")
        push(BROKEN, "1", **{".github/alignbot.yml": b"ops: [1, 2\n"})
        push(BROKEN, "1", **{KNOWN_PATH: b"known:\n  - reason: matches everything\n"})
        # another installation's rows under the public repository's name (held there before
        # a transfer): never shown for it
        record_run(engine, installation_id=OTHER_INSTALLATION, repo=f"{OWNER}/{PUBLIC}",
                   branch="main", commit_sha="f" * 40, job_id=None, candidate="theirs",
                   report=report(finding("ddddddddddd4", "torch.leaked_op", "float32")))
        # what the weekly upstream watch stored about the known entry's issue
        with engine.begin() as conn:
            conn.execute(insert(UPSTREAM), {
                "url": UPSTREAM_ISSUE, "repo": "pytorch/pytorch", "number": 4242,
                "kind": "issue", "registered_by": "alice", "pr_repo": f"{OWNER}/{PUBLIC}",
                "pr_number": None, "created_at": utcnow(), "state": "closed",
                "last_checked": utcnow()})
        try:
            yield World(github, engine, url, shas, private_sha, app, queue)
        finally:
            server.should_exit = True
            thread.join(10)
            engine.dispose()


# -- the push and what is stored -------------------------------------------------------------


def _push_event(ref: str = "refs/heads/main", after: str = "a" * 40, **changes: Any) -> Event:
    payload = {"ref": ref, "after": after, "deleted": False,
               "repository": {"full_name": f"{OWNER}/{PUBLIC}", "default_branch": "main",
                              "private": False},
               "installation": {"id": INSTALLATION}, **changes}
    return Event("push", None, "d-1", payload)


def test_only_a_push_to_the_default_branch_queues_a_check() -> None:
    (job,) = on_push(_push_event())
    assert (job.kind, job.key, job.supersede) == (STATUS, f"{OWNER}/{PUBLIC}@main", True)
    assert job.payload["head_sha"] == "a" * 40 and isinstance(job.payload["seed"], int)
    assert on_push(_push_event())[0].payload["seed"] == job.payload["seed"]  # per branch
    assert on_push(_push_event("refs/heads/feature")) == []
    assert on_push(_push_event("refs/tags/v1")) == []
    assert on_push(_push_event(after="0" * 40, deleted=True)) == []


def test_each_push_is_stored_per_op_dtype_and_kind(world: World) -> None:
    rows = results_at(world.engine, INSTALLATION, f"{OWNER}/{PUBLIC}", world.shas[1])
    assert rows is not None
    found = {(r.op, r.dtype, r.kind, r.fingerprint, r.outcome) for r in rows}
    assert found == {
        ("torch.nn.functional.softplus", "float32", "value-mismatch", "aaaaaaaaaaa1", "diverges"),
        ("torch.nn.functional.gelu", "float16", "value-mismatch", "bbbbbbbbbbb2", "known"),
        ("torch.tanh", "float64", "value-mismatch", "ccccccccccc3", "diverges"),
        ("torch.nn.functional.softplus", "float64", "", "", "agrees"),
        ("torch.nn.functional.gelu", "float32", "", "", "agrees"),
        ("torch.relu", "float32", "", "", "agrees")}
    gelu = next(r for r in rows if r.fingerprint == "bbbbbbbbbbb2")
    assert gelu.detail["known"] == {"reason": "gelu in float16 is computed in float32 and "
                                              "rounded once", "upstream": UPSTREAM_ISSUE}
    # the tenant's rows only, and only what was checked
    assert results_at(world.engine, OTHER_INSTALLATION, f"{OWNER}/{PUBLIC}",
                      world.shas[1]) is None
    assert results_at(world.engine, INSTALLATION, f"{OWNER}/{PUBLIC}", "e" * 40) is None


# -- the pages -------------------------------------------------------------------------------


def page(world: World, path: str, **options: Any) -> httpx.Response:
    return httpx.get(f"{world.url}{path}", timeout=30, **options)


def cell_classes(html: str) -> dict[str, str]:
    """The grid's cells by their anchor or position: ``op|dtype`` → class."""
    grid = html.split('<table class="grid">', 1)[1].split("</table>", 1)[0]
    dtypes = re.findall(r"<th>([^<]+)</th>", grid.split("</tr>", 1)[0])[1:]
    cells = {}
    for row in grid.split("</tr>")[1:]:
        name = re.search(r"<th><code>([^<]+)</code></th>", row)
        if name is None:
            continue
        for dtype, css in zip(dtypes, re.findall(r'<td class="([a-z-]+)"', row), strict=True):
            cells[f"{name[1]}|{dtype}"] = css
    return cells


def test_the_public_page_shows_the_grid_findings_history_and_known(world: World) -> None:
    response = page(world, f"/status/{OWNER}/{PUBLIC}")
    assert response.status_code == 200, response.text
    html = response.text
    assert response.headers["content-type"].startswith("text/html")
    assert "script-src" not in response.headers["content-security-policy"]  # none allowed
    cells = cell_classes(html)
    assert cells["torch.nn.functional.softplus|float32"] == "diverges"
    assert cells["torch.nn.functional.gelu|float16"] == "known"
    assert cells["torch.relu|float32"] == "agrees"
    assert cells["torch.tanh|float64"] == "agrees"  # fixed by the third push
    assert cells["torch.relu|float16"] == "not-covered"
    # each cell with findings links its section: the finding, its repro
    anchor = "cell-torch.nn.functional.softplus--float32"
    assert f'href="#{anchor}"' in html and f'<section id="{anchor}">' in html
    section = html.split(f'<section id="{anchor}">', 1)[1].split("</section>", 1)[0]
    assert "# repro of torch.nn.functional.softplus" in section and "(verified)" in section
    # the finding's first and last commit, and the one that is gone, with its commits
    assert f"First seen at <code>{world.shas[0][:12]}</code>, last seen at <code>" \
           f"{world.shas[2][:12]}</code>" in section
    seen = html.split('id="seen"', 1)[1]
    tanh = next(row for row in seen.split("<tr>") if "ccccccccccc3" in row)
    assert tanh.count(world.shas[1][:12]) == 2 and "gone" in tanh
    history = html.split('id="history"', 1)[1].split("</table>", 1)[0]
    assert [sha[:12] for sha in reversed(world.shas)] == re.findall(
        r"<tr><td><code>([0-9a-f]{12})</code>", history)
    # the known divergence, with what the upstream watch saw of its issue
    known = html.split('id="known"', 1)[1].split("</table>", 1)[0]
    assert "computed in float32 and rounded once" in known and UPSTREAM_ISSUE in known
    assert "closed (checked" in known
    # untrusted text is escaped, and nothing of the other installation's rows shows
    assert HOSTILE not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "torch.leaked_op" not in html and "theirs" not in html


def test_the_check_run_links_the_pull_requests_page_which_shows_its_check(world: World
                                                                          ) -> None:
    base, head = tree("3"), {**tree("pull"), "fastops.py": b"# faster\n"}
    world.github.add_pull(OWNER, PUBLIC, 7, _sha(head), _sha(base), "Faster", "contributor",
                          head_tree=head, files=[{"filename": "fastops.py", "status": "modified",
                                                  "patch": "@@ -1 +1 @@\n+# faster"}],
                          author_association="MEMBER")
    assert page(world, f"/status/{OWNER}/{PUBLIC}/pull/7").text.count("no finished check") == 1
    job = AlignmentJob(app=world.app, queue=world.queue, sandbox=sandbox,
                       status_url=world.url)
    world.queue.enqueue(align_job(f"{OWNER}/{PUBLIC}", 7, {
        "installation_id": INSTALLATION, "repo": f"{OWNER}/{PUBLIC}", "number": 7,
        "head_sha": _sha(head), "trigger": "test"}))
    assert Worker(world.queue, {ALIGN: job}, name="align-test").run_once()
    (run,) = world.github.check_runs_for(OWNER, PUBLIC, _sha(head))
    assert run.details_url == f"{world.url}/status/{OWNER}/{PUBLIC}/pull/7"
    response = page(world, f"/status/{OWNER}/{PUBLIC}/pull/7")
    assert response.status_code == 200 and _sha(head)[:12] in response.text
    cells = cell_classes(response.text)
    # the job's report, judged against the known-divergences file at the pull request's head
    assert cells["torch.tanh|float64"] == "diverges"
    assert cells["torch.nn.functional.gelu|float16"] == "known"
    assert cells["torch.relu|float32"] == "agrees"
    assert page(world, f"/status/{OWNER}/{PUBLIC}/pull/0").status_code == 404


def test_unknown_and_malformed_repositories_are_not_found(world: World) -> None:
    unknown = page(world, f"/status/{OWNER}/nothing-here")
    assert unknown.status_code == 404
    assert page(world, "/status/-bad-/x").status_code == 404
    assert page(world, f"/status/{OWNER}/{PUBLIC}/pull/x").status_code == 400


def test_a_refused_known_file_and_a_broken_configuration_are_told(world: World) -> None:
    html = page(world, f"/status/{OWNER}/{BROKEN}").text
    note = html.split('<p class="known" id="note">', 1)[1].split("</p>", 1)[0]
    assert note.startswith(f"{KNOWN_PATH} was not used: {KNOWN_PATH}:2:")  # names its line
    assert cell_classes(html)["torch.nn.functional.gelu|float16"] == "diverges"
    history = html.split('id="history"', 1)[1].split("</table>", 1)[0]
    refused, broken = re.findall(r"<tr><td><code>[0-9a-f]{12}</code>.*?</tr>", history)
    assert "<td>2</td><td>0</td><td>4</td><td>complete</td>" in refused  # both diverge
    assert "<td>failed: .github/alignbot.yml is invalid" in broken


# -- who may see a private repository's page -------------------------------------------------


def sign_in(world: World, login: str, path: str) -> httpx.Client:
    """A browser signed in to GitHub as ``login`` that asks for ``path``, is sent to sign in
    with GitHub, and comes back signed in to the App."""
    world.github.sign_in(login)
    client = httpx.Client(timeout=30)
    start = client.get(f"{world.url}{path}")
    assert start.status_code == 303 and start.headers["location"].startswith("/login?next=")
    to_github = client.get(f"{world.url}{start.headers['location']}")
    assert to_github.status_code == 303
    assert to_github.headers["location"].startswith(f"{world.github.url}/login/oauth/authorize?")
    back = client.get(to_github.headers["location"])
    assert back.status_code == 302 and "code=" in back.headers["location"]
    signed = client.get(back.headers["location"])
    assert signed.status_code == 303 and signed.headers["location"] == path
    cookie = next(h for h in signed.headers.get_list("set-cookie")
                  if h.startswith(SESSION_COOKIE))
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Secure" not in cookie
    return client


def test_an_anonymous_visitor_is_sent_to_sign_in(world: World) -> None:
    response = page(world, f"/status/{OWNER}/{PRIVATE}")
    assert response.status_code == 303
    assert response.headers["location"] == f"/login?next=/status/{OWNER}/{PRIVATE}"
    assert "torch.tanh" not in response.text


def test_a_user_who_may_read_the_repository_sees_its_page(world: World) -> None:
    with closing(sign_in(world, "alice", f"/status/{OWNER}/{PRIVATE}")) as client:
        response = client.get(f"{world.url}/status/{OWNER}/{PRIVATE}")
        assert response.status_code == 200
        assert "Signed in as alice" in response.text and world.private_sha[:12] in response.text
        assert cell_classes(response.text)["torch.tanh|float64"] == "diverges"


def test_a_user_without_access_gets_what_a_missing_repository_gets(world: World) -> None:
    missing = page(world, f"/status/{OWNER}/nothing-here")
    with closing(sign_in(world, "mallory", f"/status/{OWNER}/{PRIVATE}")) as client:
        for path in (f"/status/{OWNER}/{PRIVATE}", f"/status/{OWNER}/{PRIVATE}/pull/1"):
            response = client.get(f"{world.url}{path}")
            assert (response.status_code, response.text) == (404, missing.text)
        # the public page is still open to them
        assert client.get(f"{world.url}/status/{OWNER}/{PUBLIC}").status_code == 200


def test_a_callback_with_a_forged_state_or_code_is_refused(world: World) -> None:
    world.github.sign_in("alice")
    with httpx.Client(timeout=30) as client:
        to_github = client.get(f"{world.url}/login?next=/status/{OWNER}/{PRIVATE}")
        back = client.get(to_github.headers["location"]).headers["location"]
        forged = re.sub(r"state=[^&]+", "state=forged", back)
        refused = client.get(forged)
        assert refused.status_code == 400 and SESSION_COOKIE not in refused.headers.get(
            "set-cookie", "")
        # without the state cookie the right state is refused as well (another browser's)
        assert httpx.get(back, timeout=30).status_code == 400
        # a code GitHub does not know: refused after the state matched
        wrong = re.sub(r"code=[^&]+", "code=unknown", back)
        assert client.get(wrong).status_code == 400
        assert client.get(f"{world.url}/status/{OWNER}/{PRIVATE}").status_code == 303
    # an open redirect is not one: next is a status page or nothing
    with httpx.Client(timeout=30) as client:
        to_github = client.get(f"{world.url}/login?next=https://evil.example/")
        back = client.get(to_github.headers["location"]).headers["location"]
        assert client.get(back).headers["location"] == "/"


def test_the_session_cookie_is_sealed_and_secure_behind_https() -> None:
    sessions = Sessions(SESSION_KEY, secure=True)
    sealed = sessions.seal({"login": "alice", "token": "ghu_x"})
    assert "alice" not in sealed and "ghu_x" not in sealed
    assert sessions.unseal(sealed, 60) == {"login": "alice", "token": "ghu_x"}
    assert Sessions("another key" * 4, secure=True).unseal(sealed, 60) is None
    assert sessions.unseal(sealed[:-2] + "AA", 60) is None
    response = Response()
    sessions.set(response, STATE_COOKIE, {"state": "s"}, 60)
    header = response.headers["set-cookie"]
    assert "HttpOnly" in header and "SameSite=lax" in header and "Secure" in header


class Directory:
    """``ViewerDirectory`` answers, for the rule alone."""

    def __init__(self, held: Held | None, readers: set[str]) -> None:
        self._held, self.readers = held, readers
        self.asked: list[str] = []

    def held(self, full_name: str) -> Held | None:
        return self._held

    def can_read(self, token: str, full_name: str) -> bool:
        self.asked.append(token)
        return token in self.readers


@pytest.mark.parametrize(("private", "viewer", "outcome"), [
    (False, Viewer(), INSTALLATION),
    (True, Viewer(), Denial.LOGIN),
    (True, Viewer("mallory", "t-mallory"), Denial.NOT_INSTALLED),
    (True, Viewer("alice", "t-alice"), INSTALLATION),
])
def test_authorize_viewer(private: bool, viewer: Viewer, outcome: object) -> None:
    directory = Directory(Held(f"{OWNER}/{PRIVATE}", INSTALLATION, private), {"t-alice"})
    answer = authorize_viewer(viewer, f"{OWNER.upper()}/{PRIVATE}", directory)
    if isinstance(answer, NotAllowed):
        assert answer.denial is outcome
    else:
        assert (answer.repo, answer.installation_id) == (f"{OWNER}/{PRIVATE}", outcome)
    assert directory.asked == ([viewer.token] if private and viewer.token else [])
    assert isinstance(authorize_viewer(viewer, "not a name", directory), NotAllowed)
    assert authorize_viewer(viewer, "a/b", Directory(None, set())) == NotAllowed(
        "a/b", Denial.NOT_INSTALLED)


# -- as a browser draws it -------------------------------------------------------------------


COLOURS = {"agrees": (0x2D, 0xA4, 0x4E), "known": (0xD4, 0xA7, 0x2C),
           "diverges": (0xCF, 0x22, 0x2E), "not-covered": (0xEA, 0xEE, 0xF2)}


@pytest.mark.slow
def test_headless_chromium_draws_the_grid_in_its_colours(world: World, tmp_path: Path) -> None:
    pixels = screenshot(f"{world.url}/status/{OWNER}/{PUBLIC}", tmp_path / "status.png")
    assert pixels.std() > 10  # not a blank page
    for outcome, colour in COLOURS.items():
        share = np.all(pixels == np.array(colour, dtype=np.uint8), axis=-1).mean()
        # a grid cell is about 80 × 25 pixels of 1100 × 1400; the legend adds a few more
        assert share > 0.0005, (outcome, share)
