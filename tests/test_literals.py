"""The literal walker's reference helpers: which ids an encoded literal refers to."""

from __future__ import annotations

import pytest

from alignbot.checks.runtime.literals import is_ref, node_refs, ref_of, refs
from alignbot.checks.runtime.program_types import CallNode


def test_refs_are_found_however_deep_and_in_order() -> None:
    value = [{"ref": "v0"}, {"tuple": [1, {"ref": "v2.1"}]}, {"dict": {"k": {"ref": "v1"}}},
             {"slice": [None, 3, None]}, {"dtype": "float32"}, "ref", 2.0]
    assert refs(value) == ["v0", "v2.1", "v1"]
    assert refs({"float": "nan"}) == [] and refs(None) == []


def test_ref_of_names_only_a_reference() -> None:
    assert ref_of({"ref": "v3"}) == "v3" and is_ref({"ref": "v3"})
    assert not is_ref({"tuple": [{"ref": "v3"}]}) and not is_ref("v3")
    with pytest.raises(ValueError, match="expected a reference literal"):
        ref_of({"tuple": [{"ref": "v3"}]})


def test_a_nodes_refs_are_its_args_then_its_kwargs() -> None:
    node: CallNode = {"id": "v4", "op": "call", "target": "torch.add",
            "args": [{"ref": "v1"}], "kwargs": {"other": {"ref": "v0"}, "alpha": 2}}
    assert node_refs(node) == ["v1", "v0"]
    assert node_refs({"id": "v0", "op": "input", "dtype": "float32", "shape": [],
                      "recipe": {"kind": "pattern", "pattern": "zeros"},
                      "requires_grad": False}) == []


def test_a_complex_literal_decodes_and_renders_with_both_parts() -> None:
    import torch

    from alignbot.checks.codegen import literal
    from alignbot.checks.runtime.values import decode_literal

    value = {"complex": ["1.5", "-0.0"]}
    decoded = decode_literal(torch, value, {})
    assert decoded == complex(1.5, -0.0) and str(decoded.imag) == "-0.0"
    assert literal(value, {}) == "complex(1.5, -0.0)"
    assert eval(literal({"complex": ["nan", "2.0"]}, {})).imag == 2.0
    assert literal({"complex": ["0.5", "-2.0"]}, {}) == "(0.5-2.0j)" and refs(value) == []
