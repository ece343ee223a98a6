"""checks/signatures.py: what a finding is keyed by."""

from __future__ import annotations

from alignbot.checks.signatures import describe_key, is_forward, mask, node_of


def test_masking_keeps_the_words_and_drops_the_values() -> None:
    assert mask("Expected weight to be of shape [5, 3] but got [4]") == \
        "Expected weight to be of shape [#] but got [#]"
    assert mask("size of tensor a (3) must match the size of tensor b (-12) at dimension 1") \
        == "size of tensor a (#) must match the size of tensor b (#) at dimension #"
    assert mask("eps 0.0015 > 1e-3 in 'ln.weight'") == "eps # > # in '#'"
    assert mask("expected one of [torch.float32, Half], got Long") == \
        "expected one of [#], got Long"  # a dtype outside a list is part of the bug
    assert mask("conv1d: float32 at 0x7f3a2b") == "conv1d: float32 at #"
    assert mask("torch.Size([])  and\n torch.Size([2, 2])") == "torch.Size([#]) and torch.Size([#])"


def test_an_observation_key_names_its_node() -> None:
    assert [node_of(k) for k in ("v3", "v3.1", "v3!self", "grad:v3:weight", "final:v12")] \
        == ["v3", "v3", "v3", "v3", "v12"]
    assert [is_forward(k) for k in ("v3.1", "v3!state.running_mean", "grad:v3", "final:v3",
                                    "backward")] == [True, True, False, False, False]
    assert describe_key("grad:v0") == "gradient w.r.t. v0"
    assert describe_key("v2!state.running_var") == "module buffer running_var after v2"
