"""checks/internal_errors.py: alignbot's own failure is one line and exit status 3."""

from __future__ import annotations

import traceback
from typing import Any

import pytest

from alignbot.checks.internal_errors import INTERNAL_ERROR, one_line, report
from alignbot.checks.jobs import WorkerError


def test_a_workers_error_is_named_by_its_tracebacks_last_line() -> None:
    try:
        {}["spec"]
    except KeyError as exc:
        text = "".join(traceback.format_exception(exc))
    assert one_line(WorkerError(text)) == "KeyError: 'spec'"
    assert one_line(RuntimeError()) == "RuntimeError"
    assert one_line(ValueError("x" * 400)).endswith("x…")


def test_a_traceback_that_cannot_be_saved_goes_to_stderr(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def full(**kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("alignbot.checks.internal_errors.tempfile.mkstemp", full)
    assert report(ValueError("boom")) == INTERNAL_ERROR == 3
    err = capsys.readouterr().err
    assert err.startswith("ValueError: boom\n")  # no frames: it was never raised
    assert err.endswith("ValueError: boom; the traceback is above\n")
