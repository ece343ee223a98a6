"""`alignbot demo` (what `make demo` runs) keeps working and shows what the app posted."""

from __future__ import annotations

import pytest

from alignbot.bot.demo import run_demo


@pytest.mark.slow
def test_demo_shows_the_failing_check_run_and_the_comment() -> None:
    lines: list[str] = []
    assert run_demo(say=lines.append, timeout=300) == 0
    text = "\n".join(lines)
    assert "webhook pull_request.opened -> 202" in text
    assert "check run 'alignbot / op alignment': failure" in text
    assert "grad-mismatch" in text and "torch.nn.functional.softplus" in text
    assert "the comment by alignbot[bot]" in text and "Minimized repro: verified" in text
