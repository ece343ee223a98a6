"""Slice a program to one call, fed with the inputs it received on the reference.

The call's arguments are taken from the reference's values at that point and written down
as literal inputs: the slice of a first divergent call is its minimal repro, and the slice of
any call judges that call on its own, whatever diverged before it. For a
gradient finding the slice also carries the upstream gradient that the call's output
received on the reference, so the backward of that one call is what gets compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .findings import Finding, Kind
from .layout import plan_layout
from .program import (
    BackwardPlan,
    CallNode,
    InputNode,
    Node,
    Observations,
    Program,
    Recipe,
    is_call,
    reference_observations,
)
from .runtime.literals import is_ref, node_refs
from .runtime.replay import Hooks, bind_result, module_tensors, run_node
from .runtime.replay import seed as seed_reference
from .runtime.values import encode_array, is_tensor, to_numpy


class CannotSlice(Exception):
    """The call's inputs are not all tensors, modules or plain literals."""


def prefix_values(program: Program, stop: int) -> dict[str, Any]:
    """The reference's values just before node ``stop`` runs."""
    import torch

    seed_reference(torch, int(program.get("seed", 0)))
    values: dict[str, Any] = {}
    hooks = Hooks()
    for node in program["nodes"][:stop]:
        try:
            result = run_node(torch, node, values, hooks)
        except Exception:
            if node.get("raises"):
                continue
            raise
        bind_result(torch, node["id"], result, values)
    return values


def literal_input(node_id: str, tensor: Any, keep_grad: bool = True,
                  arr: np.ndarray | None = None) -> InputNode:
    """An input node holding ``tensor``'s values (``arr`` in their place when given: the
    contiguous base of a view)."""
    import torch

    dtype, values = to_numpy(torch, tensor)
    arr = values if arr is None else arr
    grad = keep_grad and bool(tensor.requires_grad) and (
        tensor.is_floating_point() or tensor.is_complex())
    return {"id": node_id, "op": "input", "dtype": dtype, "shape": list(arr.shape),
            "recipe": {"kind": "literal", "array": encode_array(arr)}, "requires_grad": grad}


class _Slicer:
    def __init__(self, program: Program, values: dict[str, Any], keep_grad: bool) -> None:
        self.program, self.keep_grad = program, keep_grad
        self.values = values
        self.nodes: list[Node] = []
        self.renamed: dict[str, str] = {}
        # a view rebuilt from a literal: its last node's id -> (the literal, the view calls)
        self.views: dict[str, tuple[str, list[tuple[str, list[Any]]]]] = {}
        self.by_id = {n["id"]: n for n in program["nodes"]}

    def _new_id(self) -> str:
        return f"v{len(self.nodes)}"

    def ref(self, old: str) -> Any:
        if old in self.renamed:
            return {"ref": self.renamed[old]}
        import torch

        value = self.values[old]
        if is_tensor(torch, value):
            node: Node = self._tensor(value)
        elif isinstance(value, torch.nn.Module):
            node = self._module(old, value)
        elif isinstance(value, (list, tuple)) and all(is_tensor(torch, v) for v in value):
            items = [self.ref(f"{old}.{i}") for i in range(len(value))]
            return {"tuple": items} if isinstance(value, tuple) else items
        else:
            raise CannotSlice(f"{old} is a {type(value).__name__}")
        self.nodes.append(node)
        self.renamed[old] = node["id"]
        if node["op"] == "module" and is_call(node):
            self._convert(node, value)
        return {"ref": node["id"]}

    def _convert(self, node: CallNode, value: Any) -> None:
        """The calls that made a module what it was: ``.to(dtype)``, ``.eval()``."""
        fresh = _float_dtype(prefix_module(node))
        dtype = _float_dtype(value)
        if fresh is not None and dtype is not None and dtype != fresh:
            # made with the default dtype and converted (``m.to(torch.float64)``)
            self.nodes.append({"id": self._new_id(), "op": "method", "name": "to",
                               "target": f"{node['target']}.to",
                               "args": [{"ref": node["id"]}, {"dtype": dtype}],
                               "kwargs": {}})
        if not getattr(value, "training", True):  # a module in eval mode
            self.nodes.append({"id": self._new_id(), "op": "method", "name": "eval",
                               "target": f"{node['target']}.eval",
                               "args": [{"ref": node["id"]}], "kwargs": {}})

    def _tensor(self, value: Any) -> Node:
        """A literal input; for a non-contiguous view, the literal of its base followed by
        the view calls that give the same strides (the last node is returned, the others
        appended)."""
        import torch

        layout = None
        if getattr(value, "layout", None) == torch.strided:
            layout = plan_layout(list(value.shape), list(value.stride()))
        if layout is None or not layout.steps:
            return literal_input(self._new_id(), value, self.keep_grad)
        base = layout.base_array(to_numpy(torch, value)[1])
        literal = literal_input(self._new_id(), value, self.keep_grad, base)
        self.nodes.append(literal)
        return self.view_of(literal["id"], [(name, args) for name, args in layout.steps])

    def view_of(self, source: str, steps: list[tuple[str, list[Any]]]) -> CallNode:
        """The view calls ``steps`` applied to ``source``; the last node is returned, the
        others appended."""
        if not steps:
            raise ValueError("a view needs at least one call")
        current = source
        nodes: list[CallNode] = []
        for name, args in steps:
            nodes.append({"id": self._new_id(), "op": "method", "name": name,
                          "target": f"torch.Tensor.{name}",
                          "args": [{"ref": current}, *[_encode(a) for a in args]],
                          "kwargs": {}})
            if len(nodes) < len(steps):
                self.nodes.append(nodes[-1])
            current = nodes[-1]["id"]
        self.views[current] = (source, list(steps))
        return nodes[-1]

    def _module(self, old: str, module: Any) -> CallNode:
        import torch

        built = self.by_id.get(old)
        while built is not None and built["op"] == "method" and is_ref(built["args"][0]):
            built = self.by_id.get(built["args"][0]["ref"])  # ``m.eval()`` returned ``m``
        if built is None or built["op"] != "module" or node_refs(built):
            raise CannotSlice(f"module {old} was not built from literals")
        if type(module).__name__ != built["target"].rsplit(".", 1)[-1]:
            raise CannotSlice(f"module {old} is a lazy module after its first call")
        state = {k: encode_array(to_numpy(torch, t)[1]) for k, t in module_tensors(module).items()}
        kwargs = dict(built["kwargs"])
        dtype = _float_dtype(module)
        if dtype is not None and "dtype" in _parameters(module) and dtype != _float_dtype(
                prefix_module(built)):
            kwargs["dtype"] = {"dtype": dtype}  # built in it: its state travels unrounded
        return {"id": self._new_id(), "op": "module", "target": built["target"],
                "args": built["args"], "kwargs": kwargs, "state": state}

    def rewrite(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.rewrite(v) for v in value]
        if is_ref(value):
            return self.ref(value["ref"])
        if isinstance(value, dict):
            return {k: self.rewrite(v) for k, v in value.items()}
        return value


