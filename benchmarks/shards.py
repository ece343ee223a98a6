"""Sharded checks: the wall time of one pull request's check run whole and split into N
shard jobs, on ``--workers`` ``alignbot worker`` processes (one thread each) on PostgreSQL.

For each shard count it starts the deployed topology (``alignbot.bot.stack``) against the GitHub
test
server, delivers one signed ``pull_request.opened`` for a pull request whose configuration
runs the candidate ``torch`` on ``--ops`` with ``--draws``, and times the delivery to the
completed check run. The merged report is compared with the whole one (specs, programs,
findings).

    source scripts/postgres.sh && .venv/bin/python benchmarks/shards.py
    .venv/bin/python benchmarks/shards.py --shards 1,2 --workers 2 --draws 5

Needs PostgreSQL: ``ALIGNBOT_TEST_POSTGRES_URL`` (scripts/postgres.sh sets it); its tables are
dropped before each count.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from alignbot.bot.demo import SECRET, wait_for  # noqa: E402
from alignbot.bot.jobs import ALIGN, ALIGN_SHARD  # noqa: E402
from alignbot.bot.queue import SqlJobQueue  # noqa: E402
from alignbot.bot.stack import Stack, github_test_env, seed_pull_requests  # noqa: E402
from alignbot.bot.storage import make_engine  # noqa: E402
from alignbot.bot.testing.github import GitHubServer  # noqa: E402
from benchmarks.workers import empty  # noqa: E402

OWNER, INSTALLATION = "bench-org", 7171


def config(ops: str, draws: int, shards: int) -> bytes:
    return (f"candidate:\n  preset: torch\nops:\n  - paths: [\"ops.py\"]\n"
            f"    specs: [\"{ops}\"]\ndraws: {draws}\nshards: {shards}\n").encode()


def report_of(url: str) -> dict[str, Any]:
    """The check's report: the whole job's, or the merging shard's."""
    engine = make_engine(url)
    try:
        queue = SqlJobQueue(engine)
        jobs = [*queue.list(kind=ALIGN), *queue.list(kind=ALIGN_SHARD)]
    finally:
        engine.dispose()
    (report,) = [job.result["report"] for job in jobs if job.result and "report" in job.result]
    return dict(report)


def one_count(shards: int, args: argparse.Namespace, url: str, folder: Path
              ) -> dict[str, Any]:
    empty(url)
    with GitHubServer(validate_requests=False) as github:
        ((repo, number), sha), = seed_pull_requests(
            github, OWNER, INSTALLATION, 1, 1, config(args.ops, args.draws, shards)).items()
        env = github_test_env(github, url, ALIGNBOT_WORKERS="1",
                              ALIGNBOT_MAX_SHARDS=str(max(shards, 1)))
        with Stack(env, folder / f"shards-{shards}", workers=args.workers) as stack:
            wait_for(lambda: all("started" in w.log_tail() for w in stack.workers), 90,
                     "the workers to start")
            payload = github.webhook("pull_request.opened", OWNER, repo, number=number)
            headers, body = github.delivery("pull_request", payload, SECRET)
            started = time.monotonic()
            assert httpx.post(f"{stack.url}/webhook", content=body, headers=headers,
                              timeout=30).status_code == 202
            wait_for(lambda: any(run.status == "completed" for run in
                                 github.check_runs_for(OWNER, repo, sha)), 1800, "the check")
            seconds = time.monotonic() - started
    report = report_of(url)
    return {"shards": shards, "seconds": round(seconds, 1), "specs": report["specs"],
            "programs": report["programs_run"], "findings": len(report["findings"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", default="1,2,4", help="shard counts to try (1,2,4)")
    parser.add_argument("--workers", type=int, default=4, help="worker processes (4)")
    parser.add_argument("--ops", default="activations.*", help="the specs (activations.*)")
    parser.add_argument("--draws", type=int, default=10, help="draws per spec (10)")
    args = parser.parse_args(argv)
    url = os.environ.get("ALIGNBOT_TEST_POSTGRES_URL")
    if not url:
        print("shards.py needs PostgreSQL: source scripts/postgres.sh first", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="alignbot-bench-") as tmp:
        for shards in (int(count) for count in args.shards.split(",")):
            rows.append(one_count(shards, args, url, Path(tmp)))
            print(f"{shards} shard(s): {rows[-1]['seconds']} s", flush=True)
    whole = rows[0]
    print(f"\n{len(whole['specs'])} specs ({args.ops}), {args.draws} draws each, "
          f"{args.workers} workers, {os.cpu_count()} cores")
    print("| shards | seconds | vs first | programs | findings | same specs |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['shards']} | {row['seconds']} | {whole['seconds'] / row['seconds']:.2f}x"
              f" | {row['programs']} | {row['findings']} | {row['specs'] == whole['specs']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
