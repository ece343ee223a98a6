"""``python -m alignbot.bot.stack``: the App as it is deployed, on loopback and without Docker: one
``alignbot serve --no-worker`` and N ``alignbot worker`` processes sharing one PostgreSQL
database, the topology of ``compose.yaml`` (``scripts/stack.sh`` starts a throwaway
PostgreSQL first). The tests and ``benchmarks/workers.py`` start their processes with it."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from .demo import SECRET, _patch, _sha, free_port, wait_for

STARTUP_SECONDS = 90.0
# the commands of compose.yaml's services (a test holds the two to the same)
WEB_ARGS = ("serve", "--no-worker")
WORKER_ARGS = ("worker",)


@dataclass
class Process:
    """One process of the App, ``alignbot <args>``, its output appended to ``log``."""

    name: str
    args: list[str]
    env: dict[str, str]
    log: Path
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    metrics_url: str | None = None  # a worker's own /metrics

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen([sys.executable, "-m", "alignbot.bot.cli", *self.args],
                                          env=self.env, stdout=out, stderr=out)

    @property
    def pid(self) -> int:
        assert self.popen is not None, f"{self.name} was not started"
        return self.popen.pid

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash or an out-of-memory kill would end it."""
        if self.running():
            assert self.popen is not None
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait()

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM (a worker finishes its running jobs), SIGKILL after ``timeout``."""
        if not self.running():
            return
        assert self.popen is not None
        self.popen.terminate()
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


class Stack:
    """One web process on ``port`` and ``workers`` worker processes, each with ``env`` (the
    service's ``ALIGNBOT_*`` settings; ``ALIGNBOT_DATABASE_URL`` must be PostgreSQL), their
    logs in ``folder``."""

    def __init__(self, env: Mapping[str, str], folder: Path, workers: int = 2,
                 port: int | None = None) -> None:
        self.env = dict(env)
        self.folder = folder
        self.port = port or free_port()
        folder.mkdir(parents=True, exist_ok=True)
        self.web = Process("web", [*WEB_ARGS],
                           {**self.env, "ALIGNBOT_HOST": "127.0.0.1",
                            "ALIGNBOT_PORT": str(self.port)}, folder / "web.log")
        self.workers: list[Process] = []
        self._wanted = workers

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = STARTUP_SECONDS) -> None:
        """The web process first (it migrates the database), then the workers; returns once
        the web answers its health check."""
        self.web.start()
        wait_for(self.healthy, timeout, "the web process to answer /healthz")
        for _ in range(self._wanted):
            self.add_worker()

    def add_worker(self) -> Process:
        """A worker, its ``/metrics`` on a port of its own (``metrics_url``)."""
        port = free_port()
        worker = Process(f"worker-{len(self.workers) + 1}", [*WORKER_ARGS],
                         {**self.env, "ALIGNBOT_HOST": "127.0.0.1",
                          "ALIGNBOT_METRICS_PORT": str(port)},
                         self.folder / f"worker-{len(self.workers) + 1}.log")
        worker.metrics_url = f"http://127.0.0.1:{port}/metrics"
        worker.start()
        self.workers.append(worker)
        return worker

    def healthy(self) -> bool:
        if self.web.popen is not None and not self.web.running():
            raise RuntimeError(f"the web process exited:\n{self.web.log_tail()}")
        try:
            return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def exited(self) -> list[Process]:
        """Processes that were started and are no longer running."""
        return [p for p in (self.web, *self.workers) if p.popen is not None and not p.running()]

    def stop(self) -> None:
        """Workers first (each finishes its running jobs), then the web process."""
        threads = [threading.Thread(target=p.stop) for p in self.workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.web.stop()

    def __enter__(self) -> Stack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()


# --------------------------------------------------------------------------- a busy world

def github_test_env(github: Any, database_url: str, **env: str) -> dict[str, str]:
    """The settings of every process of a stack whose GitHub is the test server ``github``
    (webhooks signed with ``alignbot.bot.demo.SECRET``); ``env`` adds or overrides."""
    return {**os.environ, "ALIGNBOT_APP_ID": str(github.app_id),
            "ALIGNBOT_PRIVATE_KEY": github.private_key_pem, "ALIGNBOT_WEBHOOK_SECRETS": SECRET,
            "ALIGNBOT_GITHUB_API_URL": github.url, "ALIGNBOT_DATABASE_URL": database_url,
            "ALIGNBOT_GITHUB_WRITE_INTERVAL": "0", **env}


# A check that fails in its setup after ``seconds`` in the sandbox: the whole path of a job
# (check run, archive, sandbox, comment) with no engine and no torch import to wait for.
def quick_check_config(seconds: float = 1.5) -> bytes:
    return (f"candidate:\n  prelude: import torch\n  setup: [\"sleep {seconds:g}; exit 3\"]\n"
            "ops:\n  - paths: [\"ops.py\"]\n    specs: [\"activations.softplus\"]\n").encode()


def seed_pull_requests(github: Any, owner: str, installation: int, repos: int, pulls: int,
                       config: bytes) -> dict[tuple[str, int], str]:
    """On the GitHub test server ``github``: ``repos`` repositories (``lib0``, …) of one
    installation with ``pulls`` open pull requests each that change ``ops.py`` under
    ``config``; their head shas by (repository, number)."""
    if installation not in github.installations:
        github.add_installation(installation, owner)
    base = {".github/alignbot.yml": config, "ops.py": b"def op(x):\n    return x\n"}
    heads = {}
    for r in range(repos):
        github.add_repo(owner, f"lib{r}", installation, files_by_ref={_sha(base): base})
        for number in range(1, pulls + 1):
            head = {**base, "ops.py": f"def op(x):\n    return x * {number}\n".encode()}
            github.add_pull(owner, f"lib{r}", number, _sha(head), _sha(base), "Faster op",
                            "contributor", head_tree=head, author_association="MEMBER",
                            files=[{"filename": "ops.py", "status": "modified", "patch": _patch(
                                "ops.py", base["ops.py"], head["ops.py"])}])
            heads[(f"lib{r}", number)] = _sha(head)
    return heads


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m alignbot.bot.stack", description=__doc__)
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--port", type=int, help="the web process's port (default: a free one)")
    parser.add_argument("--logs", type=Path, help="folder for the processes' logs (default: "
                        "a new temporary folder)")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    from .serve import Role, role_problem
    from .settings import SettingsError, load_settings

    try:
        problem = role_problem(load_settings(), Role.WORKER)
    except SettingsError as exc:
        parser.error(f"the service cannot start:\n{exc}")
    if problem:
        parser.error(problem)
    folder = args.logs or Path(tempfile.mkdtemp(prefix="alignbot-stack-"))
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    with Stack(os.environ, folder, args.workers, args.port) as stack:
        print(f"web: {stack.url} (pid {stack.web.pid}); workers: "
              f"{', '.join(str(w.pid) for w in stack.workers)}; logs in {folder}", flush=True)
        while not stopping.wait(1):
            gone = stack.exited()
            if gone:
                print(f"{gone[0].name} exited; stopping the stack:\n{gone[0].log_tail()}",
                      file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
