"""The ``torch`` proxy a spec runs against: each call runs on the reference at once and is
recorded as a Program node together with everything it lets us observe."""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from typing import Any

from .dsl import NOTHING, DrawContext, resolve
from .program import (
    BackwardPlan,
    CallNode,
    CallOp,
    InputNode,
    Node,
    Recipe,
    call_args,
    call_kwargs,
)
from .runtime.literals import is_ref, ref_of
from .runtime.replay import (
    BackwardTracker,
    Hooks,
    argument_snapshots,
    backward_error,
    bind_result,
    materialized,
    module_tensors,
    observe_finals,
    observe_result,
    run_backward,
    run_node,
    written_arguments,
)
from .runtime.values import encode_array, is_tensor, observe_error, to_numpy

# Tensor attributes read as plain Python values (control flow), not recorded as calls.
PLAIN_ATTRS = frozenset({"shape", "dtype", "ndim", "device", "requires_grad", "is_leaf",
                         "layout", "is_cuda", "is_sparse", "is_quantized", "is_meta"})
INPLACE_DUNDERS = frozenset({"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__",
                             "__ifloordiv__", "__imod__", "__ipow__", "__iand__", "__ior__",
                             "__ixor__", "__ilshift__", "__irshift__", "__imatmul__"})


class SpecError(Exception):
    """The spec itself misbehaved on the reference (not a torch call raising)."""


def is_inplace(op: str, name: str, kwargs: dict[str, Any]) -> bool:
    """Methods like ``add_`` and ``__iadd__``, functions like ``torch.relu_`` and calls with
    ``inplace=True`` mutate their first tensor argument."""
    if op == "method" and name in INPLACE_DUNDERS:
        return True
    if op in ("method", "call") and name.endswith("_") and not name.startswith("__"):
        return True
    return op == "call" and kwargs.get("inplace") is True


