"""Report files: paths refused before a run, and a report that cannot be written where asked
rescued to a temporary file, never lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alignbot.checks.report_files import OutputError, check_output, summary, write_reports
from alignbot.checks.report_types import Report

REPORT: Report = {"report_version": 1, "reference": "2.13.0", "candidate": "torch", "seed": 0,
                  "specs_run": 0, "specs": [], "programs_run": 0, "complete": True,
                  "findings": [], "exploration": []}


@pytest.mark.parametrize("where", ["missing/report.json", "."])
def test_an_output_that_cannot_be_written_is_refused_in_one_line(tmp_path: Path,
                                                                where: str) -> None:
    with pytest.raises(OutputError, match=r"^cannot write --json .*: (no such folder|is a "
                                          r"directory)$"):
        check_output("--json", tmp_path / where)


def test_a_report_the_disk_refuses_goes_to_a_temporary_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "report.md"
    gone = tmp_path / "gone" / "report.json"  # its folder vanished after the check
    written = write_reports(gone, good, REPORT)
    assert written[1] == good and "0 findings" in good.read_text()
    assert written[0] != gone and json.loads(written[0].read_text()) == REPORT
    assert f"cannot write --json {gone}" in capsys.readouterr().err
    assert summary(REPORT, written, minimized=False)[0] == \
        f"alignbot: report in {written[0]} and {good}"
