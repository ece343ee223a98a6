"""compose.yaml and the Dockerfile, as an admin deploys them: each service's health check
is true for what it runs, and the documented `docker run` mounts the key it names."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from alignbot.bot.settings import Settings, env_name

ROOT = Path(__file__).resolve().parent.parent


def services() -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    return found


def test_the_workers_health_check_reads_the_file_the_worker_writes() -> None:
    worker = services()["worker"]
    assert worker["command"] == ["alignbot", "worker"]
    # not the image's HEALTHCHECK of :8080/healthz, which a worker (no port) always fails
    check = worker["healthcheck"]["test"]
    assert check == ["CMD", "alignbot", "worker", "--check-health"]
    assert worker["environment"][env_name("health_file")].startswith("/")
    assert "health_file" in Settings.model_fields


def test_the_web_service_is_checked_on_its_port() -> None:
    web = services()["web"]
    assert web["command"] == ["alignbot", "serve", "--no-worker"]
    assert "127.0.0.1:8080/healthz" in " ".join(web["healthcheck"]["test"])
    assert "healthcheck" in services()["postgres"]


def docker_runs(text: str) -> list[list[str]]:
    """The words of each `docker run` example in ``text`` (a comment's or a code block's
    lines, continued with backslashes)."""
    lines = [re.sub(r"^#\s?", "", line) for line in text.splitlines()]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    return [shlex.split(line.strip())[2:] for line in joined.splitlines()
            if line.strip().startswith("docker run ")]


def test_each_docker_run_example_mounts_the_key_file_it_names() -> None:
    variable = env_name("private_key_file")
    for page in (ROOT / "Dockerfile", ROOT / "docs" / "operations.md"):
        runs = docker_runs(page.read_text())
        assert runs, f"{page.name} has no docker run example"
        for words in runs:
            named = [w.split("=", 1)[1] for w in words if w.startswith(f"{variable}=")]
            mounts = [words[i + 1].split(":") for i, w in enumerate(words[:-1]) if w == "-v"]
            assert len(named) == 1, words
            key_mounts = [m for m in mounts if m[1:2] == named[:1]]
            assert key_mounts and key_mounts[0][2:] == ["ro"], (page.name, words)
