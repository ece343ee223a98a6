"""The formulas as an oracle over drawn programs (modules, their state and mode included),
their gradients by finite differences, and their source standing alone in a repro."""

from __future__ import annotations

import subprocess
import sys
import warnings
from typing import Any

import numpy as np
import pytest

from alignbot.checks.compare import compare
from alignbot.checks.engine import draw_programs
from alignbot.checks.formulas import FUNCTIONS, MODULES, formula_observations
from alignbot.checks.formulas.gradients import formula_gradients
from alignbot.checks.formulas.source import standalone, summary
from alignbot.checks.oracle import finite_differences, reference_observations
from alignbot.checks.spec_loading import library_specs
from alignbot.checks.triage import to_float64

FAMILIES = ("pooling", "interpolation", "losses", "normalization")


def _programs(n: int) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for spec in library_specs():
        if spec.name.split(".")[0] in FAMILIES:
            drawn: list[dict[str, Any]] = []
            draw_programs(spec, n, 0, lambda program, ref, drawn=drawn: drawn.append(program))
            out[spec.name] = drawn
    return out


@pytest.mark.slow
def test_every_call_with_a_formula_agrees_with_the_float64_reference_on_drawn_programs(
        ) -> None:
    """Draws of the library's specs (where PyTorch is right): each observation the formulas
    make, module buffers after each call included, is the reference's float64 value."""
    judged: dict[str, int] = {}
    for name, programs in _programs(5).items():
        for program in programs:
            wide_program = to_float64(program)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                wide = reference_observations(wide_program)
            for key, obs in formula_observations(wide_program, wide).items():
                assert key in wide, (name, key)
                assert compare(wide[key], obs) is None, (name, key, compare(wide[key], obs))
                judged[name] = judged.get(name, 0) + 1
    assert {"pooling.lp_pool", "pooling.max_pool", "interpolation.upsample_module",
            "losses.cross_entropy", "normalization.batch_norm",
            "normalization.instance_norm"} <= set(judged)
    assert sum(1 for name in judged if name.startswith("normalization.batch_norm")) == 2


def _program(target: str, args: list[Any], kwargs: dict[str, Any], shape: list[int],
             pattern: str = "arange", backward: bool = False) -> dict[str, Any]:
    program: dict[str, Any] = {"seed": 0, "nodes": [
        {"id": "v0", "op": "input", "dtype": "float32", "shape": shape, "requires_grad": True,
         "recipe": {"kind": "pattern", "pattern": pattern}},
        {"id": "v1", "op": "call", "target": target, "args": [{"ref": "v0"}, *args],
         "kwargs": kwargs}]}
    if backward:
        program["backward"] = {"outputs": ["v1"], "wrt": ["v0"], "intermediates": ["v1"],
                               "seeds": [{"kind": "pattern", "pattern": "ones"}]}
    return program


def test_the_oracle_sees_what_pytorch_gets_wrong() -> None:
    program = to_float64(_program("torch.nn.functional.lp_pool2d", [1, 2],
                                  {"stride": 2, "ceil_mode": True}, [1, 1, 3, 3], "ones"))
    wide = reference_observations(program)
    np.testing.assert_array_equal(wide["v1"]["data"].ravel(), [4, 4, 4, 4])
    np.testing.assert_array_equal(formula_observations(program, wide)["v1"]["data"].ravel(),
                                  [4, 2, 2, 1])


