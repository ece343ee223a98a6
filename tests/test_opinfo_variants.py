"""checks/opinfo/variants.py: an OpInfo sample made non-contiguous, negated, integer-valued,
zeroed or with arguments in a relation; and the planted bugs of each kind that a default
check (the library and the OpInfo specs) finds at its op."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from alignbot.checks.cli import main
from alignbot.checks.engine import draw_programs
from alignbot.checks.opinfo import adapter, opinfo_specs
from alignbot.checks.opinfo.specs import Plan, TensorValue, kind, kinds_first, sample_pool
from alignbot.checks.opinfo.variants import (
    VARIANTS,
    apply,
    integer_valued,
    negated,
    related,
    respelled,
    zeros,
)

FIXTURES = Path(__file__).parent / "fixtures"


def _tensor(values: list[float], dtype: str = "float32") -> TensorValue:
    return TensorValue(np.array(values, dtype=np.float32 if dtype == "float32" else np.int64),
                       dtype, requires_grad=False)


def test_value_variants_change_the_first_tensor_everywhere_it_is_used() -> None:
    x = _tensor([0.4, -1.6, 2.5, 3.0])
    planned = Plan(x, (x, 2), {})
    for variant, expected in ((negated, [-0.4, 1.6, -2.5, -3.0]),
                              (integer_valued, [0.0, -2.0, 2.0, 3.0]),
                              (zeros, [0.0, -1.6, 0.0, 3.0])):
        changed = variant(planned)
        assert changed.input is changed.args[0]  # one tensor, used twice, stays one
        assert changed.input.array.tolist() == pytest.approx(expected), variant.__name__
        assert planned.input.array.tolist() == pytest.approx([0.4, -1.6, 2.5, 3.0])
    unsigned = Plan(TensorValue(np.array([1, 2], dtype=np.uint8), "uint8", False), (), {})
    assert negated(unsigned) is unsigned and integer_valued(unsigned) is unsigned


def test_related_puts_two_arguments_at_equal_just_above_and_just_below() -> None:
    x = _tensor([1.0, 2.0])
    bounds = Plan(x, (), {"min": 0.25, "max": 0.75})
    assert related(bounds, 0).kwargs == {"min": 0.25, "max": 0.25}
    above, below = related(bounds, 1).kwargs["max"], related(bounds, 2).kwargs["max"]
    assert 0.25 < above < 0.2500001 and 0.2499999 < below < 0.25
    index = Plan(x, (), {"padding_idx": 2})  # one integer: an index next to the sampled one
    assert {related(index, way).kwargs["padding_idx"] for way in range(3)} == {1, 3}
    low, high = _tensor([0.0, 1.0]), _tensor([5.0, 6.0])
    clamp = related(Plan(x, (low, high), {}), 0)  # tensors: the last two alike, max := min
    assert clamp.args[0] is low and clamp.args[1].array.tolist() == [0.0, 1.0]
    assert related(Plan(x, (), {}), 0) == Plan(x, (), {})  # nothing to relate: as sampled
    # tensors of one dtype but not one shape: a value equal to a boundary (searchsorted)
    boundaries, value = _tensor([-1.5, 0.25, 3.0]), TensorValue(np.array(7.0, np.float32),
                                                                 "float32", False)
    tie = related(Plan(boundaries, (value,), {}), 0)
    assert tie.args[0].array.shape == () and float(tie.args[0].array) == -1.5


def test_respelled_uses_each_keywords_other_spelling() -> None:
    x = _tensor([1.0])
    assert respelled(Plan(x, (), {"dim": 0, "keepdim": True})).kwargs == {
        "axis": 0, "keepdims": True}
    assert respelled(Plan(x, (x,), {"right": True, "out_int32": False})).kwargs == {
        "side": "right", "out_int32": False}
    assert respelled(Plan(x, (x,), {"side": "left"})).kwargs == {"right": False}
    # a respelled draw ties a value to a boundary: only there do right= and side= matter
    boundaries, values = _tensor([0.5, 1.5, 2.5]), _tensor([9.0, 9.0])
    tie = respelled(Plan(boundaries, (values,), {"side": "right"}))
    assert tie.kwargs == {"right": True} and tie.args[0].array.tolist() == [0.5, 1.5]
    assert respelled(Plan(x, (x,), {"out_int32": True})) == Plan(x, (x,), {"out_int32": True})


def test_a_pool_puts_one_sample_of_each_kind_first_on_non_empty_tensors() -> None:
    empty, full = _tensor([]), _tensor([1.0, 2.0])
    plans = [Plan(empty, (), {"right": False}), Plan(empty, (), {"right": True}),
             Plan(full, (), {"right": False}), Plan(full, (), {"right": True}),
             Plan(full, (), {"right": False, "sorter": full})]
    ordered = kinds_first(plans)
    assert ordered[:3] == [plans[2], plans[3], plans[4]]
    assert ordered[3:] == [plans[0], plans[1]]
    assert kind(plans[4]) == ("tensor", (), (("right", "False"), ("sorter", "tensor")))


def test_the_samples_only_given_without_gradients_join_the_pool() -> None:
    """Embedding's generator yields its padding_idx samples only without gradients; they
    come right after the first sample with gradients, and keep none themselves."""
    (entry,) = [e for e in adapter.database().entries if e.key == "nn.functional.embedding"]
    pool = sample_pool(entry, "float32", 0, False)
    assert pool[0].input.requires_grad and not pool[0].kwargs
    assert pool[1].kwargs == {"padding_idx": pool[1].kwargs["padding_idx"]}
    assert not pool[1].input.requires_grad


def test_a_spec_draws_every_variant_and_a_non_contiguous_view_is_a_traced_call() -> None:
    (spec,) = [s for s in opinfo_specs(["opinfo.sqrt"]) if s.name == "opinfo.sqrt"]
    programs: list[dict[str, Any]] = []
    draw_programs(spec, spec.n, 0, lambda program, ref: programs.append(program))
    targets = [[n.get("target") for n in p["nodes"] if n["op"] != "input"] for p in programs]
    assert ["torch.Tensor.transpose", "torch.sqrt"] in targets
    assert len(VARIANTS) <= spec.n
    assert apply(Plan(None, (), {}), "as sampled") == Plan(None, (), {})


# One planted bug per kind a default check of the library alone missed (the fixture's
# docstring says which), each at its op.
PLANTED = {
    "torch.sum": "a float16 sum accumulated in float16",
    "torch.searchsorted": "the legacy right= spelling ignored",
    "torch.nn.functional.layer_norm": "eps= dropped",
    "torch.cumsum": "a non-contiguous input read as contiguous",
    "torch.nn.functional.embedding": "a hang for one padding_idx",
    "torch.sqrt": "wrong only on negative inputs",
    "torch.clamp": "wrong where min equals max",
}


@pytest.fixture(scope="module")
def planted_misses_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One default check restricted to the planted ops (the hang's timeout cut to 2 s so that
    it and its shrinking do not wait a minute a call)."""
    path = tmp_path_factory.mktemp("misses") / "report.json"
    code = main(["check", "--prelude", (FIXTURES / "default_misses_prelude.py").read_text(),
                 "--ops", ",".join(PLANTED), "--timeout", "2", "--json", str(path),
                 "--no-progress"])
    assert code == 1
    report: dict[str, Any] = json.loads(path.read_text())
    return report


@pytest.mark.slow
@pytest.mark.parametrize("op", sorted(PLANTED))
def test_each_planted_bug_is_found_at_its_op_with_a_verified_repro(
        planted_misses_report: dict[str, Any], op: str) -> None:
    at_op = [f for f in planted_misses_report["findings"] if f["op"] == op]
    assert at_op, f"{PLANTED[op]}: not found; findings at " + ", ".join(
        sorted({f["op"] for f in planted_misses_report["findings"]}))
    assert any(f["repro_verified"] for f in at_op), [f["minimize_error"] for f in at_op]
