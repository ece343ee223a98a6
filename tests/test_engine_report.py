"""bot/engine_report.py: the strict model of the engine's report (what the sandbox hands back)
and the one builder of prefilled upstream links."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from bot.engine_report import (
    MAX_FINDINGS,
    EngineFinding,
    EngineReport,
    InvalidReport,
    checked_finding,
    empty_report,
    new_issue_link,
    parse_report,
    stored_findings,
)
from checks import report as reports
from checks.engine import CheckResult
from checks.findings import Finding, Kind
from checks.markdown import Trusted
from checks.triage import Verdict

FIXTURES = Path(__file__).parent / "fixtures"


def finding(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "fingerprint": "9237e52a4190", "kind": "value-mismatch",
        "op": "torch.nn.functional.softplus", "spec": "planted_specs.softplus_scaled",
        "message": "result v1 differs", "count": 6, "observation": "v1", "node": "v1",
        "program": {"nodes": [{"id": "v0", "op": "input"}]},
        "max_abs": 0.5, "max_rel": "inf",
        "repro": "import torch\n", "repro_verified": True, "repro_output": "ref 1\ncand 2\n",
        "repro_program": {"nodes": []}, "repro_reference_only": "import torch\n",
        "repro_reference_only_verified": True, "verdict": "reference-suspect",
        "verdict_reason": "float64 sides with the candidate",
        "evidence": {"oracles": {"reference-no-mkldnn": "candidate"}, "claim": "c",
                     "expected": "e", "reference_rmse_vs_float64": 0.5,
                     "candidate_rmse_vs_float64": 0.0, "multiplier": 2.0, "floor": 1e-6,
                     "float64": "candidate", "spec_declares_invalid_input": False,
                     "third_frameworks_raise": [True], "no_draft": "n"},
        "upstream_draft": "### 🐛 Describe the bug\n", "upstream_title": "softplus is off",
        "upstream_url": "https://evil.example/", "shrink": {"calls": 12, "seconds": 0.5},
        "minimize_error": None}
    return {**base, **fields}


def report(findings: list[Any] | None = None, **fields: Any) -> dict[str, Any]:
    return {"report_version": 1, "reference": "2.5.1", "candidate": "torch", "seed": 3,
            "specs_run": 1, "specs": ["planted_specs.softplus_scaled"], "programs_run": 6,
            "complete": True, "findings": [finding()] if findings is None else findings, **fields}


def problem(data: Any) -> str:
    with pytest.raises(InvalidReport) as caught:
        parse_report(data)
    return str(caught.value)


def test_every_field_of_a_full_report_is_read() -> None:
    parsed = parse_report(report())
    (f,) = parsed.findings
    assert f.kind is Kind.VALUE and f.verdict is Verdict.REFERENCE_SUSPECT
    assert f.max_rel == "inf" and f.shrink is not None and f.shrink.calls == 12
    assert f.evidence is not None and f.evidence.oracles == {"reference-no-mkldnn": "candidate"}
    assert parsed.dump()["findings"][0]["evidence"]["float64"] == "candidate"
    assert parse_report(parsed.dump()) == parsed  # a stored report reads back the same


def test_the_engines_own_reports_are_valid() -> None:
    # Finding.to_json and to_json, without minimizing (no verdict) and as the CLI writes them
    raw = Finding(Kind.GRAD, "torch.tanh", "planted.tanh", "gradient differs", {"nodes": []},
                  key="grad:v0", node="v1", extra={"max_abs": float("inf"), "max_rel": 0.1})
    result = CheckResult("2.5.1", "torch", 0, ["planted.tanh"], 3, [raw], complete=False)
    data = reports.to_json(result, "import torch\nimport fastops")
    parsed = parse_report(json.loads(reports.dumps(data)))
    assert parsed.findings[0].verdict is None and parsed.findings[0].max_abs == "inf"
    assert parsed.findings[0].fingerprint == raw.fingerprint
    assert empty_report().findings == [] and parse_report(empty_report().dump())


@pytest.mark.parametrize(("change", "where"), [
    ({"extra": 1}, "extra"),
    ({"findings": [1, "two"]}, "findings.0"),
    ({"findings": [finding(extra="x")]}, "findings.0.extra"),
    ({"findings": [finding(evidence={**finding()["evidence"], "x": 1})]},
     "findings.0.evidence.x"),
    ({"findings": [finding(kind="@octocat")]}, "findings.0.kind"),
    ({"findings": [finding(verdict="<!-- alignbot:sticky-comment -->")]}, "findings.0.verdict"),
    ({"findings": [finding(fingerprint="9237E52A419")]}, "findings.0.fingerprint"),
    ({"findings": [finding(fingerprint="9237e52a4190\n")]}, "findings.0.fingerprint"),
    ({"specs_run": "2"}, "specs_run"),
    ({"specs_run": 2.0}, "specs_run"),
    ({"specs_run": True}, "specs_run"),
    ({"complete": "yes"}, "complete"),
    ({"findings": [finding(minimize_error=["x"])]}, "findings.0.minimize_error"),
    ({"programs_run": -1}, "programs_run"),
    ({"seed": 2**64}, "seed"),
    ({"report_version": 2}, "report_version"),
    ({"reference": ["2.5.1"]}, "reference"),
    ({"findings": [finding(count=0)]}, "findings.0.count"),
    ({"findings": [finding(repro_verified="yes")]}, "findings.0.repro_verified"),
    ({"findings": [finding(max_abs="0.5")]}, "findings.0.max_abs"),
    ({"findings": [finding(op="x" * 301)]}, "findings.0.op"),
    ({"findings": [finding(message="m" * 100_001)]}, "findings.0.message"),
    ({"specs": ["s"] * 10_001}, "specs"),
    ({"findings": [finding()] * (MAX_FINDINGS + 1)}, "findings"),
    ({"findings": [finding(evidence={"oracles": {"x": "@octocat"}})]},
     "findings.0.evidence.oracles.x"),
])
def test_what_the_engine_never_writes_is_refused(change: dict[str, Any], where: str) -> None:
    where_found = problem(report(**change)).split(": ")[0]
    assert where_found == where or where_found.startswith(f"{where}.")  # a union names its branch


def test_missing_fields_and_non_json_values_are_refused() -> None:
    for key in ("report_version", "reference", "candidate", "seed", "specs_run", "specs",
                "programs_run", "findings"):
        data = report()
        data.pop(key)
        assert problem(data) == f"{key}: Field required"
    for key in ("fingerprint", "kind", "op", "spec", "message", "count", "observation",
                "node", "program"):
        bad = finding()
        bad.pop(key)
        assert problem(report([bad])) == f"findings.0.{key}: Field required"
    assert problem(report([finding(max_abs=float("nan"))])).startswith("not plain JSON")
    assert problem({"findings": [1, "two"]}).startswith("report_version: Field required")
    assert problem([]).startswith("the report:")


def test_a_finding_without_minimizing_needs_no_verdict() -> None:
    bare = {k: finding()[k] for k in ("fingerprint", "kind", "op", "spec", "message", "count",
                                      "observation", "node", "program")}
    (parsed,) = parse_report(report([bare])).findings
    assert parsed.verdict is None and parsed.repro is None


def test_the_first_problem_does_not_echo_the_value_and_cuts_names() -> None:
    text = problem({**report(), "@octocat" * 20: "<img src=x>"})
    assert "<img" not in text and len(text.split(":")[0]) <= 40
    assert "@octocat" in text  # the key is named (defused when rendered), but cut short


def test_the_upstream_link_is_built_from_the_tracker_never_from_the_report() -> None:
    parsed = EngineFinding.model_validate_json(json.dumps(finding()))
    link = new_issue_link("pytorch/pytorch", parsed)
    assert isinstance(link, Trusted)
    parts = urlsplit(link)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "github.com",
                                                       "/pytorch/pytorch/issues/new")
    query = parse_qs(parts.query)
    assert query["title"] == ["softplus is off"] and query["body"] == [finding()["upstream_draft"]]
    assert not any(c in link for c in " ()<>\n")
    long = parsed.model_copy(update={"upstream_draft": "x" * 50_000})
    assert len(new_issue_link("pytorch/pytorch", long) or "") <= 8000
    assert new_issue_link("evil.example/../x", parsed) is None
    assert new_issue_link("a/b c", parsed) is None
    assert new_issue_link("pytorch/pytorch", parsed.model_copy(
        update={"upstream_draft": None})) is None


def test_checked_finding_drops_the_reports_link() -> None:
    checked = checked_finding(finding(), "pytorch/pytorch")
    assert checked["upstream_url"] is None
    assert str(checked["new_issue_link"]).startswith("https://github.com/pytorch/pytorch/")
    assert checked_finding({"fingerprint": "x"}, "pytorch/pytorch")["new_issue_link"] is None


def test_stored_findings_are_validated_again() -> None:
    assert stored_findings(report()) == parse_report(report()).dump()["findings"]
    assert stored_findings({"findings": [{"fingerprint": "x", "kind": "@octocat"}]}) is None
    assert isinstance(parse_report(report()), EngineReport)


def test_a_real_minimized_report_of_planted_bugs_is_valid(tmp_path: Path) -> None:
    """The engine and the model move together: a real run with minimization, triage and
    repro verification (a crash among the bugs) must pass the App's strict model."""
    out = tmp_path / "report.json"
    prelude = (FIXTURES / "planted_prelude.py").read_text()
    done = subprocess.run(
        [sys.executable, "-m", "checks.cli", "check", "--prelude", prelude,
         "--spec-file", str(FIXTURES / "planted_specs.py"), "--library",
         "--ops", "softplus_scaled,elu_crash,mean_keepdim", "--n", "5", "--seed", "2",
         "--timeout", "5",
         "--json", str(out), "--no-progress"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr[-2000:]
    data = json.loads(out.read_text())
    parsed = parse_report(data)
    assert parsed.findings and all(f.verdict is not None for f in parsed.findings)
    assert {f.kind for f in parsed.findings} >= {Kind.CANDIDATE_CRASH}
