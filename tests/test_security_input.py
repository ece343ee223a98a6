"""Untrusted input end to end through `alignbot serve` and the GitHub test server: what
unauthenticated senders can make the service hold (bodies that never end, bodies that
trickle, headers that never end) and what a pull request's archive costs it, measured on the
service's process (``/proc/PID/status``); data nested deep (a payload, the configuration, a
comment), which must end in an answer, never a traceback; and a reply cut to fit."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import test_security_commands as commands
from service import NUMBER, OWNER, REPO, SECRET, Service
from test_output import note_problems
from test_security_faults import align_jobs, assert_no_traceback, finished

from alignbot.bot.demo import _files, _patch, _sha, seed, wait_for

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024
KIB = 1024
TIMEOUT = 300
BUGGY = ROOT / "examples" / "pull-request" / "fastops.py"
CONFIG = ".github/alignbot.yml"
# the sandbox's first command fails: the check ends right after the archive is unpacked
FAILING_SETUP = b"""\
candidate:
  preset: torch
  setup: ["exit 3"]
ops:
  - paths: ["fastops.py"]
    specs: ["activations.softplus"]
"""


def memory_kib(service: Service, field: str = "VmRSS") -> int:
    """The service process's resident memory now (``VmRSS``) or at its peak (``VmHWM``)."""
    assert service.proc is not None
    status = Path(f"/proc/{service.proc.pid}/status").read_text()
    match = re.search(rf"^{field}:\s+(\d+) kB$", status, re.M)
    assert match is not None, status
    return int(match.group(1))


def settled_rss(service: Service) -> int:
    """The service's RSS once it is idle (a just-started process still grows a little)."""
    time.sleep(1)
    return memory_kib(service)


def head_of(size: int, signature: str = "sha256=" + "0" * 64) -> bytes:
    return (f"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"X-GitHub-Event: ping\r\nX-GitHub-Delivery: flood\r\n"
            f"X-Hub-Signature-256: {signature}\r\nContent-Length: {size}\r\n\r\n").encode()


def push_all(sockets: list[socket.socket], sizes: list[int], seconds: float) -> int:
    """Send each socket ``sizes[i]`` bytes, all at once, without blocking on any one; a
    socket the service closed counts as done. Returns the bytes sent."""
    chunk = b"x" * MIB
    sent = [0] * len(sockets)
    deadline = time.monotonic() + seconds
    for sock in sockets:
        sock.setblocking(False)
    while time.monotonic() < deadline and any(s < n for s, n in zip(sent, sizes, strict=True)):
        moved = False
        for index, sock in enumerate(sockets):
            left = sizes[index] - sent[index]
            if left <= 0:
                continue
            try:
                sent[index] += sock.send(chunk[:left])
                moved = True
            except BlockingIOError:
                pass
            except OSError:  # the service answered and closed: it reads no more of it
                sizes[index] = sent[index]
        if not moved:
            time.sleep(0.05)
    return sum(sent)


@pytest.mark.slow
def test_forty_bodies_that_never_end_do_not_grow_the_service(make_service: Any) -> None:
    # each declares 24 MiB (under the 25 MiB limit) and sends all of it but the last byte;
    # their signature cannot be checked until that byte comes
    service: Service = make_service()
    before = settled_rss(service)
    size = 24 * MIB
    sockets = [socket.create_connection(("127.0.0.1", service.port)) for _ in range(40)]
    try:
        for sock in sockets:
            sock.sendall(head_of(size))
        sent = push_all(sockets, [size - 1] * len(sockets), seconds=60)
        grown = (settled_rss(service) - before) // KIB
        assert grown < 64, (
            f"40 unauthenticated bodies ({sent // MIB} MiB sent) grew the service by {grown} "
            "MiB: bodies are held in memory before their signature is checked")
    finally:
        for sock in sockets:
            sock.close()
    metrics = httpx.get(f"{service.url}/metrics", timeout=10).text
    assert re.search(r'^alignbot_webhook_bodies_refused_total\{reason="busy"\} [1-9]', metrics,
                     re.M), "the bodies over the cap were not counted"
    assert httpx.get(f"{service.url}/healthz", timeout=10).status_code == 200
    assert_no_traceback(service)


