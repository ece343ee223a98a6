"""bot/startup.py: what `serve`, `worker` and `remind-sweep` check as they start, each problem
one line: the database waited for within its deadline, the key that must sign, GitHub that
must take it."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import create_engine, make_url, text

from alignbot.bot.demo import free_port
from alignbot.bot.settings import Settings, load_settings
from alignbot.bot.startup import (
    StartupError,
    check_app,
    check_key,
    database_location,
    wait_for_database,
)

POSTGRES_URL = os.environ.get("ALIGNBOT_TEST_POSTGRES_URL")
GARBAGE_PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9"
               "Cnzj4p4WGeKLs1Pt8Qu\n-----END RSA PRIVATE KEY-----\n")


def settings_for(github: Any, **env: str) -> Settings:
    return load_settings({"ALIGNBOT_APP_ID": str(github.app_id),
                          "ALIGNBOT_PRIVATE_KEY": github.private_key_pem,
                          "ALIGNBOT_WEBHOOK_SECRETS": "s", "ALIGNBOT_GITHUB_API_URL": github.url,
                          **env})


def closed_postgres() -> str:
    """A real PostgreSQL URL on a port where nothing listens (no server needed)."""
    return f"postgresql+psycopg://alignbot:hunter2pw@127.0.0.1:{free_port()}/alignbot"


def start(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ALIGNBOT_")}
    return subprocess.run([sys.executable, "-m", "alignbot.bot.cli", *argv], env={**clean, **env},
                          cwd=cwd, capture_output=True, text=True, timeout=120)


# ----------------------------------------------------------------------------- the database


def test_the_database_location_names_the_file_and_hides_the_password(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert database_location("sqlite:///alignbot.db") == (
        f"SQLite file {tmp_path / 'alignbot.db'} (its -wal and -shm files beside it)")
    assert database_location("sqlite://").startswith("SQLite in memory")
    assert database_location("postgresql+psycopg://bot:db-secret@db:5432/alignbot") == (
        "postgresql+psycopg://bot:***@db:5432/alignbot")


def test_an_unreachable_postgresql_is_tried_again_then_one_line(
        github_server: Any, caplog: pytest.LogCaptureFixture) -> None:
    settings = settings_for(github_server, ALIGNBOT_DATABASE_URL=closed_postgres(),
                            ALIGNBOT_DATABASE_WAIT_SECONDS="1.2")
    with caplog.at_level(logging.WARNING, "alignbot.bot.startup"), \
            pytest.raises(StartupError) as caught:
        wait_for_database(settings, retry_every=0.4)
    message = str(caught.value)
    assert "\n" not in message and "hunter2pw" not in message
    assert message.startswith("the database (postgresql+psycopg://alignbot:***@127.0.0.1:")
    assert "ALIGNBOT_DATABASE_WAIT_SECONDS=1.2" in message and "refused" in message
    waits = [r.getMessage() for r in caplog.records if "does not answer yet" in r.getMessage()]
    assert 2 <= len(waits) <= 4, waits  # one line a wait, a try every 0.4 s for 1.2 s
    assert all("\n" not in line and "hunter2pw" not in line for line in waits)


@pytest.mark.services
def test_a_database_that_comes_up_during_the_wait_is_taken() -> None:
    if not POSTGRES_URL:
        pytest.skip("needs ALIGNBOT_TEST_POSTGRES_URL (make test sets it)")
    # the server answers, the App's database is not there yet (as while PostgreSQL's image
    # initialises it): created a second into the wait
    name = f"alignbot_late_{uuid.uuid4().hex[:8]}"
    late = make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    server = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")

    def create() -> None:
        with server.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))

    timer = threading.Timer(1.0, create)
    timer.start()
    try:
        settings = load_settings({"ALIGNBOT_APP_ID": "1", "ALIGNBOT_PRIVATE_KEY": GARBAGE_PEM,
                                  "ALIGNBOT_WEBHOOK_SECRETS": "s",
                                  "ALIGNBOT_DATABASE_URL": late,
                                  "ALIGNBOT_DATABASE_WAIT_SECONDS": "30"})
        slept: list[float] = []

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            threading.Event().wait(seconds)

        engine = wait_for_database(settings, retry_every=0.3, sleep=sleep)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT current_database()")).scalar() == name
        engine.dispose()
        assert slept and all(pause == 0.3 for pause in slept)
    finally:
        timer.join()
        with server.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        server.dispose()


def test_a_sqlite_file_that_cannot_be_opened_fails_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'absent-folder' / 'bot.db'}"
    settings = load_settings({"ALIGNBOT_APP_ID": "1", "ALIGNBOT_PRIVATE_KEY": GARBAGE_PEM,
                              "ALIGNBOT_WEBHOOK_SECRETS": "s", "ALIGNBOT_DATABASE_URL": url})
    with pytest.raises(StartupError, match=r"\(1 tries in 0 s;.*unable to open database file"):
        wait_for_database(settings, sleep=lambda _: pytest.fail("SQLite is not waited for"))


def test_a_missing_postgresql_driver_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if it were not installed
    settings = load_settings({"ALIGNBOT_APP_ID": "1", "ALIGNBOT_PRIVATE_KEY": GARBAGE_PEM,
                              "ALIGNBOT_WEBHOOK_SECRETS": "s",
                              "ALIGNBOT_DATABASE_URL": closed_postgres()})
    with pytest.raises(StartupError) as caught:
        wait_for_database(settings)
    assert str(caught.value) == ("ALIGNBOT_DATABASE_URL is a PostgreSQL URL, but its driver "
                                 "(psycopg) is not installed: pip install 'alignbot[postgres]'")


# ------------------------------------------------------------------------ the key and GitHub


@pytest.fixture(scope="module")
def other_key() -> str:
    """A valid RSA key that is not the App's."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def test_pem_armour_around_garbage_cannot_sign(github_server: Any, tmp_path: Path) -> None:
    key_file = tmp_path / "app.pem"
    key_file.write_text(GARBAGE_PEM)
    settings = settings_for(github_server, ALIGNBOT_PRIVATE_KEY="",
                            ALIGNBOT_PRIVATE_KEY_FILE=str(key_file))
    with pytest.raises(StartupError) as caught:
        check_key(settings)
    message = str(caught.value)
    assert message.startswith(f"ALIGNBOT_PRIVATE_KEY_FILE={key_file} cannot sign the App's JWT")
    assert "\n" not in message and "MIIBOg" not in message