def _float_dtype(module: Any) -> str | None:
    """The dtype of a module's first floating parameter or buffer."""
    for tensor in module_tensors(module).values():
        if tensor.is_floating_point():
            return str(tensor.dtype).rsplit(".", 1)[-1]
    return None


def _parameters(module: Any) -> set[str]:
    """The keyword arguments the module's constructor takes."""
    import inspect

    try:
        return set(inspect.signature(type(module).__init__).parameters)
    except (TypeError, ValueError):
        return set()


def _encode(value: Any) -> Any:
    """A view call's argument as a program literal."""
    if isinstance(value, tuple):
        return {"tuple": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, slice):
        return {"slice": [value.start, value.stop, value.step]}
    return value


@dataclass
class Sliced:
    """A one-call program and how its ids map back: ``back`` takes each of its ids (the
    literal inputs and the call) to the id it stands for in the original program."""

    program: Program
    back: dict[str, str] = field(default_factory=dict)


def slice_call(program: Program, index: int, keep_grad: bool = True, backward: bool = False,
               values: dict[str, Any] | None = None, ref: Observations | None = None
               ) -> Sliced | None:
    """Node ``index`` alone, fed with the reference's values just before it ran (``values``
    when the caller has them), or None when its inputs cannot be written down. With
    ``backward`` the slice carries the upstream gradient its output received on the
    reference (``ref``, replayed when not given); None when there is none."""
    original = program["nodes"][index]
    if original["op"] == "input":
        return None
    try:
        slicer = _Slicer(program, prefix_values(program, index) if values is None else values,
                         keep_grad or backward)
        call = original.copy()
        call["args"] = slicer.rewrite(original["args"])
        call["kwargs"] = slicer.rewrite(original.get("kwargs", {}))
    except (CannotSlice, KeyError, RuntimeError):
        return None
    if backward and original.get("inplace"):
        # an in-place call cannot write into a literal leaf that requires grad: it writes
        # into a clone of it, as the original wrote into a non-leaf
        position = 1 if original["op"] == "invoke" else 0
        mutated = call["args"][position] if len(call["args"]) > position else None
        if not is_ref(mutated):
            return None
        view = slicer.views.get(mutated["ref"])
        source = mutated if view is None else {"ref": view[0]}  # a view: clone its literal
        clone: CallNode = {"id": slicer._new_id(), "op": "method", "name": "clone",
                           "target": "torch.Tensor.clone", "args": [source], "kwargs": {}}
        slicer.nodes.append(clone)
        written: CallNode = clone
        if view is not None:  # and rebuild the view on the clone
            written = slicer.view_of(clone["id"], view[1])
            slicer.nodes.append(written)
        call["args"] = [*call["args"][:position], {"ref": written["id"]},
                        *call["args"][position + 1:]]
    call["id"] = slicer._new_id()
    nodes = [*slicer.nodes, call]
    plan: BackwardPlan | None = None
    if backward:
        plan = _backward_plan(program, original["id"], call, nodes, ref)
        if plan is None:
            return None
    sliced: Program = {"version": 1, "spec": program["spec"], "seed": program.get("seed", 0),
              "choices": [], "nodes": nodes, "backward": plan,
              "expect_raise": program.get("expect_raise", False),
              "sliced_from": original["id"]}
    back = {new: old for old, new in slicer.renamed.items()}
    back[call["id"]] = original["id"]
    return Sliced(sliced, back)


