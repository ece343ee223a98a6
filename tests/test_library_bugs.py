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

from alignbot.checks.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
PRELUDE = (FIXTURES / "library_bugs_prelude.py").read_text()
# op -> family, as the prelude plants them
PLANTED = dict(re.findall(r'planted\("([^"]+)", "([^"]+)"\)', PRELUDE))
KIND_OF_FAMILY = {"missing API": "missing-api", "gradients": "grad-mismatch",
                  "dtype promotion": "dtype-mismatch"}


def _check(tmp: Path, ops: list[str], *extra: str) -> dict[str, Any]:
    path = tmp / "report.json"
    code = main(["check", "--prelude", PRELUDE, "--ops", ",".join(ops), "--no-opinfo",
                 "--json", str(path), "--no-progress", *extra])
    assert code == 1
    report: dict[str, Any] = json.loads(path.read_text())
    return report


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """The kinds of finding at each op, the library checked at default settings."""
    start = time.perf_counter()
    report = _check(tmp_path_factory.mktemp("bugs"), list(PLANTED),
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
def test_nine_in_ten_bugs_are_found_at_their_op(findings: dict[str, set[str]]) -> None:
    # A bug shows only on some inputs, so a few depend on what the default draws happen to
    # be (the fixture prints which); the bar is 38 of 40 scaled to the bugs planted.
    found = [op for op in PLANTED if op in findings]
    assert len(found) >= max(38, int(0.9 * len(PLANTED))), sorted(set(PLANTED) - set(found))


# The bugs the default draws miss, and why: each needs a steered option together with values
# that this seed's draws of that option happen not to bring (another seed or more draws finds
# them). A bug found here fails its test below until it leaves this table.
MISSED = {
    "torch.linalg.det": "det().abs() differs only for a negative determinant: rows flipped in "
                        "a 2x2 or 3x3 matrix, which no det draw combines",
    "torch.nn.functional.pixel_unshuffle": "the channel order shows only with 2+ channels and "
                                           "a factor of 2+ in the functional form",
    "torch.roll": "rolling the other way shows only where a shift is not a multiple of half "
                  "the dim's size; the roll draws take size-1 or empty dims",
    "torch.topk": "dropping largest=False shows only when k is below the dim's size; the "
                  "draw with largest=False takes a dim of size 1",
}


@pytest.mark.slow
@pytest.mark.parametrize("op", sorted(PLANTED))
def test_each_planted_bug_is_found_at_its_op_or_named_as_missed(
        findings: dict[str, set[str]], op: str) -> None:
    assert (op in findings) != (op in MISSED), MISSED.get(op, "missed, and not in MISSED")


@pytest.mark.slow
@pytest.mark.parametrize("op", sorted(PLANTED))
def test_a_bug_found_has_its_familys_kind(findings: dict[str, set[str]], op: str) -> None:
    kind = KIND_OF_FAMILY.get(PLANTED[op])
    assert kind is None or op not in findings or kind in findings[op], findings[op]


@pytest.mark.slow
@pytest.mark.parametrize("family", ["low precision", "complex", "normalization (eval only)",
                                    "non-contiguous", "fusion"])
def test_bugs_that_show_only_in_one_setting_are_found(findings: dict[str, set[str]],
                                                       family: str) -> None:
    ops = [op for op, planted in PLANTED.items() if planted == family]
    assert ops and all(op in findings for op in ops), (family, ops)


@pytest.mark.slow
def test_a_bug_only_on_strided_input_minimizes_to_a_verified_repro(tmp_path: Path) -> None:
    report = _check(tmp_path, ["elementwise.clamp"])
    assert {f["op"] for f in report["findings"]} == {"torch.clamp"}
    for finding in report["findings"]:
        assert finding["repro_verified"], finding["repro_output"]
        # the repro keeps what the bug needs: a strided view as clamp's input
        assert re.search(r"\.(permute|transpose|mT|T|expand)\b|::2\]", finding["repro"]), \
            finding["repro"]
