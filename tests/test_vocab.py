"""checks/vocab.py: the words every layer shares, and the rules that go with them."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

from alignbot.bot.config.model import CandidateSection
from alignbot.checks.cli import _interpreter
from alignbot.checks.vocab import relative_interpreter


@pytest.mark.parametrize(("python", "relative"), [
    (".venv/bin/python", True),
    ("bin/python3", True),
    ("tools/python", True),
    ("python3", False),  # a bare name: looked up on PATH
    ("/usr/bin/python3", False),
])
def test_the_engine_and_the_app_read_an_interpreter_path_alike(python: str,
                                                               relative: bool) -> None:
    assert relative_interpreter(python) is relative
    root = PurePosixPath("/repo")
    given = CandidateSection(preset="torch", python=python).cli_args(root)[-1]
    assert given == (str(root / python) if relative else python)
    assert (_interpreter(python) != python) is relative
