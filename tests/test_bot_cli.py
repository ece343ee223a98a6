"""bot/cli.py: the App's commands; `serve --help` and `worker --help` say what they read."""

from __future__ import annotations

import pytest

from alignbot.bot.cli import START_SETTINGS, main
from alignbot.bot.settings import Settings, env_name


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_help_lists_the_settings_read_at_start_and_points_to_the_table(
        command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0  # the one command line's run: help is a status
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps the lines
    assert "docs/operations.md#settings" in text and "python -m alignbot.bot.settings_doc" in text
    for name in START_SETTINGS:
        assert name in text
    assert "exit status 2" in text


def test_the_settings_listed_in_help_are_settings() -> None:
    names = {env_name(field) for field in Settings.model_fields}
    assert set(START_SETTINGS) <= names
