"""bot/health.py: the health file a worker rewrites while it is well, and the check that
reads it (`alignbot worker --check-health`, compose.yaml's health check of the workers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from alignbot.bot.cli import main
from alignbot.bot.demo import wait_for
from alignbot.bot.health import VARIABLE, HealthFile, check, check_command
from alignbot.bot.settings import Settings, env_name
from alignbot.bot.startup import StartupError


def test_the_variable_is_the_settings_and_the_check_imports_no_more() -> None:
    assert env_name("health_file") == VARIABLE and "health_file" in Settings.model_fields
    probe = subprocess.run([sys.executable, "-c", "import sys, alignbot.bot.health; print(sorted("
                            "m for m in ('alignbot.bot.settings', 'alignbot.bot.startup', "
                            "'pydantic', 'github', "
                            "'sqlalchemy') if m in sys.modules))"],
                           capture_output=True, text=True, check=True, timeout=60)
    assert probe.stdout.strip() == "[]"


def test_a_fresh_file_is_healthy_a_stale_or_missing_one_is_not(tmp_path: Path) -> None:
    path = tmp_path / "worker.health"
    assert "does not exist" in (check(path) or "")
    path.write_text("1\n")
    written = path.stat().st_mtime
    assert check(path, now=lambda: written + 29) is None
    problem = check(path, now=lambda: written + 31)
    assert problem is not None and "last rewritten 31 s ago (more than 30 s)" in problem


def test_the_file_is_rewritten_only_while_the_worker_is_well(tmp_path: Path) -> None:
    path = tmp_path / "run" / "worker.health"
    well = [True]
    health = HealthFile(path, lambda: well[0], interval=3600)
    assert health.beat() and check(path) is None
    os.utime(path, (1, 1))  # as if written long ago
    well[0] = False
    assert not health.beat() and os.stat(path).st_mtime == 1
    well[0] = True
    health.start()  # removes what an earlier process left, then rewrites it at once
    assert os.stat(path).st_mtime > 1
    health.stop()
    assert not path.exists()


def test_a_health_file_that_cannot_be_written_stops_the_start(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    path = tmp_path / "a-file" / "worker.health"
    with pytest.raises(StartupError) as caught:
        HealthFile(path, lambda: True).start()
    assert str(caught.value).startswith(f"ALIGNBOT_HEALTH_FILE={path} cannot be written: ")


def test_check_health_is_one_line_and_its_exit_status(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("ALIGNBOT_HEALTH_FILE", raising=False)
    assert check_command({}) == (1, "unhealthy: ALIGNBOT_HEALTH_FILE is not set, so the "
                                    "worker writes no health file")
    path = tmp_path / "worker.health"
    monkeypatch.setenv("ALIGNBOT_HEALTH_FILE", str(path))
    assert main(["worker", "--check-health"]) == 1  # no other setting needed
    assert capsys.readouterr().out == f"unhealthy: {path} does not exist: the worker has " \
                                      "not started, or it stopped\n"
    path.write_text("1\n")
    assert main(["worker", "--check-health"]) == 0
    assert capsys.readouterr().out == f"healthy: {path} is fresh\n"


@pytest.mark.slow
def test_a_running_worker_is_healthy_and_a_stopped_one_is_not(
        postgres_url: str, github_server: Any, tmp_path: Path) -> None:
    path = tmp_path / "worker.health"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ALIGNBOT_")},
           "ALIGNBOT_APP_ID": str(github_server.app_id),
           "ALIGNBOT_PRIVATE_KEY": github_server.private_key_pem,
           "ALIGNBOT_WEBHOOK_SECRETS": "s", "ALIGNBOT_GITHUB_API_URL": github_server.url,
           "ALIGNBOT_DATABASE_URL": postgres_url, "ALIGNBOT_HEALTH_FILE": str(path),
           "ALIGNBOT_SANDBOX_DIR": str(tmp_path / "sandboxes")}
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen([sys.executable, "-m", "alignbot.bot.cli", "worker"], env=env,
                                  stdout=out, stderr=out)
    try:
        wait_for(lambda: path.exists() or worker.poll() is not None, 60, "the health file")
        assert worker.poll() is None, log.read_text()[-2000:]
        assert check_command(env) == (0, f"healthy: {path} is fresh")
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    assert worker.returncode == 0, log.read_text()[-2000:]
    assert check_command(env)[0] == 1  # gone with the worker
    assert not path.exists()