class Tracer:
    """Holds one draw: the Program's nodes, the reference's values and its observations."""

    def __init__(self, torch: Any, ctx: DrawContext) -> None:
        self.torch = torch
        self.ctx = ctx
        self.nodes: list[Node] = []
        self.values: dict[str, Any] = {}
        self.observations: dict[str, dict[str, Any]] = {}
        self.raised: BaseException | None = None
        self.hooks = Hooks()
        self.tracker = BackwardTracker(torch)
        ctx.tracer = self

    def _new_id(self) -> str:
        return f"v{len(self.nodes)}"

    def input(self, shape: list[int], dtype: str, recipe: Recipe,
              requires_grad: bool) -> TensorProxy:
        node: InputNode = {"id": self._new_id(), "op": "input", "dtype": dtype,
                           "shape": list(shape), "recipe": recipe,
                           "requires_grad": requires_grad}
        self.nodes.append(node)
        tensor = run_node(self.torch, node, self.values, self.hooks)
        bind_result(self.torch, node["id"], tensor, self.values)
        self.observations.update(observe_result(self.torch, node, tensor, self.values))
        return TensorProxy(self, node["id"])

    def record(self, op: CallOp, target: str, args: tuple[Any, ...], kwargs: dict[str, Any],
               name: str | None = None, module_path: str | None = None) -> Any:
        enc_args = [self.encode(a) for a in args]
        enc_kwargs = {k: self.encode(v) for k, v in kwargs.items() if resolve(v) is not NOTHING}
        node: CallNode = {"id": self._new_id(), "op": op, "target": target,
                          "args": enc_args, "kwargs": enc_kwargs}
        if name is not None:
            node["name"] = name
        last = name or target.rsplit(".", 1)[-1]
        if is_inplace(op, last, enc_kwargs) or self._inplace_module(op, enc_args):
            node["inplace"] = True
        if op == "invoke" and _lazy(self.values[ref_of(enc_args[0])]):
            node["state"] = {}  # filled in below: what its first call made
        self.nodes.append(node)
        before = argument_snapshots(self.torch, node, self.values)
        try:
            result = run_node(self.torch, node, self.values, self.hooks)
        except Exception as exc:
            node["raises"] = True
            self.observations[node["id"]] = observe_error(exc)
            self.raised = exc
            raise
        writes = written_arguments(self.torch, node, self.values, before)
        if writes:  # both sides observe these after the call: a write left out shows there
            node["writes"] = writes
        if op == "module" or "state" in node:
            module = result if op == "module" else self.values[ref_of(enc_args[0])]
            node["state"] = {k: encode_array(to_numpy(self.torch, t)[1])
                             for k, t in module_tensors(module).items()}
        bind_result(self.torch, node["id"], result, self.values)
        self.observations.update(observe_result(self.torch, node, result, self.values))
        self.tracker.watch(node, result)
        return self.wrap(node["id"], result, module_path or target)

    def _inplace_module(self, op: CallOp, args: list[Any]) -> bool:
        """A module built with ``inplace=True`` (``nn.ReLU(inplace=True)``) mutates its input."""
        if op != "invoke":
            return False
        return call_kwargs(self.built(ref_of(args[0]))).get("inplace") is True

    def built(self, module_id: str) -> Node:
        """The node that built a module, through the calls that returned it again
        (``m.eval()``, ``m.to(torch.float64)``)."""
        by_id = {n["id"]: n for n in self.nodes}
        node = by_id[module_id]
        while node["op"] == "method" and call_args(node) and is_ref(call_args(node)[0]):
            node = by_id[ref_of(call_args(node)[0])]
        return node

    def wrap(self, value_id: str, result: Any, module_path: str) -> Any:
        if is_tensor(self.torch, result):
            return TensorProxy(self, value_id)
        if isinstance(result, (self.torch.nn.Module, self.torch.optim.Optimizer)):
            return ModuleProxy(self, value_id, module_path)
        if isinstance(result, (tuple, list)) and any(
                is_tensor(self.torch, r) for r in _flatten(list(result))):
            items = [self.wrap(f"{value_id}.{i}", r, module_path) for i, r in enumerate(result)]
            fields = getattr(result, "_fields", None) or getattr(type(result), "__match_args__",
                                                                 None)
            if fields:  # namedtuples and torch.return_types structseqs keep their names
                return _named_tuple(type(result).__name__, tuple(fields))(*items)
            return type(result)(items) if isinstance(result, list) else tuple(items)
        return result

    def encode(self, value: Any) -> Any:
        value = resolve(value)
        if isinstance(value, (TensorProxy, ModuleProxy)):
            return {"ref": value._id}
        if isinstance(value, (FunctionProxy, ModuleClassProxy)):  # activation=F.gelu
            return {"attr": value._path}
        if value is NOTHING:
            raise SpecError("nothing() can only be passed as a keyword argument")
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"float": repr(value)}
        if isinstance(value, complex):
            return {"complex": [repr(value.real), repr(value.imag)]}
        if isinstance(value, self.torch.Size):
            return {"size": [int(v) for v in value]}
        if isinstance(value, tuple):
            return {"tuple": [self.encode(v) for v in value]}
        if isinstance(value, list):
            return [self.encode(v) for v in value]
        if isinstance(value, slice):
            return {"slice": [self.encode(v) for v in (value.start, value.stop, value.step)]}
        if value is Ellipsis:
            return {"ellipsis": True}
        if isinstance(value, self.torch.dtype):
            return {"dtype": str(value).rsplit(".", 1)[-1]}
        if isinstance(value, self.torch.device):
            return {"device": str(value)}
        if isinstance(value, (self.torch.memory_format, self.torch.layout)):
            return {"attr": str(value)}
        if isinstance(value, dict):
            return {"dict": {str(k): self.encode(v) for k, v in value.items()}}
        if is_tensor(self.torch, value):
            raise SpecError("a real tensor reached a call: make tensors with random_tensor() or "
                            "through the torch the spec receives")
        raise SpecError(f"unsupported argument of type {type(value).__name__}: {value!r:.80}")

    def finish(self, outputs: Any, backward: bool, seed: int) -> BackwardPlan | None:
        """Observe the end state and run the reference's backward; returns the backward plan."""
        self.observations.update(observe_finals(self.torch, {"nodes": self.nodes}, self.values))
        if not backward or self.raised is not None:
            return None
        out_ids = [p._id for p in _flatten(outputs) if isinstance(p, TensorProxy)
                   and self._differentiable(self.values[p._id])]
        if not out_ids:
            return None
        leaves, intermediates = self._grad_targets()
        if not leaves and not intermediates:
            return None
        plan: BackwardPlan = {"outputs": out_ids,
                "seeds": [{"kind": "uniform", "low": -1.0, "high": 1.0, "seed": seed + 1 + i}
                          for i in range(len(out_ids))],
                "wrt": leaves or intermediates, "intermediates": intermediates if leaves else []}
        try:
            self.observations.update(run_backward(
                self.torch, {"nodes": self.nodes, "backward": plan}, self.values,
                tracker=self.tracker))
        except Exception as exc:
            self.observations["backward"] = backward_error(exc, self.tracker)
        self.observations.update(self.tracker.observations())
        return plan

    def _differentiable(self, value: Any) -> bool:
        return (is_tensor(self.torch, value) and value.requires_grad
                and (value.is_floating_point() or value.is_complex()))

    def _grad_targets(self) -> tuple[list[str], list[str]]:
        """Leaves (inputs, module parameters) and intermediates to take gradients of; each
        tensor once, whatever number of ids it has (``y.add_()`` returns ``y``)."""
        leaves: list[str] = []
        intermediates: list[str] = []
        seen: set[int] = set()

        def take(key: str, value: Any, into: list[str]) -> None:
            if self._differentiable(value) and id(value) not in seen:
                seen.add(id(value))
                into.append(key)

        for node in self.nodes:
            if node.get("raises"):
                continue
            if node["op"] == "module":
                for name, param in self.values[node["id"]].named_parameters():
                    take(f"{node['id']}:{name}", param, leaves)
                continue
            into = leaves if node["op"] == "input" else intermediates
            ids = [node["id"]] + [k for k in self.values if k.startswith(node["id"] + ".")]
            for key in ids:
                take(key, self.values.get(key), into)
        return leaves, intermediates


