"""The formulas as a triage oracle: each call of a program that has a formula, recomputed in
NumPy float64 from the values the reference's float64 run observed.

Each call is judged alone: its inputs are the reference's float64 values (not the formulas'
results upstream), so a formula's observation says whether *this* call follows its
documented formula. Module state is followed through the program: a module's buffers
before a call are the reference's buffers after its previous call; ``eval()``/``train()``
set its mode; anything else done to a module (an optimizer's step) ends its formulas.
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..program import Node, Observations, Program, call_args, call_kwargs, is_call
from ..runtime.literals import LiteralVisitor, is_ref, ref_of, walk_literal
from ..runtime.values import decode_array
from .normalization import Updated
from .registry import AFFINE, MODULES, Formula, ModuleFormula, lookup

HARMLESS_METHODS = {"double", "float", "to", "parameters", "named_parameters", "buffers",
                    "named_buffers", "state_dict", "children", "modules", "extra_repr",
                    "requires_grad_", "zero_grad"}
KEEP_VALUES = {"requires_grad_", "retain_grad", "share_memory_"}  # in place, values kept


class Unknown(ValueError):
    """A value the formulas cannot stand on (not observed, opaque, a module)."""


@dataclass
class ModuleState:
    target: str
    args: list[Any]
    kwargs: dict[str, Any]
    state: dict[str, np.ndarray]
    training: bool = True
    stale: bool = False


@dataclass
class Walk:
    """The values the formulas see, by id, and the modules of the program."""
    wide: Observations
    values: dict[str, Any] = field(default_factory=dict)
    modules: dict[str, ModuleState] = field(default_factory=dict)


class _Decoder(LiteralVisitor[Any]):
    def __init__(self, walk: Walk) -> None:
        self.walk = walk

    def visit_scalar(self, value: Any) -> Any:
        return value

    def visit_list(self, items: list[Any]) -> Any:
        return items

    def visit_ref(self, name: str) -> Any:
        if name not in self.walk.values:
            raise Unknown(name)
        return self.walk.values[name]

    def visit_tuple(self, items: list[Any]) -> Any:
        return tuple(items)

    def visit_float(self, text: str) -> Any:
        return float(text)

    def visit_complex(self, real: float, imag: float) -> Any:
        raise Unknown("complex")

    def visit_slice(self, parts: list[Any]) -> Any:
        return slice(*parts)

    def visit_ellipsis(self) -> Any:
        return Ellipsis

    def visit_dtype(self, name: str) -> Any:
        raise Unknown("dtype")

    def visit_size(self, dims: list[int]) -> Any:
        return tuple(int(d) for d in dims)

    def visit_device(self, name: str) -> Any:
        raise Unknown("device")

    def visit_attr(self, path: str) -> Any:
        raise Unknown("attribute")

    def visit_dict(self, items: dict[str, Any]) -> Any:
        return items


def _value(obs: dict[str, Any]) -> Any:
    if obs.get("t") == "tensor":
        data = np.asarray(obs["data"])
        if data.dtype.kind == "c":
            raise Unknown("complex")
        return data.astype(np.float64) if data.dtype.kind == "f" else data
    if obs.get("t") == "value":
        return obs["value"]
    raise Unknown(str(obs.get("t")))


def _observe(key: str, value: Any, out: Observations) -> None:
    if isinstance(value, tuple):
        for index, item in enumerate(value):
            _observe(f"{key}.{index}", item, out)
        return
    arr = np.asarray(value)
    dtype = "int64" if arr.dtype.kind in "iu" else "bool" if arr.dtype == bool else "float64"
    arr = arr.astype({"int64": np.int64, "bool": bool, "float64": np.float64}[dtype])
    out[key] = {"t": "tensor", "dtype": dtype, "shape": list(arr.shape), "data": arr}


def module_class(target: str) -> Any:
    """``torch.nn.BatchNorm1d`` by its name."""
    import torch

    cls: Any = torch
    for part in target.split(".")[1:]:
        cls = getattr(cls, part)
    return cls


def constructor(target: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A module's constructor arguments by name, defaults included (the class's own
    signature)."""
    bound = inspect.signature(module_class(target)).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def module_call(spec: ModuleFormula, module: ModuleState, args: list[Any],
                kwargs: dict[str, Any]) -> Any:
    """A module's formula on one call: the constructor's arguments the formula takes, the
    fixed ones, and the module's parameters and buffers."""
    built = constructor(module.target, module.args, module.kwargs)
    accepts = inspect.signature(spec.formula.fn).parameters
    options = {name: value for name, value in built.items() if name in accepts}
    options.update(spec.fixed)
    for name in AFFINE.get(module.target, ()):
        options[name] = module.state.get(name)
    if spec.stateful:
        return spec.formula.fn(*args, module.state, module.training, **options, **kwargs)
    return spec.formula.fn(*args, **options, **kwargs)