@pytest.mark.slow
def test_a_trickling_body_is_cut_with_408(make_service: Any) -> None:
    service: Service = make_service(ALIGNBOT_BODY_TIMEOUT_SECONDS="2")
    with socket.create_connection(("127.0.0.1", service.port)) as sock:
        sock.sendall(head_of(1000))
        sock.settimeout(0.5)
        started, answer = time.monotonic(), b""
        while not answer and time.monotonic() - started < 30:
            try:
                sock.sendall(b"x")  # one byte every half second: it would take 8 minutes
                answer = sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
        took = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408"), (
        f"after {took:.0f} s the trickling body still holds its connection: {answer[:200]!r}")
    assert took < 10
    metrics = httpx.get(f"{service.url}/metrics", timeout=10).text
    assert 'alignbot_webhook_bodies_refused_total{reason="too_slow"} 1.0' in metrics
    assert_no_traceback(service)


@pytest.mark.slow
def test_headers_that_never_end_do_not_grow_the_service(make_service: Any) -> None:
    service: Service = make_service()
    before = settled_rss(service)
    sockets = [socket.create_connection(("127.0.0.1", service.port)) for _ in range(4)]
    try:
        for sock in sockets:
            sock.settimeout(2)
            sock.sendall(b"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        line = b"X-Padding: " + b"a" * 8000 + b"\r\n"
        sent = [0] * len(sockets)
        closed = [False] * len(sockets)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not all(closed):
            for index, sock in enumerate(sockets):
                if closed[index] or sent[index] > 64 * MIB:
                    continue
                try:
                    sock.sendall(line)
                    sent[index] += len(line)
                except TimeoutError:  # not read for now: costs the service nothing
                    continue
                except OSError:
                    closed[index] = True
        grown = (settled_rss(service) - before) // KIB
        assert grown < 16, (
            f"4 requests whose headers never end ({sum(sent) // MIB} MiB sent) grew the "
            f"service by {grown} MiB")
        assert all(closed), "the service kept reading headers that never end"
    finally:
        for sock in sockets:
            sock.close()
    assert httpx.get(f"{service.url}/healthz", timeout=10).status_code == 200


def push_head(github: Any, tree: dict[str, bytes], base: dict[str, bytes]) -> str:
    head = _sha(tree)
    files = [{"filename": "fastops.py", "status": "modified",
              "patch": _patch("fastops.py", base["fastops.py"], tree["fastops.py"])}]
    files += [{"filename": path, "status": "added"} for path in tree
              if path not in base and path != CONFIG]  # binary: GitHub gives no patch
    github.push(OWNER, REPO, NUMBER, head, tree=tree, files=files)
    return head


def check_ended(github: Any, service: Service, head: str) -> None:
    reply = service.deliver(github, "pull_request", github.webhook(
        "pull_request.synchronize", OWNER, REPO, number=NUMBER))
    assert reply.status_code == 202, reply.text
    wait_for(lambda: finished(service) and bool(github.check_runs_for(OWNER, REPO, head)) and
             github.check_runs_for(OWNER, REPO, head)[0].status == "completed", TIMEOUT,
             "the check run")


@pytest.mark.slow
def test_a_large_archive_is_never_whole_in_the_services_memory(
        github_server: Any, make_service: Any) -> None:
    github = github_server
    service: Service = make_service()
    seed(github, BUGGY)
    base = _files(ROOT / "examples" / "fastops")
    small = {**base, "fastops.py": BUGGY.read_bytes(), CONFIG: FAILING_SETUP}
    check_ended(github, service, push_head(github, small, base))  # every module loaded once
    # three 40 MiB files that do not compress: a 120 MiB archive
    big = {**small, **{f"data/blob{i}.bin": os.urandom(40 * MIB) for i in range(3)}}
    peak_before = memory_kib(service, "VmHWM")
    head = push_head(github, big, base)
    check_ended(github, service, head)

    (run,) = github.check_runs_for(OWNER, REPO, head)
    summary = str(run.output.get("summary"))
    assert "setup command" in summary and "exit 3" in summary, summary  # it was unpacked
    assert align_jobs(service)[-1].error is None
    grown = (memory_kib(service, "VmHWM") - peak_before) // KIB
    assert grown < 40, (f"a 120 MiB archive raised the service's peak memory by {grown} MiB: "
                        "the archive was held in memory")
    assert_no_traceback(service)


# -- untrusted data nested deep: measured before anything walks it ----------------------------


@pytest.mark.slow
@pytest.mark.parametrize("depth", [600, 100_000])
def test_a_signed_payload_nested_deep_is_answered_400(depth: int, make_service: Any) -> None:
    service: Service = make_service()
    body = ('{"action": "opened", "zen": ' + "[" * depth + "]" * depth + "}").encode()
    reply = httpx.post(f"{service.url}/webhook", content=body, timeout=30, headers={
        "X-GitHub-Event": "pull_request", "X-GitHub-Delivery": f"deep-{depth}",
        "Content-Type": "application/json",
        "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body,
                                                    hashlib.sha256).hexdigest()})
    assert (reply.status_code, reply.json()) == (
        400, {"error": "the payload nests deeper than 64 levels"})
    assert_no_traceback(service)


