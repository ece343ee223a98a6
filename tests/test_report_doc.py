"""checks/report_doc.py: docs/report-format.md's tables are the report's types, and name every
key a real report holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from alignbot.checks.report_doc import UPDATE, keys, tables, with_tables

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "report-format.md"
REPORT = ROOT / "tests" / "fixtures" / "planted_report_seed7.json"


def test_the_page_holds_the_current_tables() -> None:
    page = PAGE.read_text()
    assert with_tables(page) == page, f"the report's tables are out of date: run `{UPDATE}`"


def test_every_key_of_a_real_report_is_documented() -> None:
    documented = keys()
    report: dict[str, Any] = json.loads(REPORT.read_text())
    assert set(report) <= documented["Report"]
    for finding in report["findings"]:
        assert set(finding) <= documented["FindingEntry"], set(finding) - documented["FindingEntry"]
        if "evidence" in finding:
            assert set(finding["evidence"]) <= documented["Evidence"]
    for cause in report["causes"]:
        assert set(cause) <= documented["Cause"]
        assert all(set(m) <= documented["CauseMember"] for m in cause["members"])


def test_each_key_has_its_type_and_whether_every_report_has_it() -> None:
    text = tables()
    assert "| `complete` | boolean | yes |" in text
    assert "| `capabilities` | [CapabilitiesEntry](#capabilitiesentry) | no |" in text
    assert '`"grad-mismatch"`' in text  # a kind's values, from the enum
