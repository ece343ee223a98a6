"""Webhook acknowledgement latency: signed deliveries at a fixed rate against the real service.

Starts the service in a child process (uvicorn, one process, SQLite file database, the embedded
worker draining the jobs with a no-op handler), sends signed ``pull_request`` deliveries on
loopback at ``--rate`` per second for ``--seconds`` (open loop: each request leaves at its
scheduled time whether or not earlier ones were answered), and reports the acknowledgement
latency (p50/p90/p99/max) and the achieved throughput.

    .venv/bin/python benchmarks/webhook_latency.py                 # 200/s for 10 s
    .venv/bin/python benchmarks/webhook_latency.py --rate 400 --seconds 5 --json out.json

Latency is measured by the client from the moment a request is handed to its connection to the
last byte of the answer; "lag" is how late the client itself was against the schedule (on a
small machine the client and the server share the CPU, which is part of what is measured).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
SECRET = "benchmark-secret"
FAKE_PEM = "-----BEGIN PRIVATE KEY-----\\nbenchmark\\n-----END PRIVATE KEY-----"


# -- the service (child process) ----------------------------------------------------------------


def serve(database: Path, with_worker: bool, access_log: bool, synchronous: str) -> None:
    """Runs the service on 127.0.0.1, port chosen by the OS; prints ``PORT n`` once listening."""
    sys.path.insert(0, str(ROOT))
    import uvicorn

    from alignbot.bot.app import create_app
    from alignbot.bot.queue import JobRecord, JobRequest, SqlJobQueue
    from alignbot.bot.settings import load_settings
    from alignbot.bot.storage import make_engine, migrate
    from alignbot.bot.webhooks import Event, WebhookRouter, require
    from alignbot.bot.worker import Worker

    settings = load_settings(
        {
            "ALIGNBOT_APP_ID": "1",
            "ALIGNBOT_PRIVATE_KEY": FAKE_PEM,
            "ALIGNBOT_WEBHOOK_SECRETS": SECRET,
            "ALIGNBOT_DATABASE_URL": f"sqlite:///{database}",
        }
    )
    engine = make_engine(settings.database_url, sqlite_synchronous=synchronous)
    migrate(engine)
    router = WebhookRouter()

    @router.on("pull_request", "opened", "synchronize")
    def align(event: Event) -> list[JobRequest]:
        repo = require(event.payload, "repository", "full_name")
        number = require(event.payload, "pull_request", "number")
        sha = require(event.payload, "pull_request", "head", "sha")
        return [JobRequest("align", f"{repo}#{number}", {"sha": sha}, supersede=True)]

    def no_op(job: JobRecord) -> dict[str, Any]:
        return {"sha": job.payload["sha"]}

    worker = Worker(SqlJobQueue(engine), {"align": no_op}, poll_interval=0.5)
    app = create_app(settings, engine, router, on_enqueued=worker.notify if with_worker else None)
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", access_log=access_log,
            workers=1,
        )
    )

    def announce() -> None:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        if server.started:
            print(f"PORT {server.servers[0].sockets[0].getsockname()[1]}", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    if with_worker:
        worker.start()
    try:
        server.run()  # in the main thread: SIGTERM shuts it down gracefully
    finally:
        worker.stop(timeout=5)
        engine.dispose()


# -- the load (parent process) ------------------------------------------------------------------


@dataclass
class Result:
    rate: float
    seconds: float
    sqlite_synchronous: str
    worker: bool
    sent: int
    answered: int
    errors: int
    statuses: dict[str, int]
    throughput: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    lag_p99_ms: float
    payload_bytes: int
    connections: int
    jobs: dict[str, int]
    cpus: int
    server_cpu_ms_per_delivery: float
    client_cpu_ms_per_delivery: float


def delivery(number: int, index: int, padding: int) -> tuple[bytes, dict[str, str]]:
    """A signed pull_request delivery about the size of a real one (they are 20–40 KB)."""
    payload = {
        "action": "synchronize",
        "number": number,
        "pull_request": {
            "number": number,
            "head": {"sha": f"{index:040x}", "repo": {"full_name": "fork/ops"}},
            "base": {"repo": {"full_name": "org/ops"}},
            "body": "x" * padding,
        },
        "repository": {"full_name": "org/ops"},
        "installation": {"id": 1},
    }
    body = json.dumps(payload).encode()
    signature = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return body, {
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": f"sha256={signature}",
        "Content-Type": "application/json",
    }


async def load(url: str, rate: float, seconds: float, connections: int, padding: int,
               warmup: int) -> tuple[list[tuple[float, float, float, int]], float]:
    total = int(rate * seconds)
    requests = [delivery(n % 50 + 1, n, padding) for n in range(total + warmup)]
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    samples: list[tuple[float, float, float, int]] = []  # scheduled, sent, answered, status
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:
        for body, headers in requests[:warmup]:
            await client.post("/webhook", content=body, headers=headers)

        async def send(scheduled: float, body: bytes, headers: dict[str, str]) -> None:
            sent = time.perf_counter()
            try:
                response = await client.post("/webhook", content=body, headers=headers)
                status = response.status_code
            except httpx.HTTPError:
                status = 0
            samples.append((scheduled, sent, time.perf_counter(), status))

        start = time.perf_counter() + 0.05
        tasks = []
        for index, (body, headers) in enumerate(requests[warmup:]):
            scheduled = start + index / rate
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(send(scheduled, body, headers)))
        await asyncio.gather(*tasks)
    return samples, start


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def count_jobs(database: Path) -> dict[str, int]:
    """Jobs by state after the run (most are superseded: deliveries cycle over 50 PRs)."""
    import sqlite3

    with sqlite3.connect(database) as conn:
        rows = conn.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall()
    return {str(state): int(count) for state, count in rows}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_service(database: Path, with_worker: bool, access_log: bool, synchronous: str
                  ) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, __file__, "--serve", str(database), "--sqlite-synchronous",
               synchronous]
    command += [] if with_worker else ["--no-worker"]
    command += ["--access-log"] if access_log else []
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert child.stdout is not None
    line = child.stdout.readline()  # the child prints its port, or exits
    if not line.startswith("PORT "):
        child.kill()
        raise SystemExit(f"the service did not start: {line!r}")
    return child, f"http://127.0.0.1:{int(line.split()[1])}"


def run(args: argparse.Namespace) -> Result:
    with tempfile.TemporaryDirectory(prefix="alignbot-bench-") as tmp:
        database = Path(tmp) / "bench.db"
        child, url = start_service(
            database, not args.no_worker, args.access_log, args.sqlite_synchronous
        )
        try:
            server_cpu = cpu_seconds(child.pid)
            client_cpu = time.process_time()
            samples, start = asyncio.run(
                load(url, args.rate, args.seconds, args.connections, args.payload_kb * 1024,
                     args.warmup)
            )
            server_cpu = cpu_seconds(child.pid) - server_cpu
            client_cpu = time.process_time() - client_cpu
        finally:
            child.terminate()
            child.wait(timeout=30)
        jobs = count_jobs(database)
    answered = [s for s in samples if s[3] != 0]
    latencies = [(answered_at - sent) * 1000 for _, sent, answered_at, _ in answered]
    lags = [(sent - scheduled) * 1000 for scheduled, sent, _, _ in samples]
    statuses: dict[str, int] = {}
    for sample in samples:
        statuses[str(sample[3])] = statuses.get(str(sample[3]), 0) + 1
    elapsed = max(s[2] for s in samples) - start
    return Result(
        rate=args.rate,
        seconds=args.seconds,
        sqlite_synchronous=args.sqlite_synchronous,
        worker=not args.no_worker,
        sent=len(samples),
        answered=len(answered),
        errors=sum(1 for s in samples if s[3] not in (200, 202)),
        statuses=statuses,
        throughput=len(answered) / elapsed,
        p50_ms=statistics.median(latencies),
        p90_ms=percentile(latencies, 0.90),
        p99_ms=percentile(latencies, 0.99),
        max_ms=max(latencies),
        lag_p99_ms=percentile(lags, 0.99),
        payload_bytes=len(delivery(1, 0, args.payload_kb * 1024)[0]),
        connections=args.connections,
        jobs=jobs,
        cpus=os.cpu_count() or 0,
        server_cpu_ms_per_delivery=server_cpu * 1000 / (len(samples) + args.warmup),
        client_cpu_ms_per_delivery=client_cpu * 1000 / (len(samples) + args.warmup),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=200.0, help="deliveries per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to send")
    parser.add_argument("--connections", type=int, default=16, help="client connections")
    parser.add_argument("--payload-kb", type=int, default=24, help="padding per delivery")
    parser.add_argument("--warmup", type=int, default=50, help="deliveries before measuring")
    parser.add_argument("--no-worker", action="store_true", help="do not drain the queue")
    parser.add_argument("--access-log", action="store_true", help="uvicorn's access log on")
    parser.add_argument("--sqlite-synchronous", choices=["FULL", "NORMAL"], default="FULL",
                        help="FULL (default) fsyncs every commit; NORMAL is crash- not "
                        "power-safe")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, not args.no_worker, args.access_log, args.sqlite_synchronous)
        return 0
    if not (0 < args.rate <= 5000 and 0 < args.seconds <= 120 and 1 <= args.connections <= 256):
        parser.error("keep --rate in (0, 5000], --seconds in (0, 120], --connections in [1, 256]")
    result = run(args)
    print(
        f"webhook acknowledgement, {result.sent} deliveries of {result.payload_bytes} bytes "
        f"at {result.rate:g}/s for {result.seconds:g} s over {result.connections} connections "
        f"({result.cpus} CPUs, client and server on one machine; SQLite synchronous="
        f"{result.sqlite_synchronous}, worker {'on' if result.worker else 'off'})\n"
        f"  throughput  {result.throughput:8.1f} deliveries/s answered\n"
        f"  latency     p50 {result.p50_ms:.1f} ms  p90 {result.p90_ms:.1f} ms  "
        f"p99 {result.p99_ms:.1f} ms  max {result.max_ms:.1f} ms\n"
        f"  client lag  p99 {result.lag_p99_ms:.1f} ms behind schedule\n"
        f"  CPU         server {result.server_cpu_ms_per_delivery:.2f} ms, client "
        f"{result.client_cpu_ms_per_delivery:.2f} ms per delivery\n"
        f"  answers     {result.statuses}  errors {result.errors}; "
        f"jobs by state {result.jobs}"
    )
    if args.json:
        args.json.write_text(json.dumps(asdict(result), indent=2) + "\n")
    return 1 if result.errors else 0


if __name__ == "__main__":
    sys.exit(main())