def _bind(walk: Walk, node: Node, skip: int = 0) -> tuple[list[Any], dict[str, Any]]:
    """A call's arguments as the formulas take them (``skip``: the module of an invoke)."""
    decoder = _Decoder(walk)
    args = [walk_literal(a, decoder) for a in call_args(node)[skip:]]
    kwargs = {k: walk_literal(v, decoder) for k, v in call_kwargs(node).items()}
    return args, kwargs


def _bind_observed(walk: Walk, node_id: str) -> None:
    """The reference's float64 values of a node (and of its tuple elements) for later calls."""
    for key, obs in walk.wide.items():
        if key == node_id or (key.startswith(node_id + ".") and "!" not in key):
            with contextlib.suppress(Unknown):
                walk.values[key] = _value(obs)


def _module_node(walk: Walk, node: Node) -> None:
    assert is_call(node)
    try:
        args, kwargs = _bind(walk, node)
    except Unknown:
        return
    state = {name: decode_array(data) for name, data in node.get("state", {}).items()}
    state = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in state.items()}
    walk.modules[node["id"]] = ModuleState(node["target"], args, kwargs, state)


def _method_on_module(walk: Walk, node: Node) -> bool:
    """A method called on a module (its mode, a cast): True when handled here."""
    assert is_call(node)
    first = node["args"][0] if node["args"] else None
    if not is_ref(first) or ref_of(first) not in walk.modules:
        return False
    module = walk.modules[ref_of(first)]
    name = node.get("name", "")
    if name == "eval":
        module.training = False
    elif name == "train":
        module.training = bool(node["args"][1]) if len(node["args"]) > 1 else True
    elif name not in HARMLESS_METHODS:
        module.stale = True
    return True


def _invoke(walk: Walk, node: Node, out: Observations) -> None:
    assert is_call(node)
    module = walk.modules.get(ref_of(node["args"][0]))
    spec = MODULES.get(node["target"])
    if module is None or spec is None or module.stale:
        return
    try:
        args, kwargs = _bind(walk, node, skip=1)
        with np.errstate(all="ignore"):
            result = module_call(spec, module, args, kwargs)
    except Exception:  # a call the formula cannot take, or abstains on: no observation
        return
    finally:
        for key, obs in walk.wide.items():  # the reference's buffers for the next call
            prefix = node["id"] + "!state."
            if key.startswith(prefix):
                with contextlib.suppress(Unknown):
                    module.state[key[len(prefix):]] = _value(obs)
    if isinstance(result, Updated):
        for name, value in result.writes.items():
            _observe(f"{node['id']}!state.{name}", value, out)
        result = result.value
    _observe(node["id"], result, out)


def _call(walk: Walk, node: Node, formula: Formula, out: Observations) -> None:
    try:
        args, kwargs = _bind(walk, node)
        bound = inspect.signature(formula.fn).bind(*args, **kwargs)
        with np.errstate(all="ignore"):
            result = formula.fn(*bound.args, **bound.kwargs)
    except Exception:  # a call the formula cannot take, or abstains on: no observation
        return
    if isinstance(result, Updated):
        for name, value in result.writes.items():  # running statistics written in place
            given = bound.arguments.get(name)
            arg = _argument_literal(node, formula, name)
            if given is not None and is_ref(arg):
                walk.values[ref_of(arg)] = value
        result = result.value
    _observe(node["id"], result, out)


def _argument_literal(node: Node, formula: Formula, name: str) -> Any:
    """The encoded literal a call passed for the formula's parameter ``name``."""
    names = list(inspect.signature(formula.fn).parameters)
    kwargs, args = call_kwargs(node), call_args(node)
    if name in kwargs:
        return kwargs[name]
    position = names.index(name)
    return args[position] if position < len(args) else None


def formula_observations(program: Program, wide: Observations) -> Observations:
    """Every call of the program (``program`` as drawn or as computed in float64: the same
    nodes, module casts aside) whose op has a formula, given the reference's float64
    observations ``wide``; calls the formulas cannot judge are left out."""
    walk = Walk(wide)
    out: Observations = {}
    for node in program["nodes"]:
        op = node["op"]
        if node.get("inplace") and node.get("name") not in KEEP_VALUES:
            # a tensor changed in place may be a view of what later calls read, which the
            # observations taken before the change do not show: the formulas stop here
            break
        if op == "module":
            _module_node(walk, node)
            continue
        if op == "method" and _method_on_module(walk, node):
            continue
        if op == "method" and node.get("name") == "step":
            for module in walk.modules.values():
                module.stale = True
        if op == "invoke":
            _invoke(walk, node, out)
        elif op in ("call", "method"):
            formula = lookup(node["target"])  # type: ignore[typeddict-item]
            if formula is not None:
                _call(walk, node, formula, out)
        _bind_observed(walk, node["id"])
    return out