@pytest.mark.slow
@pytest.mark.parametrize(("depth", "said"), [
    (600, "alignbot.yml:7:73: values nest deeper than 64 levels"),
    (30_000, "alignbot.yml:7:73: values nest deeper than 64 levels"),  # 60 KB: under 64 KiB
    (100_000, "alignbot.yml:1:1: the file is larger than 64 KiB")])
def test_a_config_nested_deep_fails_the_check_naming_the_line(
        depth: int, said: str, github_server: Any, make_service: Any) -> None:
    github = github_server
    service: Service = make_service()
    seed(github, BUGGY)
    base = _files(ROOT / "examples" / "fastops")
    deep = FAILING_SETUP + b"options: " + b"[" * depth + b"]" * depth + b"\n"
    head = push_head(github, {**base, "fastops.py": BUGGY.read_bytes(), CONFIG: deep}, base)
    check_ended(github, service, head)

    (run,) = github.check_runs_for(OWNER, REPO, head)
    assert run.conclusion == "failure"
    assert said in str(run.output.get("summary")), run.output.get("summary")
    assert align_jobs(service)[-1].error is None
    assert_no_traceback(service)


@pytest.mark.slow
@pytest.mark.parametrize("nest", ["> ", "- "])
@pytest.mark.parametrize("depth", [600, 32_000])  # 32,000 levels: a whole 65,536-char comment
def test_a_comment_nested_deep_is_answered_without_a_traceback(
        depth: int, nest: str, github_server: Any, make_service: Any) -> None:
    github = github_server
    service: Service = make_service()
    commands.seed(github)
    made, reply = commands.comment(github, service, nest * depth + "x\n\n/help\n",
                                   commands.MAINTAINER)
    # the parser that reads commands stops at 20 levels: what lies deeper is never acted on
    assert reply.status_code in (200, 202), reply.text
    if reply.status_code == 202:
        # the command reacts before it replies: wait for the reply itself
        wait_for(lambda: commands.settled(github, made) and commands.bot_comments(github),
                 TIMEOUT, "the reply to /help")
        (answer,) = commands.bot_comments(github)
        assert "/align" in answer.body  # the help text
    assert_no_traceback(service)


@pytest.mark.slow
def test_a_reply_cut_to_fit_keeps_its_note_outside_any_code_block(
        github_server: Any, make_service: Any) -> None:
    # an outsider's two bad `/align` lines, each echoed as inline code that starts its line
    # with backticks: the reply passes 65,536 characters and is cut after the first
    github = github_server
    service: Service = make_service()
    commands.seed(github)
    first, second = ("/align ```` " + name + " " + "y" * 32_700 for name in "ab")
    made, _ = commands.comment(github, service, f"{first}\n\n{second}\n", commands.OUTSIDER)
    wait_for(lambda: commands.settled(github, made) and commands.bot_comments(github),
             TIMEOUT, "the reply")
    (answer,) = commands.bot_comments(github)
    assert len(answer.body) <= 65_536 and "**Cut here:**" in answer.body
    assert note_problems(answer.body) == [], answer.body[-300:]
    assert_no_traceback(service)
