"""The cost of one ``GET /metrics`` scrape as the queue grows: the App's registry rendered,
its queue gauges read from a SQLite file database holding ``--active`` queued and running
jobs and ``--finished`` done ones (spread over the job kinds).

    .venv/bin/python benchmarks/metrics_scrape.py                  # 10,000 active, 200,000 done
    .venv/bin/python benchmarks/metrics_scrape.py --active 100 --finished 0 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def fill(database: Path, active: int, finished: int) -> Any:
    """A migrated database with the jobs; returns its engine."""
    sys.path.insert(0, str(ROOT))
    from sqlalchemy import insert

    from alignbot.bot.jobs import ALIGN, COMMAND, REMINDER_SWEEP
    from alignbot.bot.storage import JOBS, make_engine, migrate, transaction, utcnow

    engine = make_engine(f"sqlite:///{database}")
    migrate(engine)
    kinds, now = (ALIGN, COMMAND, REMINDER_SWEEP), utcnow()
    rows = [{"kind": kinds[n % 3], "key": f"o/r#{n}", "payload": {},
             "state": ("queued", "running")[n % 2] if n < active else "done", "attempts": 1,
             "created_at": now, "updated_at": now, "available_at": now,
             "started_at": now if n < active and n % 2 else None}
            for n in range(active + finished)]
    with transaction(engine) as conn:
        for start in range(0, len(rows), 10_000):
            conn.execute(insert(JOBS), rows[start:start + 10_000])
    return engine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--active", type=int, default=10_000, help="queued and running jobs")
    parser.add_argument("--finished", type=int, default=200_000, help="done jobs")
    parser.add_argument("--repeat", type=int, default=20, help="timed scrapes")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="alignbot-scrape-") as tmp:
        engine = fill(Path(tmp) / "jobs.db", args.active, args.finished)
        from alignbot.bot.metrics import Metrics

        metrics = Metrics(engine)
        for route in ("/repos/o/r/pulls/1", "/repos/o/r/check-runs", "/app"):
            metrics.github_request("GET", route, 200, {"x-ratelimit-remaining": "4999"})
        metrics.exposition()  # warm: statements compiled, connections open
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            body = metrics.exposition()
            times.append((time.perf_counter() - started) * 1000)
        engine.dispose()
    figures = {"active": args.active, "finished": args.finished, "repeat": args.repeat,
               "scrape_ms": {"median": statistics.median(times), "max": max(times)},
               "bytes": len(body)}
    print(f"{args.active} active and {args.finished} finished jobs: one scrape "
          f"{figures['scrape_ms']['median']:.1f} ms median, {max(times):.1f} ms max "
          f"({len(body)} bytes)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
