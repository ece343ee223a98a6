"""Worker processes: completed checks per minute with 1, 2 and 4 ``alignbot worker``
processes, and the webhook acknowledgement latency while they are busy.

For each count it starts the deployed topology (``alignbot.bot.stack``: one ``alignbot serve
--no-worker`` and N workers, one thread each, on PostgreSQL) against the GitHub test server,
delivers one signed ``pull_request.opened`` per pull request at once, and times the checks
from the first delivery to the last job done. Each check is the whole path of a job (check
run, archive, sandbox with a ``sleep`` setup that then fails, comment), so the figure is how
well workers share the queue, not the engine's speed. While they run, ``pull_request.closed``
deliveries (answered, recorded, no job) probe the web process at ``--probe-rate`` per second.

    source scripts/postgres.sh && .venv/bin/python benchmarks/workers.py
    .venv/bin/python benchmarks/workers.py --checks 8 --counts 1,2 --json out.json

Needs PostgreSQL: ``ALIGNBOT_TEST_POSTGRES_URL`` (scripts/postgres.sh sets it); its tables are
dropped before each count.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import MetaData, func, select

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from alignbot.bot.demo import SECRET, wait_for  # noqa: E402
from alignbot.bot.jobs import ALIGN  # noqa: E402
from alignbot.bot.stack import Stack, github_test_env, quick_check_config, seed_pull_requests  # noqa: E402
from alignbot.bot.storage import JOBS, JobState, make_engine, transaction  # noqa: E402
from alignbot.bot.testing.github import GitHubServer  # noqa: E402

OWNER, INSTALLATION = "bench-org", 7070


def empty(url: str) -> None:
    engine = make_engine(url)
    tables = MetaData()
    tables.reflect(engine)
    tables.drop_all(engine)
    engine.dispose()


def done_jobs(url: str) -> tuple[int, Any]:
    """How many checks are done, and when the last one was."""
    engine = make_engine(url)
    try:
        with transaction(engine) as conn:
            count, last = conn.execute(select(func.count(), func.max(JOBS.c.updated_at)).where(
                JOBS.c.kind == ALIGN, JOBS.c.state == JobState.DONE)).one()
    finally:
        engine.dispose()
    return int(count), last


class Prober(threading.Thread):
    """Signed deliveries that queue no job, at ``rate`` per second, each one's latency kept."""

    def __init__(self, github: GitHubServer, url: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.github, self.url, self.interval = github, url, 1 / rate
        self.latencies: list[float] = []
        self.failures = 0
        self.stop = threading.Event()

    def run(self) -> None:
        payload = self.github.webhook("pull_request.closed", OWNER, "lib0", number=1)
        with httpx.Client(timeout=30) as client:
            next_at = time.monotonic()
            while not self.stop.is_set():
                headers, body = self.github.delivery("pull_request", payload, SECRET)
                started = time.monotonic()
                reply = client.post(f"{self.url}/webhook", content=body, headers=headers)
                self.latencies.append(time.monotonic() - started)
                self.failures += reply.status_code >= 300
                next_at += self.interval
                self.stop.wait(max(0.0, next_at - time.monotonic()))


def one_count(workers: int, checks: int, setup_seconds: float, probe_rate: float,
              url: str, folder: Path) -> dict[str, Any]:
    empty(url)
    with GitHubServer(validate_requests=False) as github:
        heads = seed_pull_requests(github, OWNER, INSTALLATION, checks, 1,
                                   quick_check_config(setup_seconds))
        env = github_test_env(github, url, ALIGNBOT_WORKERS="1")
        with Stack(env, folder / f"workers-{workers}", workers=workers) as stack:
            wait_for(lambda: all("started" in w.log_tail() for w in stack.workers), 90,
                     "the workers to start")
            prober = Prober(github, stack.url, probe_rate)
            started = time.time()
            with httpx.Client(timeout=30) as client:
                for repo, number in heads:
                    payload = github.webhook("pull_request.opened", OWNER, repo, number=number)
                    headers, body = github.delivery("pull_request", payload, SECRET)
                    assert client.post(f"{stack.url}/webhook", content=body,
                                       headers=headers).status_code == 202
            prober.start()
            wait_for(lambda: done_jobs(url)[0] == len(heads), 60 + 20 * checks,
                        "every check")
            prober.stop.set()
            prober.join()
            _, last = done_jobs(url)
    seconds = last.timestamp() - started
    latencies = sorted(prober.latencies)
    return {"workers": workers, "checks": len(heads), "seconds": round(seconds, 2),
            "checks_per_minute": round(len(heads) * 60 / seconds, 1),
            "ack_p50_ms": round(1000 * statistics.median(latencies), 1),
            "ack_p99_ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 1),
            "probes": len(latencies), "probe_failures": prober.failures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="1,2,4", help="worker processes to try (1,2,4)")
    parser.add_argument("--checks", type=int, default=24, help="pull requests to check (24)")
    parser.add_argument("--setup-seconds", type=float, default=1.0,
                        help="each check's sleep in the sandbox (1)")
    parser.add_argument("--probe-rate", type=float, default=20.0,
                        help="latency probes per second while the workers are busy (20)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    url = os.environ.get("ALIGNBOT_TEST_POSTGRES_URL")
    if not url:
        print("workers.py needs PostgreSQL: source scripts/postgres.sh first", file=sys.stderr)
        return 2
    counts = [int(c) for c in args.counts.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="alignbot-bench-") as tmp:
        for workers in counts:
            rows.append(one_count(workers, args.checks, args.setup_seconds, args.probe_rate,
                                  url, Path(tmp)))
            print(f"{workers} worker(s): {rows[-1]}", flush=True)
    base = rows[0]["checks_per_minute"]
    print(f"\n{args.checks} checks, {args.setup_seconds:g} s in the sandbox each, "
          f"{os.cpu_count()} cores")
    print("| workers | checks/min | vs first | ack p50 | ack p99 |")
    print("| --- | --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['workers']} | {row['checks_per_minute']} | "
              f"{row['checks_per_minute'] / base:.2f}x | {row['ack_p50_ms']} ms | "
              f"{row['ack_p99_ms']} ms |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