def test_the_apps_own_key_and_id_pass(github_server: Any,
                                      caplog: pytest.LogCaptureFixture) -> None:
    settings = settings_for(github_server)
    with caplog.at_level(logging.INFO, "alignbot.bot.startup"):
        check_app(settings, check_key(settings))
    assert f"GitHub knows App {github_server.app_id}" in caplog.text
    assert ("GET", "/app", 200) in github_server.requests


@pytest.mark.parametrize("wrong", ["key", "app id"])
def test_a_key_or_app_id_github_refuses_is_one_line(wrong: str, github_server: Any,
                                                    other_key: str) -> None:
    env = ({"ALIGNBOT_PRIVATE_KEY": other_key} if wrong == "key"
           else {"ALIGNBOT_APP_ID": str(github_server.app_id + 1)})
    settings = settings_for(github_server, **env)
    with pytest.raises(StartupError) as caught:
        check_app(settings, check_key(settings))  # it signs: GitHub is who says no
    message = str(caught.value)
    assert message.startswith("GitHub refused the App's JWT (401 ")
    assert f"ALIGNBOT_APP_ID={settings.app_id} and ALIGNBOT_PRIVATE_KEY are not" in message
    assert "\n" not in message


@pytest.mark.parametrize("outage", ["unreachable", "503"])
def test_github_away_at_start_is_a_warning_only(outage: str, github_server: Any,
                                                caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://127.0.0.1:{free_port()}" if outage == "unreachable" else github_server.url
    if outage == "503":
        github_server.outage("^/app$", seconds=60, status=503)
    settings = settings_for(github_server, ALIGNBOT_GITHUB_API_URL=url)
    with caplog.at_level(logging.WARNING, "alignbot.bot.startup"):
        check_app(settings, check_key(settings), timeout=3)
    (record,) = caplog.records
    assert record.levelno == logging.WARNING and "\n" not in record.getMessage()
    assert "starting without" in record.getMessage()


# ------------------------------------------------------------ the processes, as they start


@pytest.fixture()
def start_env(github_server: Any) -> dict[str, str]:
    return {"ALIGNBOT_APP_ID": str(github_server.app_id),
           "ALIGNBOT_PRIVATE_KEY": github_server.private_key_pem,
           "ALIGNBOT_WEBHOOK_SECRETS": "s", "ALIGNBOT_GITHUB_API_URL": github_server.url,
           "ALIGNBOT_PORT": str(free_port())}


def _one_error_line(proc: subprocess.CompletedProcess[str], what: str = "the service") -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    *logged, last = proc.stderr.strip().splitlines()
    assert all(line[:4].isdigit() for line in logged), logged  # log lines, each one line
    assert last.startswith(f"alignbot: error: {what} cannot start: ")
    return last


@pytest.mark.slow
def test_a_worker_waits_for_postgresql_then_exits_with_one_line(
        start_env: dict[str, str], tmp_path: Path) -> None:
    proc = start(["worker"], {**start_env, "ALIGNBOT_DATABASE_URL": closed_postgres(),
                              "ALIGNBOT_DATABASE_WAIT_SECONDS": "1"}, tmp_path)
    line = _one_error_line(proc)
    assert "the database (postgresql+psycopg://alignbot:***@" in line
    assert "ALIGNBOT_DATABASE_WAIT_SECONDS=1" in line and "(2 tries in 1 s;" in line
    assert proc.stderr.count("does not answer yet") == 1  # a wait of the second left
    assert "hunter2pw" not in proc.stderr


@pytest.mark.slow
def test_serve_with_a_key_that_cannot_sign_exits_with_one_line(
        start_env: dict[str, str], tmp_path: Path) -> None:
    proc = start(["serve"], {**start_env, "ALIGNBOT_PRIVATE_KEY": GARBAGE_PEM}, tmp_path)
    assert "ALIGNBOT_PRIVATE_KEY cannot sign the App's JWT" in _one_error_line(proc)
    # it said where its database would be, and made none
    assert f"database: SQLite file {tmp_path / 'alignbot.db'}" in proc.stderr
    assert not (tmp_path / "alignbot.db").exists()


@pytest.mark.slow
def test_remind_sweep_makes_the_start_checks_of_serve_and_worker(
        start_env: dict[str, str], tmp_path: Path) -> None:
    # cron runs it with the service's settings: a key that cannot sign is one line, before
    # the database is touched, as for serve
    proc = start(["remind-sweep"], {**start_env, "ALIGNBOT_PRIVATE_KEY": GARBAGE_PEM}, tmp_path)
    assert "ALIGNBOT_PRIVATE_KEY cannot sign the App's JWT" in _one_error_line(proc, "the sweep")
    assert f"database: SQLite file {tmp_path / 'alignbot.db'}" in proc.stderr
    assert not (tmp_path / "alignbot.db").exists()
    # a database that does not answer is waited for, then one line
    proc = start(["remind-sweep"], {**start_env, "ALIGNBOT_DATABASE_URL": closed_postgres(),
                                    "ALIGNBOT_DATABASE_WAIT_SECONDS": "1"}, tmp_path)
    line = _one_error_line(proc, "the sweep")
    assert "the database (postgresql+psycopg://alignbot:***@" in line
    assert "ALIGNBOT_DATABASE_WAIT_SECONDS=1" in line and "hunter2pw" not in proc.stderr


@pytest.mark.slow
def test_serve_starts_when_github_cannot_be_reached(make_service: Any) -> None:
    # an outage at GitHub must not keep the service down: one warning line, then /healthz
    service = make_service(ALIGNBOT_GITHUB_API_URL=f"http://127.0.0.1:{free_port()}")
    warned = [line for line in service.log_text().splitlines()
              if "alignbot.bot.startup" in line and " INFO " not in line]
    assert len(warned) == 1 and "WARNING" in warned[0], warned
    assert "could not be reached to check the App id and key" in warned[0]
