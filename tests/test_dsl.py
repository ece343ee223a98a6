"""Generators: memoised per draw, replayable from recorded choices, bounded as documented."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from alignbot.checks import (
    constant,
    literal_tensor,
    nothing,
    oneof,
    random,
    random_bool,
    random_dtype,
    random_tensor,
)
from alignbot.checks.dsl import NOTHING, DrawContext, DslError
from alignbot.checks.engine import check, draw_programs, trace_program
from alignbot.checks.findings import Kind
from alignbot.checks.spec import Spec


def _draw(gen: Any, choices: list[int | float]) -> Any:
    with DrawContext(choices=choices) as ctx:
        return gen.resolve(), ctx


def test_one_generator_yields_one_value_per_draw() -> None:
    c = random(1, 100)
    with DrawContext(choices=[42, 7]):
        assert c.resolve() == 42
        assert c.resolve() == 42
        assert int(c) == 42


def test_integer_high_bound_is_excluded_and_choices_are_clamped() -> None:
    assert _draw(random(1, 6), [99])[0] == 5
    assert _draw(random(1, 6), [-3])[0] == 1
    with pytest.raises(DslError, match="empty"):
        _draw(random(3, 3), [0])


def test_float_and_bool_and_oneof_and_constant() -> None:
    value, _ = _draw(random(0.5, 2.0), [1.25])
    assert value == 1.25
    assert _draw(random_bool(), [1])[0] is True
    assert _draw(oneof("a", "b", "c"), [2])[0] == "c"
    assert _draw(constant(3), [])[0] == 3
    assert _draw(nothing(), [])[0] is NOTHING
    assert _draw(random(1, 3) | nothing(), [1])[0] is NOTHING


def test_random_dtype_gives_reference_dtypes() -> None:
    import torch

    assert _draw(random_dtype("float32", "float64"), [1])[0] is torch.float64


def test_resolving_outside_a_draw_is_an_error() -> None:
    with pytest.raises(DslError, match="outside"):
        random(1, 3).resolve()


def test_random_tensor_validates_its_arguments() -> None:
    with pytest.raises(DslError, match="special"):
        random_tensor(specials=["bogus"])
    with pytest.raises(DslError, match="dim2"):
        random_tensor(ndim=2, dim2=3)


def _spec(fn: Any, n: int = 5) -> Spec:
    return Spec(name=f"dsl.{fn.__name__}", fn=fn, n=n)


def test_shared_generator_sizes_module_and_tensor_alike() -> None:
    def linear(torch: Any) -> Any:
        features = random(1, 6)
        layer = torch.nn.Linear(features, 3)
        return layer(random_tensor(ndim=2, dim1=features))

    programs: list[Any] = []
    draw_programs(_spec(linear), 10, 0, lambda p, r: programs.append(p))
    for program in programs:
        module = program["nodes"][0]
        tensor = program["nodes"][1]
        assert module["args"][0] == tensor["shape"][1]


def test_nothing_leaves_the_keyword_out() -> None:
    def softplus(torch: Any) -> Any:
        return torch.nn.functional.softplus(random_tensor(ndim=1), beta=nothing())

    programs: list[Any] = []
    draw_programs(_spec(softplus), 2, 0, lambda p, r: programs.append(p))
    assert all(p["nodes"][-1]["kwargs"] == {} for p in programs)


def test_tensor_values_come_from_a_recipe_not_elementwise_choices() -> None:
    def big(torch: Any) -> Any:
        return random_tensor(shape=[64, 64]).sum()

    programs: list[Any] = []
    draw_programs(_spec(big), 3, 0, lambda p, r: programs.append(p))
    for program in programs:
        assert len(program["choices"]) < 10
        assert program["nodes"][0]["recipe"]["kind"] == "uniform"


def test_same_seed_same_programs_other_seed_other_programs() -> None:
    def spec(torch: Any) -> Any:
        return torch.nn.functional.gelu(random_tensor(), approximate=oneof("none", "tanh"))

    def collect(seed: int) -> list[Any]:
        out: list[Any] = []
        draw_programs(_spec(spec, 8), 8, seed, lambda p, r: out.append(p))
        return out

    assert collect(4) == collect(4)
    assert collect(4) != collect(5)


def test_special_values_appear_when_allowed() -> None:
    def spec(torch: Any) -> Any:
        return random_tensor(ndim=1, specials=["nonfinite"]).exp()

    programs: list[Any] = []
    draw_programs(_spec(spec, 60), 60, 1, lambda p, r: programs.append(p))
    recipes = [p["nodes"][0]["recipe"] for p in programs]
    assert any(r.get("specials") == ["inf", "-inf", "nan"] for r in recipes)
    assert any("specials" not in r for r in recipes)


def test_program_redrawn_from_its_choices_is_identical() -> None:
    def spec(torch: Any) -> Any:
        x = random_tensor(ndim=3)
        return x.sum(dim=random(0, 3), keepdim=random_bool())

    programs: list[Any] = []
    draw_programs(_spec(spec), 5, 9, lambda p, r: programs.append(p))
    for program in programs:
        again, _ = trace_program(_spec(spec), DrawContext(choices=program["choices"]))
        assert again == program


def test_literal_tensor_carries_its_values_and_draws_nothing() -> None:
    def fn(torch: Any) -> Any:
        x = literal_tensor([[1.5, -2.0], [0.0, 3.25]], "float64", requires_grad=True)
        i = literal_tensor([True, False])
        return torch.where(i, x[0], x[1]) * literal_tensor(np.float64(2.0))

    program, ref = trace_program(Spec(name="lit", fn=fn), DrawContext(choices=[5]))
    assert program["choices"] == [5]  # the program seed alone: the literals drew nothing
    first, second, scalar = [node for node in program["nodes"] if node["op"] == "input"]
    assert first["recipe"]["kind"] == "literal"
    assert (first["dtype"], first["shape"], first["requires_grad"]) == ("float64", [2, 2], True)
    assert (second["dtype"], second["requires_grad"]) == ("bool", False)
    assert scalar["shape"] == []  # a 0-d array stays 0-d
    assert ref["v0"]["data"].tolist() == [[1.5, -2.0], [0.0, 3.25]]
    assert program["backward"] is not None


def test_the_docs_document_every_argument_of_the_spec_api() -> None:
    import inspect
    import re
    from pathlib import Path

    from alignbot import checks


    page = (Path(__file__).parent.parent / "docs" / "specs.md").read_text()
    section = page.split("## The spec API, argument by argument", 1)[1].split("\n## ", 1)[0]
    missing = []
    for name in ("autotest", "random_tensor", "literal_tensor", "random", "random_bool",
                 "oneof", "nothing", "random_dtype", "constant"):
        if not re.search(rf"`@?{name}\(", section):
            missing.append(f"{name}()")
        for param in inspect.signature(getattr(checks, name)).parameters.values():
            if param.kind is param.VAR_POSITIONAL:
                continue
            if not re.search(rf"`{param.name}`|\b{param.name}=|\({param.name}[,)]", section):
                missing.append(f"{name}({param.name})")
    assert missing == []


def _edges(torch: Any) -> Any:
    x = random_tensor(ndim=2, low=-2, high=2, empty=True, specials=["huge"],
                      layout=["transposed", "strided", "broadcast"])
    return torch.sin(x)


def test_edge_options_draw_empty_tensors_huge_values_and_real_views() -> None:
    programs: list[Any] = []
    draw_programs(_spec(_edges, 12), 12, 0, lambda p, r: programs.append(p))
    inputs = [node for p in programs for node in p["nodes"] if node["op"] == "input"]
    views = {node["target"] for p in programs for node in p["nodes"] if node["op"] == "method"}
    assert any(0 in node["shape"] for node in inputs)
    assert any("1e30" in node["recipe"].get("specials", []) for node in inputs)
    assert {f"torch.Tensor.{m}" for m in ("transpose", "__getitem__", "expand")} <= views
    for program in programs:  # a view node is what the spec's op receives
        call = program["nodes"][-1]
        assert call["target"] == "torch.sin"


@pytest.mark.slow
def test_a_bug_only_on_strided_inputs_is_found_through_the_layout_option(
        make_candidate: Any) -> None:
    prelude = ("import torch\n_sin = torch.sin\n"
               "torch.sin = lambda x: _sin(x) if x.is_contiguous() else _sin(x) * 2\n")
    found = check([_spec(_edges, 12)], make_candidate(prelude), seed=0).findings
    assert {(f.kind, f.op) for f in found} >= {(Kind.VALUE, "torch.sin")}
    assert check([_spec(_edges, 12)], make_candidate("import torch\n"), seed=0).findings == []


def test_unknown_edge_options_are_errors() -> None:
    with pytest.raises(DslError, match="unknown layout 'diagonal'"):
        random_tensor(layout=["diagonal"])


def test_every_carried_dtype_is_drawable_and_unknown_names_are_refused() -> None:
    import torch

    from alignbot.checks.runtime.dtypes import DTYPES

    for number, name in enumerate(DTYPES):
        assert _draw(random_dtype(*DTYPES), [number])[0] is getattr(torch, name)
    with pytest.raises(DslError, match="unknown dtype 'float17'"):
        random_dtype("float32", "float17")
    with pytest.raises(DslError, match="unknown dtype"):
        random_tensor(dtype="float4")  # no such dtype


def test_float16_ranges_stay_finite_and_complex_inputs_take_gradients() -> None:
    def wide_half(torch: Any) -> Any:
        return random_tensor(ndim=1, dim0=64, low=-1e6, high=1e6, dtype="float16") * 1

    def complex_input(torch: Any) -> Any:
        return random_tensor(ndim=1, dim0=8, low=-1, high=1, dtype="complex64").abs()

    program, ref = trace_program(_spec(wide_half), DrawContext(choices=[]))
    node = program["nodes"][0]
    assert node["recipe"]["high"] == 65504.0 and np.isfinite(ref[node["id"]]["data"]).all()
    program, ref = trace_program(_spec(complex_input), DrawContext(choices=[]))
    data = ref[program["nodes"][0]["id"]]["data"]
    assert data.dtype == np.complex64 and (data.imag != 0).any()
    assert program["nodes"][0]["requires_grad"] and "grad:v0" in ref
