"""bot/logs.py: a real `alignbot serve` writes JSON lines, every line of one delivery → job →
check run carrying the delivery id, the job id and the repository; no secret in any line."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from service import OWNER, REPO, SECRET, Service, completed, open_pull

from alignbot.bot.demo import _files, wait_for
from alignbot.bot.logs import (
    JsonFormatter,
    TextFormatter,
    configure,
    current,
    log_context,
    redact,
)
from alignbot.bot.settings import SettingsError, load_settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_one_delivery_job_and_check_run_carry_their_ids(
        github_server: Any, make_service: Any) -> None:
    github = github_server
    base = _files(ROOT / "examples" / "fastops")
    head = open_pull(github, base, {**base, "NOTES": b"notes\n"})  # no op file: no sandbox
    service: Service = make_service(ALIGNBOT_LOG_FORMAT="json")
    headers, body = github.delivery(
        "pull_request", github.webhook("pull_request.opened", OWNER, REPO, number=1), SECRET)
    delivery_id = headers["X-GitHub-Delivery"]
    assert httpx.post(f"{service.url}/webhook", content=body, headers=headers).status_code == 202
    wait_for(lambda: completed(github, head), 60, "the check run")
    wait_for(lambda: "done in" in service.log_text(), 30, "the job's last line")

    lines = [json.loads(line) for line in service.log_text().splitlines()]  # every line JSON
    assert {"time", "level", "logger", "message", *current()} <= set(lines[0])
    mine = [line for line in lines if line["delivery_id"] == delivery_id]
    by_logger = {line["logger"]: line for line in mine}
    loggers = {"alignbot.bot.webhooks", "alignbot.bot.alignment", "alignbot.bot.worker"}
    assert loggers <= set(by_logger), mine
    assert "1 job(s)" in by_logger["alignbot.bot.webhooks"]["message"]
    assert "check run" in by_logger["alignbot.bot.alignment"]["message"]
    assert "done in" in by_logger["alignbot.bot.worker"]["message"]
    job_id = by_logger["alignbot.bot.worker"]["job_id"]
    assert isinstance(job_id, int)
    for line in mine:
        assert line["repository"] == f"{OWNER}/{REPO}"
        assert line["job_id"] == job_id
    # lines outside any delivery or job (start-up) carry no ids
    assert lines[0]["delivery_id"] is None and lines[0]["job_id"] is None

    text = service.log_text()
    for secret in (SECRET, *github.private_key_pem.splitlines()[1:-1], *github.tokens):
        assert secret not in text


def _record(message: str, *args: Any) -> logging.LogRecord:
    return logging.LogRecord("bot.test", logging.INFO, __file__, 1, message, args, None)


def test_secrets_are_redacted_in_both_formats() -> None:
    token = "ghs_" + "A1b2C3d4" * 4
    record = _record("GET %s with %s", "https://codeload.example/x?token=Zq9sEcReT&n=1", token)
    for formatter in (JsonFormatter(), TextFormatter()):
        line = formatter.format(record)
        assert token not in line and "Zq9sEcReT" not in line
        assert "token=[redacted]&n=1" in line
    assert redact("a plain line") == "a plain line"


def test_the_secrets_given_are_redacted_whole_and_by_line() -> None:
    key = "-----BEGIN KEY-----\nQUJDREVGR0hJSktMTU5PUA\nUVJTVFVWV1hZWmFiY2Q\n-----END KEY-----"
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        configure("json", secrets=["webhook secret 1", key])
        assert redact("signed with webhook secret 1") == "signed with [redacted]"
        assert "UVJTVFVWV1hZWmFiY2Q" not in redact("a line of it: UVJTVFVWV1hZWmFiY2Q")
        assert isinstance(root.handlers[-1].formatter, JsonFormatter)
    finally:
        configure("text")
        root.handlers[:], root.level = handlers, level
        logging.captureWarnings(False)
        logging.getLogger("httpx").setLevel(logging.NOTSET)


def test_context_is_set_inside_and_restored_after() -> None:
    formatter = TextFormatter()
    with log_context(delivery_id="d-1", repository="o/r"):
        with log_context(job_id=7):
            assert json.loads(JsonFormatter().format(_record("x")))["job_id"] == 7
            assert formatter.format(_record("x")).endswith(
                "[delivery_id=d-1 job_id=7 repository=o/r]")
        assert current() == {"delivery_id": "d-1", "job_id": None, "repository": "o/r"}
    assert current() == {"delivery_id": None, "job_id": None, "repository": None}
    with log_context(delivery_id="a\nfake=1 " + "x" * 100):  # a sender's string, defused
        (value,) = [current()["delivery_id"]]
        assert "\n" not in value and " " not in value and len(value) == 64


def test_a_bad_log_format_is_one_line(github_server: Any) -> None:
    env = {"ALIGNBOT_APP_ID": "1", "ALIGNBOT_PRIVATE_KEY": github_server.private_key_pem,
           "ALIGNBOT_WEBHOOK_SECRETS": SECRET, "ALIGNBOT_LOG_FORMAT": "xml"}
    with pytest.raises(SettingsError, match="LOG_FORMAT"):
        load_settings(env)
    assert load_settings({**env, "ALIGNBOT_LOG_FORMAT": "json"}).log_format == "json"
