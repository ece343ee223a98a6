"""`alignbot serve` in its own process, as the container runs it, for end-to-end tests.

The one way the tests start the real service: ``Service(github, folder, **env)`` with the
GitHub test server as GitHub; ``env`` adds or overrides ``ALIGNBOT_*`` variables (a key
file instead of the key, a shorter wait bound, …). The service's log is ``folder/service.log``.
The merge-base check is off (``ALIGNBOT_BASELINE=false``): a test of it turns it on, the
others do not pay for a second check of every pull request.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from alignbot.bot.demo import (
    INSTALLATION,
    NUMBER,
    OWNER,
    REPO,
    SECRET,
    _patch,
    _sha,
    free_port,
    wait_for,
)

__all__ = ["NUMBER", "OWNER", "REPO", "SECRET", "Service", "completed", "open_pull"]


class Service:
    """`alignbot serve` with the environment the container would get."""

    def __init__(self, github: Any, folder: Path, **env: str) -> None:
        self.port = free_port()
        self.folder = folder
        self.env = {**os.environ, "ALIGNBOT_APP_ID": str(github.app_id),
                    "ALIGNBOT_PRIVATE_KEY": github.private_key_pem,
                    "ALIGNBOT_WEBHOOK_SECRETS": SECRET,
                    "ALIGNBOT_GITHUB_API_URL": github.url,
                    "ALIGNBOT_DATABASE_URL": f"sqlite:///{folder / 'alignbot.db'}",
                    "ALIGNBOT_PORT": str(self.port), "ALIGNBOT_GITHUB_WRITE_INTERVAL": "0",
                    "ALIGNBOT_BASELINE": "false", **env}
        if "ALIGNBOT_PRIVATE_KEY_FILE" in env:
            self.env.pop("ALIGNBOT_PRIVATE_KEY", None)
        self.log = folder / "service.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        for attempt in range(3):  # a port another process took since free_port: another one
            seen = len(self.log_text())
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen([sys.executable, "-m", "alignbot.bot.cli", "serve"],
                                             env=self.env, stdout=log, stderr=log)
            try:
                wait_for(self._healthy, 60, "the service to start")
                return
            except RuntimeError:
                if attempt == 2 or "address already in use" not in self.log_text()[seen:]:
                    raise
                self.port = free_port()
                self.env["ALIGNBOT_PORT"] = str(self.port)

    def _healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"the service exited: {self.log.read_text()[-2000:]}")
        try:
            return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def deliver(self, github: Any, event: str, payload: dict[str, Any]) -> httpx.Response:
        """Sign ``payload`` as GitHub would and POST it to the service."""
        headers, body = github.delivery(event, payload, SECRET)
        return httpx.post(f"{self.url}/webhook", content=body, headers=headers, timeout=30)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def completed(github: Any, sha: str, owner: str = OWNER, repo: str = REPO,
              number: int = NUMBER) -> bool:
    """The check run for ``sha`` is completed and the comment (posted after it) names ``sha``."""
    runs = github.check_runs_for(owner, repo, sha)
    comments = github.comments_on(owner, repo, number)
    return bool(runs) and all(run.status == "completed" for run in runs) and any(
        sha[:12] in comment.body for comment in comments)


def open_pull(github: Any, base: dict[str, bytes], head: dict[str, bytes], *,
              number: int = NUMBER, title: str = "A change", author: str = "contributor",
              association: str = "MEMBER", owner: str = OWNER, repo: str = REPO) -> str:
    """Pull request ``number`` from the tree ``base`` (the repository's main branch, created
    with the App's installation when new) to ``head``; its files and patches are the
    difference of the two trees. Returns the head's sha."""
    base_sha, head_sha = _sha(base), _sha(head)
    if INSTALLATION not in github.installations:
        github.add_installation(INSTALLATION, owner)
    if f"{owner}/{repo}".lower() not in github.repos:
        github.add_repo(owner, repo, INSTALLATION, files_by_ref={base_sha: base})
    files = []
    for path in sorted(set(base) | set(head)):
        before, after = base.get(path), head.get(path)
        if before == after:
            continue
        status = "added" if before is None else "removed" if after is None else "modified"
        files.append({"filename": path, "status": status,
                      "patch": _patch(path, before or b"", after or b"")})
    github.add_pull(owner, repo, number, head_sha, base_sha, title, author, head_tree=head,
                    files=files, author_association=association)
    return head_sha
