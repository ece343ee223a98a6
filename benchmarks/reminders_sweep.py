"""One reminder sweep over a simulated organisation on the GitHub test server: API calls by
kind, wall time, and calls per 100 open pull requests.

    .venv/bin/python benchmarks/reminders_sweep.py                   # 50 repos x 200 PRs
    .venv/bin/python benchmarks/reminders_sweep.py --repos 5 --prs 100 --weeks 2 --json out.json

Each repository's pull requests cycle through a fixed mix (per 20): 12 fresh (a person acted
in the last 6 days), 2 stale drafts, 1 stale with an exempt label, and 5 stale ones that get a
reminder: approved (a note to the maintainers), changes requested (the author), a review
requested (the reviewer), no review on code-owned paths (the code owners), no review
elsewhere (the maintainers). The sweep runs with no write pacing (the service waits 1 s
between writes) and GitHub's hourly limit lifted on the test server (see the output for the
hours a real installation would need).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from alignbot.bot.github import ApiOptions, GitHubApp  # noqa: E402
from alignbot.bot.reminders import (  # noqa: E402
    WEEKDAYS,
    ApiLimits,
    SweepJob,
    SweepOptions,
    SweepReport,
    run_inline,
)
from alignbot.bot.storage import InstallationRow, make_engine, migrate, transaction  # noqa: E402
from alignbot.bot.testing.github import GitHubServer, rate_limits  # noqa: E402

ORG, INSTALLATION, BASE = "bench-org", 777, "0" * 40
GITHUB_HOURLY = 5000  # an installation's default hourly budget on github.com
MIX = ["fresh"] * 12 + ["draft"] * 2 + ["exempt", "approved", "changes", "requested",
                                        "owned", "plain"]


def _sha(*parts: object) -> str:
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()


def _config(now: datetime) -> str:
    return ("candidate:\n  preset: torch\nreminders:\n  enabled: true\n"
            f"  weekday: {WEEKDAYS[now.weekday()]}\n  hour: {now.hour}\n"
            "  maintainers: [maint1, maint2]\n  exempt_labels: [on-hold]\n")


def seed(server: GitHubServer, repos: int, prs: int, now: datetime) -> list[str]:
    """The organisation: ``repos`` repositories of ``prs`` open pull requests each."""
    server.add_installation(INSTALLATION, ORG)
    files = {".github/alignbot.yml": _config(now), ".github/CODEOWNERS": "ops/** @ops-owner\n",
             "README.md": "x\n", "ops/add.py": "x\n"}
    names = []
    for r in range(repos):
        name = f"repo{r:03d}"
        names.append(f"{ORG}/{name}")
        repo = server.add_repo(ORG, name, INSTALLATION, files_by_ref={BASE: files})
        for n in range(1, prs + 1):
            _pull(server, repo, name, n, MIX[n % len(MIX)], now)
    return names


def _pull(server: GitHubServer, repo: Any, name: str, n: int, kind: str, now: datetime) -> None:
    # distinct seconds, so the listing's keyset cursor moves on every pull request
    age = timedelta(days=1 + n % 6) if kind == "fresh" else timedelta(days=8 + n % 30)
    created = now - age - timedelta(seconds=n)
    head = _sha(name, n)
    files = [{"filename": "ops/add.py" if kind == "owned" else "README.md"}]
    server.add_pull(ORG, name, n, head, BASE, f"Change {n}", f"dev{n % 17}", files=files,
                    draft=kind == "draft", labels=["on-hold"] if kind == "exempt" else [],
                    created_at=created, updated_at=created)
    repo.commits[head].date = created
    moment = created + timedelta(hours=1)
    if kind == "approved":
        server.add_review(ORG, name, n, "rev1", "APPROVED", submitted_at=moment)
    elif kind == "changes":
        server.add_review(ORG, name, n, "rev1", "CHANGES_REQUESTED", submitted_at=moment)
    elif kind == "requested":
        server.request_reviewers(ORG, name, n, ["rev2"])


def measure(repos: int, prs: int, weeks: int) -> dict[str, Any]:
    # GitHub's hourly limit is reported, not enforced here; put back for whoever runs next
    # in this process (the tests run this benchmark in theirs)
    saved, rate_limits.CORE_LIMIT = rate_limits.CORE_LIMIT, 10**9
    try:
        return _measure(repos, prs, weeks)
    finally:
        rate_limits.CORE_LIMIT = saved


def _measure(repos: int, prs: int, weeks: int) -> dict[str, Any]:
    now = datetime.now(UTC).replace(microsecond=0)
    with GitHubServer(validate_requests=False) as server, \
            tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        names = seed(server, repos, prs, now)
        seeding = time.perf_counter() - started
        engine = make_engine(f"sqlite:///{Path(folder) / 'alignbot.db'}")
        migrate(engine)
        with transaction(engine) as conn:
            conn.execute(insert(InstallationRow.__table__).values(
                id=INSTALLATION, account_login=ORG, repositories=names))
        app = GitHubApp(server.app_id, server.private_key_pem, ApiOptions(
            base_url=server.url, seconds_between_writes=0))
        clock = [now]
        unlimited = ApiLimits(calls_per_hour=10**9, writes_per_hour=10**9, reserve=0)
        handler = SweepJob(app, engine, SweepOptions(limits=unlimited, write_interval=0),
                           clock=lambda: clock[0], sleep=lambda seconds: None)
        results = []
        for week in range(weeks):
            clock[0] = now + timedelta(days=7 * week)
            server.clear_log()
            started = time.perf_counter()
            report = run_inline(engine, handler)  # one job per repository, run here
            wall = time.perf_counter() - started
            results.append(_figures(report, server, wall, repos * prs, week))
        engine.dispose()
    return {"repos": repos, "prs_per_repo": prs, "open_prs": repos * prs,
            "seeding_s": round(seeding, 2), "weeks": results}


def _figures(report: SweepReport, server: GitHubServer, wall: float, open_prs: int,
             week: int) -> dict[str, Any]:
    by_path: Counter[str] = Counter()
    for method, path, _ in server.requests:
        parts = path.strip("/").split("/")
        key = "search" if parts[0] == "search" else "token" if parts[0] == "app" else \
            "/".join(p if not (p.isdigit() or len(p) == 40) else "N"
                     for p in (parts[3:] if parts[0] == "repos" else parts))
        by_path[f"{method} {key}"] += 1
    calls = sum(report.calls.values())
    posted = len(report.posted)
    reads = report.calls["read"]
    return {
        "week": week + 1, "wall_s": round(wall, 2), "calls": calls,
        "search": report.calls["search"], "reads": reads, "writes": report.calls["write"],
        "reminders": posted, "kinds": dict(Counter(kind for _, _, kind in report.posted)),
        "listing_calls_per_100_open_prs": round(100 * report.calls["search"] / open_prs, 3),
        "reads_per_reminder": round(reads / posted, 2) if posted else None,
        "calls_per_100_open_prs": round(100 * calls / open_prs, 2),
        "github_hours_at_5000_per_hour": round(calls / GITHUB_HOURLY, 2),
        "write_pacing_at_1s_min": round(report.calls["write"] / 60, 1),
        "hours_at_500_writes_per_hour": round(report.calls["write"] / 500, 1),
        "skipped": {str(k): v for k, v in report.skipped.items()},
        "by_endpoint": dict(by_path.most_common()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", type=int, default=50)
    parser.add_argument("--prs", type=int, default=200, help="open pull requests per repository")
    parser.add_argument("--weeks", type=int, default=1, help="sweeps, a week apart")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    data = measure(args.repos, args.prs, args.weeks)
    print(f"{data['open_prs']} open pull requests in {data['repos']} repositories "
          f"(seeded in {data['seeding_s']} s)")
    for week in data["weeks"]:
        print(f"\nweek {week['week']}: {week['wall_s']} s, {week['calls']} requests: "
              f"{week['search']} search, {week['reads']} reads, {week['writes']} writes; "
              f"{week['reminders']} reminders {week['kinds']}")
        print(f"  listing: {week['listing_calls_per_100_open_prs']} search calls per 100 open "
              f"pull requests (target <= 2)")
        print(f"  all requests: {week['calls_per_100_open_prs']} per 100 open pull requests; "
              f"{week['reads_per_reminder']} reads per reminder")
        print(f"  on github.com: {week['github_hours_at_5000_per_hour']} hours of an "
              f"installation's 5,000 requests/hour; writes paced 1 s apart take "
              f"{week['write_pacing_at_1s_min']} min, and GitHub's 500 writes/hour make it "
              f"{week['hours_at_500_writes_per_hour']} hours")
        print(f"  skipped: {week['skipped']}")
        print("  requests by endpoint: " + ", ".join(
            f"{k} {v}" for k, v in week["by_endpoint"].items()))
    if args.json:
        args.json.write_text(json.dumps(data, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
