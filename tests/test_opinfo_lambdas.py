"""OpInfo's test wrappers read back (checks/opinfo/lambdas.py): which API a lambda calls and
how it passes the sample on; lambdas that compute an argument are refused with a reason."""

from __future__ import annotations

import torch

from alignbot.checks.opinfo.lambdas import WrappedCall, unwrap


def wrapper_set_seed(op, *args, **kwargs):  # the name OpInfo uses for ops that draw numbers
    return op(*args, **kwargs)


def test_swapped_parameters_are_passed_in_the_apis_order() -> None:
    found = unwrap(lambda x, n, **kwargs: torch.special.polygamma(n, x, **kwargs))
    assert isinstance(found, WrappedCall) and found.target == "torch.special.polygamma"
    assert not found.method and not found.random
    assert found.arrange(["x", 2], {"out": None}) == ([2, "x"], {"out": None})
    assert found.arrange(["x", 2, 3], {}) is None  # the lambda takes no *args


def test_attributes_methods_and_seeded_calls() -> None:
    found = unwrap(lambda x: x.mT)
    assert isinstance(found, WrappedCall) and (found.target, found.method, found.attribute) == (
        "torch.Tensor.mT", True, True)
    found = unwrap(lambda inp, *args, **kwargs: wrapper_set_seed(
        torch.Tensor.cauchy_, inp, *args, **kwargs))
    assert isinstance(found, WrappedCall) and found.random and found.method
    assert found.target == "torch.Tensor.cauchy_"
    assert found.arrange(["t", 1.0], {"sigma": 2}) == (["t", 1.0], {"sigma": 2})
    found = unwrap(lambda weight, idx, **kwargs: torch.nn.functional.embedding(
        idx, weight, **kwargs))
    assert isinstance(found, WrappedCall) and found.positions == (1, 0)


def test_wrappers_that_are_not_the_api_on_the_sample_are_refused() -> None:
    assert unwrap(lambda a, b: torch.linalg.pinv(a @ b.mT)) == "that computes an argument"
    assert unwrap(lambda x, shape: x.clone().resize_(shape)) == "whose call is not a torch API"
    assert unwrap(lambda x, y: torch.add(x, x)) == "that drops or repeats a parameter"
    assert unwrap(lambda a, b, driver: torch.linalg.lstsq(a, b, driver=driver)[:2]) \
        == "whose body is not one call"
    assert unwrap(len) == "whose source cannot be read"
