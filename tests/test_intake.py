"""bot/intake.py over real HTTP, with the options `alignbot serve` gives uvicorn: a large
signed body goes through the spool, an unsigned one is refused before it is read, at most
``ALIGNBOT_MAX_UNVERIFIED_BODIES`` are read at once and each slot is given back."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy import Engine
from test_webhooks import SECRET, headers, make_router, pr_payload

from alignbot.bot.app import create_app
from alignbot.bot.intake import SPOOL_BYTES
from alignbot.bot.queue import SqlJobQueue
from alignbot.bot.serve import uvicorn_options
from alignbot.bot.settings import load_settings
from alignbot.bot.storage import make_engine, migrate

AT_ONCE = 2


class Running:
    """The webhook app under uvicorn in a thread, as ``alignbot.bot.serve`` configures it."""

    def __init__(self, tmp: Path, **env: str) -> None:
        self.engine: Engine = make_engine(f"sqlite:///{tmp / 'bot.db'}")
        migrate(self.engine)
        settings = load_settings({
            "ALIGNBOT_APP_ID": "1", "ALIGNBOT_WEBHOOK_SECRETS": SECRET.decode(),
            "ALIGNBOT_PRIVATE_KEY": "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----",
            "ALIGNBOT_PORT": "0", **env})
        app = create_app(settings, self.engine, make_router(), freeze_gc=False)
        options = {**uvicorn_options(settings), "log_level": "warning"}
        self.server = uvicorn.Server(uvicorn.Config(app, **options))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Running:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "no uvicorn"
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.engine.dispose()

    def metric(self, name: str) -> str:
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        return "\n".join(line for line in text.splitlines() if line.startswith(name))


@pytest.fixture()
def running(tmp_path: Path) -> Iterator[Running]:
    with Running(tmp_path, ALIGNBOT_MAX_UNVERIFIED_BODIES=str(AT_ONCE)) as service:
        yield service


def started_body(running: Running, size: int, **extra: str) -> socket.socket:
    """A connection whose request declares ``size`` bytes and sends only the first one."""
    sock = socket.create_connection(("127.0.0.1", running.port))
    hdrs = {**headers(b"x" * size), "Content-Length": str(size), "Host": "x", **extra}
    sock.sendall(b"POST /webhook HTTP/1.1\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in hdrs.items()).encode() + b"\r\nx")
    return sock


def answer(sock: socket.socket, timeout: float = 5) -> bytes:
    sock.settimeout(timeout)
    try:
        return sock.recv(65536)
    except TimeoutError:
        return b""


def test_a_signed_body_larger_than_the_spool_is_accepted(running: Running) -> None:
    padding = "p" * (3 * SPOOL_BYTES)  # read to a temporary file, then back once verified
    body = json.dumps({**json.loads(pr_payload(number=501)), "padding": padding}).encode()
    reply = httpx.post(f"{running.url}/webhook", content=body, headers=headers(body), timeout=30)
    assert (reply.status_code, reply.json()) == (202, {"status": "queued", "jobs": 1})
    assert [job.key for job in SqlJobQueue(running.engine).list()] == ["org/ops#501"]


def test_a_body_without_a_signature_is_refused_before_it_is_read(running: Running) -> None:
    sock = started_body(running, 10 * 1024 * 1024, **{"X-Hub-Signature-256": "sha256=nope"})
    with sock:
        reply = answer(sock)
    assert reply.startswith(b"HTTP/1.1 401"), reply[:200]
    assert b"connection: close" in reply.lower()


def test_bodies_over_the_cap_get_503_and_the_slots_come_back(running: Running) -> None:
    size = 4096
    held = [started_body(running, size) for _ in range(AT_ONCE)]
    try:
        time.sleep(0.5)
        assert running.metric("alignbot_webhook_bodies_reading") == \
            f"alignbot_webhook_bodies_reading {AT_ONCE}.0"
        with started_body(running, size) as extra:
            reply = answer(extra)
        assert reply.startswith(b"HTTP/1.1 503"), reply[:200]
        assert b"retry-after: 10" in reply.lower()
        assert 'alignbot_webhook_bodies_refused_total{reason="busy"} 1.0' in \
            running.metric("alignbot_webhook_bodies_refused_total")
        for sock in held:  # the rest of the bodies: signed, but not JSON
            sock.sendall(b"x" * (size - 1))
            assert answer(sock).startswith(b"HTTP/1.1 400")
    finally:
        for sock in held:
            sock.close()
    body = pr_payload(number=502)
    after = httpx.post(f"{running.url}/webhook", content=body, headers=headers(body), timeout=10)
    assert after.status_code == 202, after.text
    assert running.metric("alignbot_webhook_bodies_reading") == \
        "alignbot_webhook_bodies_reading 0.0"


def test_a_client_that_leaves_mid_body_frees_its_slot(running: Running) -> None:
    for _ in range(AT_ONCE + 1):
        started_body(running, 4096).close()
    deadline = time.monotonic() + 5
    while running.metric("alignbot_webhook_bodies_reading").endswith(" 0.0") is False:
        assert time.monotonic() < deadline, running.metric("alignbot_webhook_bodies_reading")
        time.sleep(0.1)
    body = pr_payload(number=503)
    reply = httpx.post(f"{running.url}/webhook", content=body, headers=headers(body), timeout=10)
    assert reply.status_code == 202, reply.text


def test_a_request_head_still_unfinished_past_16_kib_is_refused(running: Running) -> None:
    with socket.create_connection(("127.0.0.1", running.port)) as sock:
        sock.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\n")
        reply = b""
        for index in range(40):  # 40 KiB of headers, a line at a time: never a whole head
            try:
                sock.sendall(f"X-Padding-{index}: {'a' * 1000}\r\n".encode())
            except OSError:
                break
            time.sleep(0.01)
        reply = answer(sock)
    assert reply.startswith(b"HTTP/1.1 400"), reply[:200]


def test_settings_bound_the_intake(tmp_path: Path) -> None:
    def env(**values: str) -> dict[str, Any]:
        return {"ALIGNBOT_APP_ID": "1", "ALIGNBOT_WEBHOOK_SECRETS": "s",
                "ALIGNBOT_PRIVATE_KEY": "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE "
                                        "KEY-----", **values}

    settings = load_settings(env())
    assert (settings.body_timeout_seconds, settings.max_unverified_bodies,
            settings.max_connections) == (10, 16, 256)
    options = uvicorn_options(settings)
    assert options["http"] == "h11" and options["limit_concurrency"] == 256
    with pytest.raises(ValueError, match="ALIGNBOT_MAX_UNVERIFIED_BODIES"):
        load_settings(env(ALIGNBOT_MAX_UNVERIFIED_BODIES="0"))
    with pytest.raises(ValueError, match="ALIGNBOT_BODY_TIMEOUT_SECONDS"):
        load_settings(env(ALIGNBOT_BODY_TIMEOUT_SECONDS="-1"))
