"""Generated statements compute what the replayed Program computes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from alignbot.checks.codegen import literal, nested, statements, tensor_expr
from alignbot.checks.engine import draw_programs
from alignbot.checks.oracle import reference_observations


def test_numbers_are_short_and_exact() -> None:
    arr = np.array([0.1, -0.0, np.nan, np.inf, 3.0], dtype=np.float32)
    text = nested(arr, "float32")
    assert text == '[0.1, -0.0, float("nan"), float("inf"), 3.0]'
    back = torch.tensor(eval(text, {}), dtype=torch.float32)  # valid Python on its own
    assert torch.equal(back[[0, 1, 3, 4]], torch.from_numpy(arr[[0, 1, 3, 4]]))
    assert torch.isnan(back[2])
    assert nested(np.array([-np.inf], dtype=np.float32), "float32") == '[-float("inf")]'
    assert nested(np.array([[1, 2]]), "int64") == "[[1, 2]]"
    assert nested(np.array([True, False]), "bool") == "[True, False]"


def test_patterns_and_generation_code() -> None:
    assert tensor_expr({"kind": "pattern", "pattern": "zeros"}, "float32", [2, 3], True) \
        == "torch.zeros(2, 3).requires_grad_()"
    assert tensor_expr({"kind": "pattern", "pattern": "arange"}, "float64", [4], False) \
        == "torch.arange(4, dtype=torch.float64).reshape(4)"
    big = tensor_expr({"kind": "uniform", "low": -1.0, "high": 1.0, "seed": 3}, "float32",
                      [10, 10], False)
    assert big.startswith("torch.tensor(np.random.default_rng(3).uniform(")
    with_dtype_var = tensor_expr({"kind": "pattern", "pattern": "ones"}, "float32", [2], False,
                                 float_dtype="dtype")
    assert with_dtype_var == "torch.ones(2, dtype=dtype)"


def test_index_literals() -> None:
    names = {"v0": "v0"}
    index = {"tuple": [{"slice": [1, None, 2]}, {"ellipsis": True}, None, {"ref": "v0"}]}
    assert literal(index, names, in_index=True) == "1::2, ..., None, v0"
    assert literal({"dtype": "float32"}, names, float_dtype="dtype") == "dtype"
    assert literal({"float": "nan"}, names) == "float('nan')"


@pytest.mark.parametrize("name", ["matmul_clean", "batchnorm_clean", "conv2d_clean",
                                  "add_inplace", "mean_keepdim"])
def test_generated_code_matches_the_replayed_program(name: str,
                                                     planted_specs: dict[str, Any]) -> None:
    programs: list[Any] = []
    draw_programs(planted_specs[name], 3, 4, lambda p, r: programs.append(p))
    for program in programs:
        ref = reference_observations(program)
        namespace: dict[str, Any] = {"torch": torch, "np": np}
        exec("\n".join(statements(program)), namespace)
        mutated = {n["args"][0]["ref"] for n in program["nodes"] if n.get("inplace")}
        for node in program["nodes"]:
            obs = ref.get(node["id"])
            if node["id"] in mutated:  # compare where it ended up, not its first value
                obs = ref.get(f"final:{node['id']}") or ref.get(
                    next(f"{n['id']}!self" for n in reversed(program["nodes"])
                         if n.get("inplace") and n["args"][0]["ref"] == node["id"]))
            if node["op"] == "module" or obs is None or obs["t"] != "tensor":
                continue
            value = namespace[node["id"]].detach().numpy()
            assert value.shape == tuple(obs["shape"])
            np.testing.assert_allclose(value, obs["data"], rtol=1e-6, atol=1e-6)


def test_complex_and_low_precision_tensors_are_written_as_the_runtime_makes_them() -> None:
    from alignbot.checks.runtime.values import make_array

    recipe = {"kind": "uniform", "low": -2.0, "high": 2.0, "seed": 5}
    for dtype, shape in (("complex64", [2, 3]), ("complex128", [3]), ("float16", [4]),
                         ("bfloat16", [2, 2]), ("bfloat16", [9, 9]), ("uint8", [3]),
                         ("float8_e4m3fn", [2, 3]), ("float8_e5m2", [9, 9]),
                         ("float8_e4m3fnuz", [5]), ("float8_e5m2fnuz", [9, 9])):
        expr = tensor_expr(recipe, dtype, shape, False)
        made = eval(expr, {"torch": torch, "np": np})
        assert made.dtype == getattr(torch, dtype), expr
        expected = torch.from_numpy(make_array(recipe, dtype, shape)).to(made.dtype)
        assert torch.equal(made.view(torch.uint8) if made.element_size() == 1 else made,
                           expected.view(torch.uint8) if made.element_size() == 1 else expected
                           ), expr
    assert "j)" in tensor_expr(recipe, "complex64", [2], False)


def test_an_empty_literal_keeps_every_size() -> None:
    recipe = {"kind": "literal", "array": {"dtype": "<u4", "shape": [0, 3], "b64": ""}}
    expr = tensor_expr(recipe, "uint32", [0, 3], False)
    made = eval(expr, {"torch": torch})
    assert made.shape == (0, 3) and made.dtype == torch.uint32, expr


def test_the_float64_variant_widens_complex_to_complex128() -> None:
    recipe = {"kind": "uniform", "low": -1.0, "high": 1.0, "seed": 2}
    expr = tensor_expr(recipe, "complex64", [2], False, float_dtype="dtype")
    assert "dtype=dtype.to_complex()" in expr
    for dtype, made in ((torch.float64, torch.complex128), (torch.float32, torch.complex64)):
        assert eval(expr, {"torch": torch, "dtype": dtype}).dtype == made
    assert literal({"dtype": "complex128"}, {}, float_dtype="dtype") == "dtype.to_complex()"


def test_complex32_and_unsigned_tensors_are_written_as_the_runtime_makes_them() -> None:
    from alignbot.checks.runtime.values import make_array

    recipe = {"kind": "uniform", "low": -2.0, "high": 300.0, "seed": 5}
    for dtype, shape in (("complex32", [2, 3]), ("uint16", [3]), ("uint32", [2, 2]),
                         ("uint64", [4]), ("float8_e5m2", [3])):
        expr = tensor_expr(recipe, dtype, shape, False)
        made = eval(expr, {"torch": torch, "np": np})
        assert made.dtype == getattr(torch, dtype), expr
        expected = torch.from_numpy(make_array(recipe, dtype, shape)).to(made.dtype)
        assert torch.equal(made.view(torch.int32) if dtype == "complex32" else made,
                           expected.view(torch.int32) if dtype == "complex32" else expected)
        arange = tensor_expr({"kind": "pattern", "pattern": "arange"}, dtype, shape, False)
        assert eval(arange, {"torch": torch}).dtype == getattr(torch, dtype), arange


@pytest.mark.slow
@pytest.mark.parametrize(("name", "dtype"), [("opinfo.mul", "complex32"),
                                             ("opinfo.full_like", "uint32")])
def test_a_repro_of_a_complex32_or_uint32_program_computes_what_the_replay_does(
        name: str, dtype: str) -> None:
    from alignbot.checks.opinfo.specs import catalog

    (spec,) = [s for s in catalog().specs if s.name == name]
    programs: list[Any] = []
    draw_programs(spec, spec.n, 0, lambda p, r: programs.append(p))
    chosen = [p for p in programs
              if any(n["op"] == "input" and n["dtype"] == dtype for n in p["nodes"])]
    assert chosen
    for program in chosen:
        ref = reference_observations(program)
        namespace: dict[str, Any] = {"torch": torch, "np": np}
        exec("\n".join(statements(program)), namespace)
        call = program["nodes"][-1]
        obs = ref[call["id"]]
        if obs["t"] != "tensor":
            continue
        value = namespace[call["id"]].detach()
        assert str(value.dtype) == f"torch.{obs['dtype']}"
        wide = value.to(torch.complex64) if dtype == "complex32" else value
        np.testing.assert_array_equal(wide.numpy(), obs["data"])
