"""bot/engine_report.py: the strict model of the engine's report (what the sandbox hands back)
and the one builder of prefilled upstream links."""

from __future__ import annotations

import enum
import json
import types
import typing
from typing import Annotated, Any, Literal, NotRequired, TypedDict
from urllib.parse import parse_qs, urlsplit

import pytest
from pydantic import BaseModel, ConfigDict, Field, create_model

from alignbot.bot.engine_report import (
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
from alignbot.checks import report as reports
from alignbot.checks import report_types
from alignbot.checks.engine import CheckResult
from alignbot.checks.findings import Finding, Kind
from alignbot.checks.markdown import Trusted
from alignbot.checks.triage import Verdict

# Keys the engine always writes that the App takes as optional: job results stored by earlier
# versions lack them, and a stored result is validated again when a command reads it.
OLDER_REPORTS = {"EngineReport.complete", "EngineFinding.signature", "EngineFinding.examples",
                 "Evidence.oracles", "EngineReport.exploration", "EngineFinding.cause",
                 "EngineReport.causes", "EngineReport.candidate_packages",
                 "SpecExploration.covered"}


# --------------------------------------------------------------------------- one contract


def shape(annotation: Any) -> frozenset[Any]:
    """The JSON values a type admits, as a set of alternatives: limits (``Annotated``) dropped,
    unions flattened, a literal or an enum as its values, an object as ``"object"`` (its keys
    are compared on their own), lists and mappings by their items."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return shape(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return frozenset().union(*(shape(a) for a in typing.get_args(annotation)))
    if origin is Literal:
        return frozenset(("=", value) for value in typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return frozenset(("=", member.value) for member in annotation)
    if objects(annotation) == [annotation]:
        return frozenset({"object"})
    if origin in (list, dict):
        return frozenset({(origin.__name__, *(shape(a) for a in typing.get_args(annotation)))})
    return frozenset({annotation})


def objects(annotation: Any) -> list[Any]:
    """The TypedDicts or models inside a type, in order (``list[T]``: ``T``)."""
    if typing.is_typeddict(annotation) or (isinstance(annotation, type)
                                           and issubclass(annotation, BaseModel)):
        return [annotation]
    return [inner for arg in typing.get_args(annotation) for inner in objects(arg)]


def differences(typed: Any, model: type[BaseModel], lenient: frozenset[str] = frozenset()
                ) -> list[str]:
    """Every key, optionality or type in which the engine's TypedDict and the App's model
    differ, nested objects included, each named ``Model.key``. A key the App defaults to None
    treats null as absent, on both sides."""
    found: list[str] = []
    written = typing.get_type_hints(typed)
    read = model.model_fields
    for key in sorted(written.keys() - read.keys()):
        found.append(f"{model.__name__}.{key}: the engine writes it, the App refuses it")
    for key in sorted(read.keys() - written.keys()):
        found.append(f"{model.__name__}.{key}: the App reads it, the engine never writes it")
    for key in sorted(written.keys() & read.keys()):
        name, field = f"{model.__name__}.{key}", read[key]
        engine_optional = key in typed.__optional_keys__
        if engine_optional and field.is_required():
            found.append(f"{name}: the engine may leave it out, the App requires it")
        if not engine_optional and not field.is_required() and name not in lenient:
            found.append(f"{name}: the engine always writes it, the App takes it as optional")
        ours, theirs = shape(written[key]), shape(field.annotation)
        if not field.is_required() and field.default is None:
            ours, theirs = ours - {type(None)}, theirs - {type(None)}
        if ours != theirs:
            found.append(f"{name}: the engine writes {sorted(map(str, ours - theirs))} that "
                         f"the App refuses, the App takes {sorted(map(str, theirs - ours))}"
                         " that the engine never writes")
        for inner_typed, inner_model in zip(objects(written[key]), objects(field.annotation),
                                            strict=False):
            found += differences(inner_typed, inner_model, lenient)
    return found


def test_the_app_reads_exactly_the_report_the_engine_writes() -> None:
    """checks/report_types.py (what mypy holds the engine to) and the App's strict models are
    one contract: same keys, optionality, types and literal values, all the way down."""
    assert differences(report_types.Report, EngineReport, frozenset(OLDER_REPORTS)) == []


class _Inner(TypedDict):
    side: Literal["reference", "candidate"]


# The functional form: this module's annotations are strings, and Python 3.11 finds
# NotRequired only in evaluated ones.
_Written = TypedDict(  # noqa: UP013
    "_Written", {"name": str, "count": NotRequired[int], "inner": list[_Inner]})
_WrittenMore = TypedDict(  # noqa: UP013
    "_WrittenMore", {"name": str, "count": NotRequired[int], "inner": list[_Inner], "new": bool})


class _InnerModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    side: Literal["reference", "candidate"]


class _Read(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    name: Annotated[str, Field(max_length=10)]
    count: int | None = None
    inner: list[_InnerModel] = Field(max_length=3)


def _read(**fields: Any) -> type[BaseModel]:
    return create_model("_Read", __base__=_Read, **fields)


def test_the_contract_check_names_each_difference() -> None:
    """The walk above fails on a key on one side only (the engine's added alone, then the
    App's), a changed optionality, type or literal set, also inside a nested object."""
    assert differences(_Written, _Read) == []
    assert differences(_WrittenMore, _Read) == [
        "_Read.new: the engine writes it, the App refuses it"]
    assert differences(_Written, _read(new=(bool | None, None))) == [
        "_Read.new: the App reads it, the engine never writes it"]
    assert differences(_Written, _read(count=(int, ...))) == [
        "_Read.count: the engine may leave it out, the App requires it"]
    assert differences(_Written, _read(name=(str, "x"))) == [
        "_Read.name: the engine always writes it, the App takes it as optional"]
    assert differences(_Written, _read(name=(str, "x")), frozenset({"_Read.name"})) == []
    (retyped,) = differences(_Written, _read(name=(int, ...)))
    assert retyped.startswith("_Read.name: the engine writes [\"<class 'str'>\"]")
    wider = create_model("_InnerModel", __base__=_InnerModel,
                         side=(Literal["reference", "candidate", "both"], ...))
    (nested,) = differences(_Written, _read(inner=(list[wider], ...)))  # type: ignore[valid-type]
    assert nested.startswith("_InnerModel.side: ") and "('=', 'both')" in nested


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
    ({"candidate_packages": {"torchax": "0.0.13 <img src=x>"}}, "candidate_packages.torchax"),
    ({"candidate_packages": {"@octocat": "1.0"}}, "candidate_packages.@octocat"),
    ({"candidate_packages": {f"p{i}": "1" for i in range(17)}}, "candidate_packages"),
    ({"causes": [{"id": "x", "form": "raised", "signature": "s", "summary": "s", "count": 1,
                  "members": []}]}, "causes.0.id"),
    ({"causes": [{"id": "0123456789ab", "form": "@octocat", "signature": "s", "summary": "s",
                  "count": 1, "members": []}]}, "causes.0.form"),
    ({"findings": [finding(cause=["raised: x"])]}, "findings.0.cause"),
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


@pytest.mark.slow
def test_a_real_minimized_report_of_planted_bugs_is_valid(
        planted_report: dict[str, Any]) -> None:
    """The engine and the model move together: a real run with minimization, triage and
    repro verification (a crash among the bugs) must pass the App's strict model."""
    data = planted_report
    parsed = parse_report(data)
    assert parsed.findings and all(f.verdict is not None for f in parsed.findings)
    assert {f.kind for f in parsed.findings} >= {Kind.CANDIDATE_CRASH}
