"""The built-in spec library: it registers broadly, and every spec draws valid programs.

A spec that raises on the reference (outside ``raises=True``), crashes in its own Python code,
or makes the reference's backward fail checks nothing, so each spec is drawn a few times here
with the reference alone; one slow test runs the whole library against the reference itself.
"""

from __future__ import annotations

import importlib
import json
import math
import pkgutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from alignbot.checks import CandidateProcess, check
from alignbot.checks import library as library_package
from alignbot.checks.cli import main
from alignbot.checks.engine import draw_programs
from alignbot.checks.spec import Spec
from alignbot.checks.spec_loading import library_specs

FIXTURES = Path(__file__).parent / "fixtures"
DRAWS = 4
SEEDS = (0, 1)
MAX_INPUT_ELEMENTS = 1000  # the library must stay fast on a small CPU machine
# but for the half-precision reductions over thousands of elements (a strided 4097: 8194)
LONG_INPUT_ELEMENTS = {"tiles": 2 * 4097}

FAMILIES = ("activations", "convolution", "elementwise", "inplace", "interpolation", "linalg",
            "losses", "normalization", "pooling", "precision", "reductions", "shape_ops", "tiles")


def family(spec: Spec) -> str:
    return spec.fn.__module__.rsplit(".", 1)[-1]


def raising_nodes(program: dict[str, Any]) -> list[dict[str, Any]]:
    return [node for node in program["nodes"] if node.get("raises")]


def input_elements(program: dict[str, Any]) -> int:
    return sum(math.prod(node["shape"]) for node in program["nodes"] if node["op"] == "input")


def test_library_registers_enough_specs_across_families() -> None:
    specs = library_specs()
    per_family = Counter(family(s) for s in specs)
    assert len(specs) >= 40
    assert len(per_family) >= 10
    assert set(FAMILIES) <= set(per_family)


def test_every_library_module_registers_specs() -> None:
    per_family = Counter(family(s) for s in library_specs())
    modules = [info.name for info in pkgutil.iter_modules(library_package.__path__)]
    assert modules
    for name in modules:
        importlib.import_module(f"{library_package.__name__}.{name}")
        assert per_family[name] > 0, f"checks/library/{name}.py registers no spec"


def test_specs_declare_their_ops_and_a_modest_size() -> None:
    for spec in library_specs():
        assert spec.ops, spec.name
        assert all(op.startswith("torch.") for op in spec.ops), spec.name
        assert 8 <= spec.n <= 20, spec.name
        assert spec.name == f"{family(spec)}.{spec.fn.__name__}"


def test_library_has_raising_specs_in_several_families() -> None:
    raising = [s for s in library_specs() if s.raises]
    assert len(raising) >= 3
    assert len({family(s) for s in raising}) >= 3
    assert all(not s.backward for s in raising)


@pytest.mark.slow
@pytest.mark.parametrize("spec", library_specs(), ids=lambda s: s.name)
def test_spec_draws_valid_programs(spec: Spec) -> None:
    """Every draw: raising specs raise on the reference, the others neither raise nor fail in
    backward, and the inputs stay small."""
    programs: list[dict[str, Any]] = []

    def visit(program: dict[str, Any], reference: dict[str, dict[str, Any]]) -> None:
        programs.append(program)
        raised = raising_nodes(program)
        if spec.raises:
            assert raised, f"{spec.name} drew a program the reference accepts: {program['nodes']}"
            assert raised[-1] is program["nodes"][-1]
        else:
            assert not raised, f"{spec.name}: the reference raised {reference[raised[0]['id']]}"
            assert "backward" not in reference, reference.get("backward")
        assert input_elements(program) <= LONG_INPUT_ELEMENTS.get(family(spec),
                                                                  MAX_INPUT_ELEMENTS)

    for seed in SEEDS:
        draw_programs(spec, DRAWS, seed, visit)
    assert programs


@pytest.mark.slow
def test_specs_with_gradients_check_some() -> None:
    """A library spec that never yields a gradient observation would not test backward."""
    for spec in library_specs():
        if spec.raises or not spec.backward:
            continue
        keys: set[str] = set()

        def visit(program: dict[str, Any], reference: dict[str, dict[str, Any]],
                  keys: set[str] = keys) -> None:
            keys.update(k for k in reference if k.startswith("grad:"))

        draw_programs(spec, 8, 0, visit)
        assert keys, f"{spec.name} checked no gradient in 8 draws: declare backward=False"


def test_max_pool_windows_never_lie_wholly_in_padding() -> None:
    """Such a window yields -inf and an out-of-range index, and backward then corrupts the
    reference's heap (torch 2.13): the spec must never draw one. Inputs are finite, so any
    -inf in a pooled result means it did."""
    (spec,) = [s for s in library_specs() if s.name == "pooling.max_pool"]

    def visit(program: dict[str, Any], reference: dict[str, dict[str, Any]]) -> None:
        for node in program["nodes"]:
            for key in (node["id"], f"{node['id']}.0"):
                observed = reference.get(key, {})
                if node["op"] != "input" and observed.get("t") == "tensor":
                    assert not np.isneginf(observed["data"]).any(), node

    for seed in range(6):
        draw_programs(spec, spec.n, seed, visit)


@pytest.mark.slow
def test_a_wrong_optimizer_step_is_found_at_the_step(tmp_path: Path) -> None:
    """training.train_steps observes the parameters after each ``step()``: the finding names
    the optimizer's step, and its repro (the program up to there) is verified."""
    report = tmp_path / "report.json"
    code = main(["check", "--prelude", (FIXTURES / "optimizer_prelude.py").read_text(),
                 "--ops", "training.train_steps", "--n", "4", "--seed", "1", "--json",
                 str(report), "--no-progress", "--jobs", "1"])
    assert code == 1
    findings = json.loads(report.read_text())["findings"]
    assert findings and {f["op"] for f in findings} == {"torch.optim.SGD.step"}
    assert all(f["repro_verified"] for f in findings)


@pytest.mark.slow
def test_library_agrees_with_the_reference(torch_candidate: CandidateProcess) -> None:
    """The reference checked against itself finds nothing: no spec is flaky or ill-posed."""
    result = check(library_specs(), torch_candidate, seed=1)
    assert result.programs_run == sum(s.n for s in library_specs())
    assert [f"{f.spec}: {f.kind.value} at {f.op}: {f.message}" for f in result.findings] == []


def test_precision_specs_draw_low_precision_and_complex_dtypes() -> None:
    dtypes: set[str] = set()

    def visit(program: dict[str, Any], reference: dict[str, dict[str, Any]]) -> None:
        dtypes.update(n["dtype"] for n in program["nodes"] if n["op"] == "input")

    for spec in library_specs():
        if family(spec) == "precision":
            draw_programs(spec, spec.n, 0, visit)
    assert {"float16", "bfloat16", "complex64", "complex128"} <= dtypes
