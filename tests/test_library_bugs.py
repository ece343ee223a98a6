"""The engine finds bugs where they are: a candidate with one planted bug per op, across
every family the library covers (tests/fixtures/library_bugs_prelude.py), is checked on the
library's specs for those ops at the default seed and draws, and each bug must be found at
its own op. Minimization is off for the count; two bugs that hide from a call judged alone
or in another mode are minimized to verified repros."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from checks.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
PRELUDE = (FIXTURES / "library_bugs_prelude.py").read_text()
# op -> family, as the prelude plants them
PLANTED = dict(re.findall(r'planted\("([^"]+)", "([^"]+)"\)', PRELUDE))
# specs that draw a planted op without declaring it in their ops
UNDECLARED = ("elementwise.integer_ops", "reductions.argmax")
KIND_OF_FAMILY = {"missing API": "missing-api", "gradients": "grad-mismatch",
                  "dtype promotion": "dtype-mismatch"}


def _check(tmp: Path, ops: list[str], *extra: str) -> dict[str, Any]:
    path = tmp / "report.json"
    code = main(["check", "--prelude", PRELUDE, "--ops", ",".join(ops), "--json", str(path),
                 "--no-progress", *extra])
    assert code == 1
    report: dict[str, Any] = json.loads(path.read_text())
    return report


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """The kinds of finding at each op, the library checked at default settings."""
    start = time.perf_counter()
    report = _check(tmp_path_factory.mktemp("bugs"), [*PLANTED, *UNDECLARED],
                    "--no-minimize", "--jobs", "2")
    by_op: dict[str, set[str]] = {}
    for finding in report["findings"]:
        by_op.setdefault(finding["op"], set()).add(finding["kind"])
    found = [op for op in PLANTED if op in by_op]
    print(f"\nplanted {len(PLANTED)} bugs, found {len(found)} at their op, "
          f"{len(report['findings'])} findings, {time.perf_counter() - start:.0f} s; "
          f"missed: {sorted(set(PLANTED) - set(found))}")
    return by_op


def test_the_planted_bugs_span_the_families() -> None:
    assert len(PLANTED) >= 40
    families = {family.split(" (")[0] for family in PLANTED.values()}
    assert families >= {
        "elementwise", "reductions", "shape ops", "indexing", "linalg", "convolution",
        "pooling", "normalization", "activations", "losses", "interpolation", "in-place",
        "errors", "gradients", "dtype promotion", "non-contiguous", "fusion",
        "low precision", "complex"}


@pytest.mark.slow
def test_at_least_38_bugs_are_found_at_their_op(findings: dict[str, set[str]]) -> None:
    assert sum(op in findings for op in PLANTED) >= 38


@pytest.mark.slow
@pytest.mark.parametrize("op", sorted(PLANTED))
def test_each_bug_is_found_at_its_op(findings: dict[str, set[str]], op: str) -> None:
    assert op in findings, f"{PLANTED[op]} bug at {op} not found"
    kind = KIND_OF_FAMILY.get(PLANTED[op])
    assert kind is None or kind in findings[op], findings[op]


@pytest.mark.slow
def test_a_bug_only_on_strided_input_minimizes_to_a_verified_repro(tmp_path: Path) -> None:
    report = _check(tmp_path, ["elementwise.clamp"], "--n", "8")
    assert {f["op"] for f in report["findings"]} == {"torch.clamp"}
    for finding in report["findings"]:
        assert finding["repro_verified"], finding["repro_output"]
        # the repro keeps what the bug needs: a strided view as clamp's input
        assert re.search(r"\.(permute|transpose|mT|T)\b", finding["repro"]), finding["repro"]
