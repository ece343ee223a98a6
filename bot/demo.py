"""``alignbot demo``: the app end to end against the GitHub test server, on examples/.

A repository (examples/fastops: a kernel library that replaces softplus and mish, with its
.github/alignbot.yml) gets a pull request (examples/pull-request/fastops.py) that breaks the
softplus backward. The service runs here on loopback, receives the signed webhook, checks
the pull request in the sandbox, and posts a check run and one comment on the test server.
"""

from __future__ import annotations

import difflib
import hashlib
import random
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from .serve import Service, build
from .settings import Settings, load_settings
from .testing.github import GitHubServer, validation_available

EXAMPLES = Path(str(resources.files("alignbot.bot.examples")))  # examples/, also from a wheel
OWNER, REPO, NUMBER, INSTALLATION = "demo-org", "fastops", 1, 4242
SECRET = "demo webhook secret"


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def _sha(files: dict[str, bytes]) -> str:
    digest = hashlib.sha1()
    for path, data in sorted(files.items()):
        digest.update(path.encode() + b"\0" + data)
    return digest.hexdigest()


def _patch(path: str, before: bytes, after: bytes) -> str:
    diff = difflib.unified_diff(before.decode().splitlines(), after.decode().splitlines(),
                                lineterm="", n=3)
    return "\n".join(line for line in diff if not line.startswith(("---", "+++")))


def seed(server: GitHubServer, head_file: Path) -> tuple[str, str]:
    """The example repository at its main branch and the pull request's head."""
    base = _files(EXAMPLES / "fastops")
    head = {**base, "fastops.py": head_file.read_bytes()}
    base_sha, head_sha = _sha(base), _sha(head)
    server.add_installation(INSTALLATION, OWNER)
    server.add_repo(OWNER, REPO, INSTALLATION, files_by_ref={base_sha: base})
    changed = [{"filename": "fastops.py", "status": "modified",
                "patch": _patch("fastops.py", base["fastops.py"], head["fastops.py"])}]
    server.add_pull(OWNER, REPO, NUMBER, head_sha, base_sha, "Speed up the softplus backward",
                    "contributor", head_tree=head, files=changed,
                    author_association="MEMBER")
    return base_sha, head_sha


def settings_for(server: GitHubServer, folder: Path, port: int) -> Settings:
    return load_settings({
        "ALIGNBOT_APP_ID": str(server.app_id), "ALIGNBOT_PRIVATE_KEY": server.private_key_pem,
        "ALIGNBOT_WEBHOOK_SECRETS": SECRET, "ALIGNBOT_GITHUB_API_URL": server.url,
        "ALIGNBOT_DATABASE_URL": f"sqlite:///{folder / 'alignbot.db'}",
        "ALIGNBOT_PORT": str(port), "ALIGNBOT_GITHUB_WRITE_INTERVAL": "0"})


_PORTS = random.SystemRandom()  # not the module's generator: a run that seeds it draws ports too


def free_port() -> int:
    """A free port for a server started next, drawn below the kernel's ephemeral range: a port
    the kernel hands out (as bind to port 0 does) may be taken, before the server binds it, as
    the source port of any outgoing connection on the machine."""
    low = _ephemeral_low()
    draws = [_PORTS.randrange(10_000, low) for _ in range(50)] if low > 10_000 else []
    for port in [*draws, 0]:  # the kernel's choice when none of the draws is free
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            found: int = sock.getsockname()[1]
            return found
    raise OSError("no port is free on 127.0.0.1")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


@contextmanager
def running(settings: Settings) -> Iterator[Service]:
    """The service on loopback, with its worker, until the block ends."""
    service = build(settings)
    service.worker.start()
    server = uvicorn.Server(uvicorn.Config(service.app, host="127.0.0.1", port=settings.port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield service
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        service.worker.stop(timeout=30)


def deliver(server: GitHubServer, port: int, event: str,
            payload: dict[str, Any]) -> httpx.Response:
    headers, body = server.delivery(event, payload, SECRET)
    return httpx.post(f"http://127.0.0.1:{port}/webhook", content=body, headers=headers,
                      timeout=30)


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline, pause = time.monotonic() + timeout, 0.05
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what} after {timeout:g} s")
        time.sleep(pause)
        pause = min(pause * 2, 0.5)  # quick for what is quick, then twice a second


def run_demo(say: Callable[[str], None] = print, timeout: float = 900) -> int:
    checked = validation_available()  # GitHub's schemas need jsonschema, a test dependency
    with GitHubServer(validate_requests=checked) as github, \
            tempfile.TemporaryDirectory(prefix="alignbot-demo-") as tmp:
        _, head_sha = seed(github, EXAMPLES / "pull-request" / "fastops.py")
        port = free_port()
        say(f"GitHub test server on {github.url}; {OWNER}/{REPO} has pull request #{NUMBER}: "
            "'Speed up the softplus backward'")
        with running(settings_for(github, Path(tmp), port)):
            payload = github.webhook("pull_request.opened", OWNER, REPO, number=NUMBER)
            reply = deliver(github, port, "pull_request", payload)
            say(f"webhook pull_request.opened -> {reply.status_code} {reply.text}")
            say("the worker fetches the head, runs the check in the sandbox, minimizes …")

            def done() -> bool:
                runs = github.check_runs_for(OWNER, REPO, head_sha)
                return bool(runs) and runs[0].status == "completed" and bool(
                    github.comments_on(OWNER, REPO, NUMBER))

            wait_for(done, timeout, "the check run")
        run = github.check_runs_for(OWNER, REPO, head_sha)[0]
        comment = github.comments_on(OWNER, REPO, NUMBER)[0]
        say(f"\n=== check run '{run.name}': {run.conclusion} — {run.output.get('title')}\n")
        say(run.output.get("summary", ""))
        say(f"=== the comment by {comment.user.login} on pull request #{NUMBER}:\n")
        say(comment.body)
    return 0