def slice_program(program: Program, finding: Finding, keep_grad: bool = True
                  ) -> Program | None:
    """The one-call program for ``finding``, or None when there is nothing to slice to.
    Without ``keep_grad`` the inputs do not require grad (an in-place call on a literal
    input that requires grad would raise where the original, on a non-leaf, did not)."""
    index = next((i for i, n in enumerate(program["nodes"]) if n["id"] == finding.node), None)
    if index is None:
        return None
    # a wrong gradient, or an error raised in the backward pass: the slice runs the backward
    backward_needed = finding.kind is Kind.GRAD or finding.key == "backward"
    sliced = slice_call(program, index, keep_grad, backward_needed)
    return sliced.program if sliced is not None else None


def slice_calls(program: Program, wanted: dict[int, tuple[bool, bool]],
                ref: Observations | None = None) -> dict[int, Sliced]:
    """Several calls sliced from one replay of the reference: ``wanted`` maps a node's index
    to (keep_grad, backward) as for :func:`slice_call`; calls that cannot be sliced are left
    out."""
    import torch

    seed_reference(torch, int(program.get("seed", 0)))
    values: dict[str, Any] = {}
    hooks = Hooks()
    out: dict[int, Sliced] = {}
    for index, node in enumerate(program["nodes"]):
        if index in wanted:
            keep_grad, backward = wanted[index]
            sliced = slice_call(program, index, keep_grad, backward, values, ref)
            if sliced is not None:
                out[index] = sliced
        if index >= max(wanted, default=-1):
            break
        try:
            result = run_node(torch, node, values, hooks)
        except Exception:
            if node.get("raises"):
                continue
            break
        bind_result(torch, node["id"], result, values)
    return out


def _backward_plan(program: Program, old_id: str, call: CallNode,
                   nodes: list[Node], ref: Observations | None = None
                   ) -> BackwardPlan | None:
    """Seed the call's outputs with the gradients they received on the reference."""
    ref = reference_observations(program) if ref is None else ref
    plan = program.get("backward")
    grads = {k[len("grad:"):]: v for k, v in ref.items()
             if k.startswith("grad:") and v.get("t") == "tensor"}
    outputs: list[str] = []
    seeds: list[Recipe] = []
    element_ids = sorted(k for k in grads if k.startswith(old_id + "."))
    for old in ([old_id] if old_id in grads else element_ids):
        new = call["id"] + old[len(old_id):]
        outputs.append(new)
        seeds.append({"kind": "literal", "array": encode_array(
            np.asarray(grads[old]["data"], dtype=np.float64))})
    if not outputs and plan and old_id in plan["outputs"]:
        position = plan["outputs"].index(old_id)
        outputs, seeds = [call["id"]], [plan["seeds"][position]]
    if not outputs and call.get("inplace"):
        # its result is the tensor it wrote into, whose gradient the reference took under
        # another id: any upstream gradient does to compare both sides' backward of the call
        outputs = [call["id"]]
        seeds = [{"kind": "uniform", "low": -1.0, "high": 1.0,
                  "seed": int(program.get("seed", 0)) + 1}]
    if not outputs:
        return None
    wrt = [n["id"] for n in nodes if n["op"] == "input" and n.get("requires_grad")]
    for node in nodes:
        if node["op"] == "module":
            module = prefix_module(node)
            wrt.extend(f"{node['id']}:{name}" for name, p in module.named_parameters()
                       if p.requires_grad)
    return {"outputs": outputs, "seeds": seeds, "wrt": wrt, "intermediates": []} if wrt else None


def prefix_module(node: CallNode) -> Any:
    """The module a ``module`` node builds, with the parameters its constructor draws."""
    import torch

    fresh = node.copy()
    fresh["state"] = {}
    return run_node(torch, fresh, {}, Hooks())