def _lazy(module: Any) -> bool:
    """A lazy module (``nn.LazyConv2d``) whose parameters its first call will make."""
    return any(not materialized(t) for t in [*module.parameters(), *module.buffers()])


def _flatten(value: Any) -> list[Any]:
    value = resolve(value)  # a spec may return an unresolved random_tensor()
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _flatten(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _flatten(item)]
    return [value]


_NAMED: dict[tuple[str, tuple[str, ...]], type] = {}


def _named_tuple(name: str, fields: tuple[str, ...]) -> type:
    from collections import namedtuple

    key = (name, tuple(fields))
    if key not in _NAMED:
        _NAMED[key] = namedtuple(name, fields)
    return _NAMED[key]


class TorchProxy:
    """``torch`` and its submodules as the spec sees them."""

    def __init__(self, tracer: Tracer, path: str, obj: Any) -> None:
        self._tracer, self._path, self._obj = tracer, path, obj

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._obj, name)
        path = f"{self._path}.{name}"
        torch = self._tracer.torch
        if isinstance(real, types.ModuleType):
            return TorchProxy(self._tracer, path, real)
        if isinstance(real, type) and issubclass(real, torch.nn.Module):
            return ModuleClassProxy(self._tracer, path)
        if isinstance(real, (torch.dtype, torch.device)) or not callable(real):
            return real
        return FunctionProxy(self._tracer, path)

    def __repr__(self) -> str:
        return f"<alignbot proxy {self._path}>"


class FunctionProxy:
    def __init__(self, tracer: Tracer, path: str) -> None:
        self._tracer, self._path = tracer, path

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._tracer.record("call", self._path, args, kwargs)


class ModuleClassProxy:
    def __init__(self, tracer: Tracer, path: str) -> None:
        self._tracer, self._path = tracer, path

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._tracer.record("module", self._path, args, kwargs)


class ModuleProxy:
    """A module built on the reference; calls and attribute reads are recorded."""

    def __init__(self, tracer: Tracer, value_id: str, path: str) -> None:
        self._tracer, self._id, self._path = tracer, value_id, path

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._tracer.record("invoke", self._path, (self, *args), kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_"):  # it would change the reference's module alone
            raise SpecError(f"setting {name!r} on a module is not recorded: give it to the "
                            "constructor")
        object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._tracer.values[self._id], name)
        target = f"{self._path}.{name}"
        if is_tensor(self._tracer.torch, real):
            return self._tracer.record("getattr", target, (self,), {}, name=name)
        if callable(real):
            return _BoundMethod(self._tracer, self, name, target)
        return real


class _BoundMethod:
    def __init__(self, tracer: Tracer, owner: Any, name: str, target: str) -> None:
        self._tracer, self._owner, self._name, self._target = tracer, owner, name, target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        path = self._owner._path if isinstance(self._owner, ModuleProxy) else "torch.Tensor"
        return self._tracer.record("method", self._target, (self._owner, *args), kwargs,
                                   name=self._name, module_path=path)


class TensorProxy:
    """A reference tensor inside a spec. Methods, operators and tensor-valued properties are
    recorded; ``shape``/``dtype``/``ndim`` and friends are plain values for control flow."""

    __hash__ = object.__hash__

    def __init__(self, tracer: Tracer, value_id: str) -> None:
        self._tracer, self._id = tracer, value_id

    @property
    def _real(self) -> Any:
        return self._tracer.values[self._id]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        real = getattr(self._real, name)
        if name in PLAIN_ATTRS:
            return real
        target = f"torch.Tensor.{name}"
        if callable(real):
            return _BoundMethod(self._tracer, self, name, target)
        if is_tensor(self._tracer.torch, real):
            return self._tracer.record("getattr", target, (self,), {}, name=name)
        return real

    def _method(self, name: str, *args: Any) -> Any:
        return self._tracer.record("method", f"torch.Tensor.{name}", (self, *args), {},
                                   name=name)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._method("__setitem__", key, value)

    def __bool__(self) -> bool:
        return bool(self._real)

    def __int__(self) -> int:
        return int(self._real)

    def __float__(self) -> float:
        return float(self._real)

    def __index__(self) -> int:
        return int(self._real)

    def __len__(self) -> int:
        return len(self._real)

    def __iter__(self) -> Any:
        return (self._method("__getitem__", i) for i in range(len(self)))

    def __repr__(self) -> str:
        return f"<alignbot tensor {self._id} {tuple(self._real.shape)} {self._real.dtype}>"


def _operator(name: str) -> Callable[..., Any]:
    def method(self: TensorProxy, *args: Any) -> Any:
        return self._method(name, *args)

    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__rdiv__",
              "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
              "__rmod__", "__matmul__", "__rmatmul__", "__pow__", "__rpow__", "__neg__",
              "__pos__", "__abs__", "__invert__", "__and__", "__rand__", "__or__", "__ror__",
              "__xor__", "__rxor__", "__lshift__", "__rshift__", "__lt__", "__le__", "__gt__",
              "__ge__", "__eq__", "__ne__", "__getitem__",
              *sorted(INPLACE_DUNDERS - {"__setitem__"})):
    setattr(TensorProxy, _name, _operator(_name))