def test_a_module_is_followed_through_its_calls_and_modes() -> None:
    """Two training calls then one in evaluation: the buffers and the mode carry over; a
    method the formulas do not know ends the module's formulas."""
    nodes: list[dict[str, Any]] = [
        {"id": "v0", "op": "module", "target": "torch.nn.BatchNorm1d", "args": [2],
         "kwargs": {"momentum": None}},
    ]
    for index in (1, 3, 6):
        nodes.append({"id": f"v{index}", "op": "input", "dtype": "float32", "shape": [3, 2],
                      "requires_grad": False,
                      "recipe": {"kind": "uniform", "seed": index, "low": -2, "high": 2}})
    nodes.insert(2, {"id": "v2", "op": "invoke", "target": "torch.nn.BatchNorm1d",
                     "args": [{"ref": "v0"}, {"ref": "v1"}], "kwargs": {}})
    nodes.insert(4, {"id": "v4", "op": "invoke", "target": "torch.nn.BatchNorm1d",
                     "args": [{"ref": "v0"}, {"ref": "v3"}], "kwargs": {}})
    nodes.insert(5, {"id": "v5", "op": "method", "target": "torch.nn.BatchNorm1d.eval",
                     "name": "eval", "args": [{"ref": "v0"}], "kwargs": {}})
    nodes.append({"id": "v7", "op": "invoke", "target": "torch.nn.BatchNorm1d",
                  "args": [{"ref": "v0"}, {"ref": "v6"}], "kwargs": {}})
    program = to_float64({"seed": 0, "nodes": nodes})
    wide = reference_observations(program)
    got = formula_observations(program, wide)
    for key in ("v2", "v4", "v7", "v4!state.running_var", "v4!state.num_batches_tracked"):
        assert compare(wide[key], got[key]) is None, key
    stepped = {**program, "nodes": [*program["nodes"][:-1],
                                    {"id": "v8", "op": "method", "name": "reset_running_stats",
                                     "target": "torch.nn.BatchNorm1d.reset_running_stats",
                                     "args": [{"ref": "v0"}], "kwargs": {}},
                                    program["nodes"][-1]]}
    assert "v7" not in formula_observations(stepped, reference_observations(stepped))


def test_calls_the_formulas_cannot_judge_are_left_out() -> None:
    # an op without a formula; a formula that abstains (a kept size scaled by 1.1)
    for program in (_program("torch.nn.functional.gelu", [], {}, [2, 3]),
                    _program("torch.nn.functional.interpolate", [],
                             {"scale_factor": 1.1, "mode": "linear"}, [1, 1, 5])):
        wide_program = to_float64(program)
        assert formula_observations(wide_program, reference_observations(wide_program)) == {}


def test_finite_differences_of_the_formula_are_independent_of_pytorchs_forward() -> None:
    program = to_float64(_program("torch.nn.functional.lp_pool2d", [1, 2],
                                  {"stride": 2, "ceil_mode": True}, [1, 1, 3, 3], "ones",
                                  backward=True))
    wide = reference_observations(program)
    np.testing.assert_allclose(formula_gradients(program, wide)["grad:v0"]["data"].ravel(),
                               np.ones(9), atol=1e-6)
    # PyTorch's own finite differences repeat its forward's mistake
    np.testing.assert_allclose(finite_differences(program)["grad:v0"]["data"].ravel(),
                               [1, 1, 2, 1, 1, 2, 2, 2, 4], atol=1e-6)
    smooth = to_float64(_program("torch.nn.functional.avg_pool2d", [2], {"ceil_mode": True},
                                 [1, 1, 3, 3], backward=True))
    np.testing.assert_allclose(formula_gradients(smooth, reference_observations(smooth))
                               ["grad:v0"]["data"], finite_differences(smooth)["grad:v0"]["data"],
                               atol=1e-6)


def _formula_names() -> list[tuple[str, str]]:
    names = {(f.module.__name__, f.name) for f in FUNCTIONS.values()}
    names |= {(m.formula.module.__name__, m.formula.name) for m in MODULES.values()}
    return sorted(names)


@pytest.mark.parametrize(("module", "name"), _formula_names())
def test_every_formula_stands_alone(module: str, name: str) -> None:
    """Its source, with its imports, defines it in a fresh interpreter without alignbot."""
    imports, source = standalone(module, name)
    code = "\n".join(["from __future__ import annotations", *imports, "", source,
                      f"assert callable({name})"])
    proc = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "checks" not in source and "alignbot" not in code
    assert summary(module, name)


def test_the_formulas_stop_at_a_change_in_place() -> None:
    """A view of the changed tensor would still show its old value to the formulas."""
    program = _program("torch.nn.functional.avg_pool1d", [2], {}, [1, 1, 4])
    view = {"id": "v2", "op": "method", "target": "torch.Tensor.__getitem__",
            "name": "__getitem__", "args": [{"ref": "v0"}, 0], "kwargs": {}}
    change = {"id": "v3", "op": "method", "target": "torch.Tensor.mul_", "name": "mul_",
              "args": [{"ref": "v0"}, 2.0], "kwargs": {}, "inplace": True}
    pooled = {"id": "v4", "op": "call", "target": "torch.nn.functional.avg_pool1d",
              "args": [{"ref": "v2"}, 2], "kwargs": {}}
    program["nodes"] += [view, change, pooled]
    wide_program = to_float64(program)
    got = formula_observations(wide_program, reference_observations(wide_program))
    assert set(got) == {"v1"}
