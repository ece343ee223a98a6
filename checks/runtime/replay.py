"""Replay a Program on a ``torch`` namespace and observe every value, state and gradient.

The candidate worker calls :func:`replay`; the engine's tracer calls the same helpers
(:func:`make_input`, :func:`observe_result`, :func:`run_backward`) while it runs the reference,
so both sides build inputs and take observations with one piece of code.

Observation keys: ``v3`` (a node's result), ``v3.0`` (an element of a tuple result, ``v3.1.0``
of a tuple within it), ``v3!self`` (the mutated argument of an in-place call),
``v3!state.running_mean`` (a module's buffer after a call;
``v3!state.param_groups[0]['params'][1]`` a parameter after an optimizer's ``step()``),
``final:v0`` (an input at the end of the program), ``grad:v0`` /
``grad:v2:weight`` (gradients), ``autograd`` (what :class:`BackwardTracker` saw of each call's
backward node). When the backward raises, the ``backward`` error names the call whose backward
node was running (``node``) and that node's class (``grad_fn``).
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import traceback
import types
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

import numpy as np

try:  # imported as part of the ``checks`` package in the engine
    from .dtypes import DEFAULT, WIDE
    from .literals import is_ref, ref_of
    from .program_types import (
        GRAD_AFTER,
        IN_PROGRAM_BACKWARDS,
        call_args,
        call_kwargs,
        is_call,
        is_op_call,
    )
    from .values import (
        cast_input,
        decode_array,
        decode_literal,
        dtype_name,
        is_tensor,
        make_array,
        observe,
        observe_error,
    )
except ImportError:  # imported as a top-level module inside the worker
    from dtypes import DEFAULT, WIDE  # type: ignore[no-redef]
    from literals import is_ref, ref_of  # type: ignore[no-redef]
    from program_types import (  # type: ignore[no-redef]
        GRAD_AFTER,
        IN_PROGRAM_BACKWARDS,
        call_args,
        call_kwargs,
        is_call,
        is_op_call,
    )
    from values import (  # type: ignore[no-redef]
        cast_input,
        decode_array,
        decode_literal,
        dtype_name,
        is_tensor,
        make_array,
        observe,
        observe_error,
    )

if TYPE_CHECKING:
    from typing import TypeAlias

    from .program_types import CallNode, EncodedArray, InputNode, Node, Program

    WrapAlso: TypeAlias = Callable[[str], bool] | Collection[str]

Observations = dict[str, dict[str, Any]]


class MissingApi(Exception):
    """The candidate has no attribute for a PyTorch API the program uses."""


# Calls that are no tensor computation, though ``alignbot_wrap`` would see them: the autograd
# machinery, random state, global settings, optimizers and the library's utilities.
NOT_COMPUTING_PREFIXES = ("torch.optim.", "torch.autograd.", "torch.utils.", "torch.random.",
                          "torch.backends.", "torch.cuda.", "torch.nn.utils.")
NOT_COMPUTING_CALLS = frozenset({
    "torch.manual_seed", "torch.seed", "torch.initial_seed", "torch.get_rng_state",
    "torch.set_rng_state", "torch.set_default_dtype", "torch.get_default_dtype",
    "torch.set_grad_enabled", "torch.is_grad_enabled", "torch.no_grad", "torch.enable_grad",
    "torch.inference_mode", "torch.use_deterministic_algorithms"})
# Tensor methods that drive autograd rather than compute a value.
NOT_COMPUTING_METHODS = frozenset({"backward", "register_hook", "retain_grad",
                                   "register_post_accumulate_grad_hook", "requires_grad_"})


def computes(torch: Any, op: str, target: str, fn: Any, owner: Any = None) -> bool:
    """Whether a call is a tensor computation, what ``alignbot_wrap`` wraps by default: a
    module's forward, a function of the ``torch`` namespace that is no class (a module or an
    optimizer being built) and not the autograd machinery, random state or settings, and a
    method of a tensor (``owner``) other than those that drive autograd (``backward``). A
    method of a module (``parameters()``, ``eval()``) or an optimizer (``step()``) is not."""
    if op == "method" and not is_tensor(torch, owner):
        return False
    return not (op == "call" and isinstance(fn, type)) and computing_name(op, target)


def computing_name(op: str, target: str) -> bool:
    """What :func:`computes` decides from the call's kind and name alone: a module invoked,
    a method not among those that drive autograd, a function (``call``) that is not the
    autograd machinery, random state, a setting or an optimizer."""
    if op == "invoke":
        return True
    if op == "method":
        return target.rsplit(".", 1)[-1] not in NOT_COMPUTING_METHODS \
            and not target.startswith(NOT_COMPUTING_PREFIXES)
    return op == "call" and target not in NOT_COMPUTING_CALLS \
        and not target.startswith(NOT_COMPUTING_PREFIXES)


def wraps_also(also: WrapAlso | None, target: str) -> bool:
    """The prelude's ``alignbot_wrap_also``: a predicate on the target, or a collection of
    targets and shell patterns (``torch.optim.*``) that ``alignbot_wrap`` wraps too."""
    if also is None:
        return False
    if callable(also):
        try:
            return bool(also(target))
        except Exception:
            return False
    return any(target == item or fnmatch.fnmatchcase(target, str(item)) for item in also)


class Hooks:
    """What a candidate's prelude may define: per-op overrides, a call wrapper (``wrap``, for
    the calls :func:`computes` accepts and those ``wrap_also`` adds), a device, and a wrapper
    of a whole program's forward (``program``: see :mod:`alignbot.checks.runtime.region`)."""

    def __init__(
        self,
        overrides: dict[str, Callable[..., Any]] | None = None,
        wrap: Callable[[str, Callable[..., Any]], Callable[..., Any]] | None = None,
        device: str = "cpu",
        program: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
        wrap_also: WrapAlso | None = None,
    ) -> None:
        self.overrides = overrides or {}
        self.wrap = wrap
        self.device = device
        self.program = program
        self.wrap_also = wrap_also

    def callable_for(self, torch: Any, node: CallNode, fn: Callable[..., Any],
                     owner: Any = None) -> Callable[..., Any]:
        """The callable that runs ``node``: its override if any, then wrapped where it is a
        tensor computation (or the prelude asked for it)."""
        target = node["target"]
        fn = self.overrides.get(target, fn)
        if self.wrap is None:
            return fn
        if computes(torch, node["op"], target, fn, owner) or wraps_also(self.wrap_also, target):
            return self.wrap(target, fn)
        return fn


AUTOGRAD_KEY = "autograd"


class BackwardTracker:
    """Hooks on the backward node (``grad_fn``) of each call's results: which call's backward
    was running when the backward raised, and the gradients flowing into and out of each
    call's node during the first backward pass. Every hook is optional: a framework whose
    tensors have no ``grad_fn``, or whose nodes have no ``register_prehook`` /
    ``register_hook``, simply yields no data."""

    def __init__(self, torch: Any, on_enter: Callable[[str], None] | None = None) -> None:
        self.torch = torch
        self.on_enter = on_enter
        self._owner: dict[int, str] = {}  # id(grad_fn) -> call id
        self._nodes: list[Any] = []  # keeps the hooked nodes (and their ids) alive
        self.entered: list[str] = []  # call ids, in the order their node started
        self.calls: dict[str, dict[str, Any]] = {}
        self.recording = False

    def watch(self, node: Node, result: Any) -> None:
        """Hook the backward nodes of a call's results, right after the call ran (a later
        in-place call gives the same tensor another node)."""
        if not is_op_call(node):
            return
        for item in _leaves(result):
            if not is_tensor(self.torch, item):
                continue
            try:
                grad_fn = getattr(item, "grad_fn", None)
            except Exception:
                continue
            if grad_fn is None or id(grad_fn) in self._owner:
                continue
            self._owner[id(grad_fn)] = node["id"]
            self._nodes.append(grad_fn)
            self._hook(node["id"], grad_fn)

    def _hook(self, call_id: str, grad_fn: Any) -> None:
        name = type(grad_fn).__name__
        prehook = getattr(grad_fn, "register_prehook", None)
        if callable(prehook):
            def enter(grad_outputs: Any) -> None:
                self.entered.append(call_id)
                if self.on_enter is not None:
                    self.on_enter(call_id)

            with contextlib.suppress(Exception):
                prehook(enter)
        posthook = getattr(grad_fn, "register_hook", None)
        if callable(posthook):
            def leave(grad_inputs: Any, grad_outputs: Any) -> None:
                if not self.recording or call_id in self.calls:
                    return
                with contextlib.suppress(Exception):  # an observation never breaks backward
                    self.calls[call_id] = {"fn": name,
                                           "out": self._observe_all(grad_outputs),
                                           "in": self._observe_all(grad_inputs)}

            with contextlib.suppress(Exception):
                posthook(leave)

    def _observe_all(self, grads: Any) -> list[dict[str, Any]]:
        if not isinstance(grads, (tuple, list)):
            grads = [grads]
        return [observe(self.torch, g) for g in grads]

    def raising_call(self) -> str | None:
        """The call whose backward node was entered last: the one running when it raised."""
        return self.entered[-1] if self.entered else None

    def observations(self) -> Observations:
        if not self.calls:
            return {}
        return {AUTOGRAD_KEY: {"t": "autograd", "calls": self.calls}}


def per_call(obs: Observations) -> dict[str, dict[str, Any]]:
    """What :class:`BackwardTracker` saw of each call's backward node, by call id; empty
    where a side has no hook data."""
    data = obs.get(AUTOGRAD_KEY) or {}
    calls = data.get("calls") if isinstance(data, dict) else None
    return calls if isinstance(calls, dict) else {}


def resolve(torch: Any, target: str) -> Any:
    obj = torch
    for part in target.split(".")[1:]:
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise MissingApi(f"{target}: the candidate has no attribute {part!r}") from exc
    return obj


def seed(torch: Any, value: int) -> None:
    """Seed the framework's default generator. ``torch.manual_seed`` also queues lazy seeding
    of every accelerator, which formats the Python stack each time: too slow per program."""
    generator = getattr(torch, "default_generator", None)
    if generator is None:
        torch.manual_seed(value)
        return
    generator.manual_seed(value)
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_initialized():
        cuda.manual_seed_all(value)


def make_input(torch: Any, node: InputNode, device: str = "cpu") -> Any:
    arr = make_array(node["recipe"], node["dtype"], node["shape"])
    tensor = _from_numpy(torch, arr)
    tensor = cast_input(torch, tensor, node["dtype"])
    if device != "cpu":
        tensor = tensor.to(device)
    if node.get("requires_grad"):
        tensor.requires_grad_(True)
    return tensor


def _from_numpy(torch: Any, arr: np.ndarray) -> Any:
    from_numpy = getattr(torch, "from_numpy", None)
    if from_numpy is not None:
        return from_numpy(np.require(arr, requirements="C"))
    return torch.tensor(arr)


def load_state(torch: Any, module: Any, state: dict[str, EncodedArray]) -> None:
    """Give a candidate module the reference's initial parameters and buffers."""
    for name, data in state.items():
        target = module
        for part in name.split("."):
            target = getattr(target, part)
        source = _from_numpy(torch, decode_array(data)).to(target.dtype)
        no_grad = getattr(torch, "no_grad", None)
        if no_grad is not None:
            with no_grad():
                target.copy_(source.reshape(target.shape))
        else:
            target.set_value(source)


def materialized(tensor: Any) -> bool:
    """False for a lazy module's parameter before its first call (``UninitializedParameter``):
    it has no values yet."""
    return not type(tensor).__name__.startswith("Uninitialized")


def module_tensors(module: Any) -> dict[str, Any]:
    """A module's parameters and buffers that hold values, by dotted name."""
    tensors: dict[str, Any] = {}
    for name, param in module.named_parameters():
        tensors[name] = param
    for name, buf in module.named_buffers():
        if buf is not None:
            tensors[name] = buf
    return {name: t for name, t in tensors.items() if materialized(t)}


def module_buffers(module: Any) -> dict[str, Any]:
    return {name: buf for name, buf in module.named_buffers()
            if buf is not None and materialized(buf)}


def _leaves(value: Any) -> list[Any]:
    """The items of a (nested) tuple or list result: LSTM's ``(out, (h, c))``."""
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _holds_tensor(torch: Any, value: Any) -> bool:
    return isinstance(value, (tuple, list)) and any(is_tensor(torch, v) for v in _leaves(value))


def bind_result(torch: Any, node_id: str, result: Any, values: dict[str, Any]) -> None:
    """Bind a result and, for a tuple or list, each element (``v3.1``) and each element of
    those that are tuples themselves (``v3.1.0``)."""
    values[node_id] = result
    if isinstance(result, (tuple, list)) and not isinstance(result, str):
        for index, item in enumerate(result):
            bind_result(torch, f"{node_id}.{index}", item, values)


def _observe_tree(torch: Any, key: str, value: Any, out: Observations) -> None:
    if _holds_tensor(torch, value):
        out[key] = {"t": "value", "value": f"sequence of {len(value)}"}
        for index, item in enumerate(value):
            _observe_tree(torch, f"{key}.{index}", item, out)
    else:
        out[key] = observe(torch, value)


def observe_result(torch: Any, node: Node, result: Any,
                   values: dict[str, Any]) -> Observations:
    """Observations a node yields once it has run: its result (each tensor with whether it
    requires a gradient, and its backward node's class) and whatever it mutated."""
    node_id = node["id"]
    out: Observations = {}
    _observe_tree(torch, node_id, result, out)
    if not is_call(node):
        return out
    _note_graph(torch, node_id, result, out)
    if node.get("inplace"):
        # the mutated tensor: the first argument, or the input of an in-place module
        args = node["args"][1:] if node["op"] == "invoke" else node["args"]
        first = args[0] if args else None
        if is_ref(first):
            out[f"{node_id}!self"] = observe(torch, values[first["ref"]])
    for where in node.get("writes") or []:
        # an argument the reference's call wrote into (running statistics, ``out=``)
        literal = _argument(node, where)
        if is_ref(literal) and literal["ref"] in values:
            out[f"{node_id}!{where}"] = observe(torch, values[literal["ref"]])
    if node["op"] == "invoke":
        module = values[ref_of(node["args"][0])]
        for name, buf in module_buffers(module).items():
            out[f"{node_id}!state.{name}"] = observe(torch, buf)
    if node["op"] == "method" and node.get("name") == "step" and is_ref(node["args"][0]):
        out.update(_stepped(torch, node_id, values[node["args"][0]["ref"]]))
    if node.get("target") in IN_PROGRAM_BACKWARDS:
        out.update(leaf_gradients(torch, node_id, values))
    return out


def leaf_gradients(torch: Any, node_id: str, values: dict[str, Any]) -> Observations:
    """Every leaf's ``.grad`` just after a backward the program itself runs (``loss.backward()``
    in a training step): the inputs that require a gradient and the modules' parameters, each
    once (``v9!grad.v0:weight``, ``v9!grad.v3``). A wrong gradient shows here, at the call
    that computed it, not at the optimizer's step that reads it later."""
    out: Observations = {}
    seen: set[int] = set()

    def add(key: str, tensor: Any) -> None:
        if id(tensor) in seen:
            return
        seen.add(id(tensor))
        try:
            grad = tensor.grad
        except Exception as exc:  # a framework whose tensors cannot give their gradient
            out[f"{node_id}{GRAD_AFTER}{key}"] = observe_error(exc)
            return
        out[f"{node_id}{GRAD_AFTER}{key}"] = observe(torch, grad)

    module_type: Any = getattr(getattr(torch, "nn", None), "Module", ())
    for key, value in list(values.items()):
        if is_tensor(torch, value):
            with contextlib.suppress(Exception):
                if value.requires_grad is True and value.is_leaf is True:
                    add(key, value)
        elif isinstance(value, module_type):
            with contextlib.suppress(Exception):
                for name, param in value.named_parameters():
                    if param.requires_grad is True:
                        add(f"{key}:{name}", param)
    return out


def _note_graph(torch: Any, key: str, value: Any, out: Observations) -> None:
    """``requires_grad`` and ``grad_fn`` (the backward node's class) on the observation of
    each tensor of a result: a call whose result lost its backward node shows there."""
    if isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            _note_graph(torch, f"{key}.{index}", item, out)
        return
    obs = out.get(key)
    if obs is None or obs.get("t") != "tensor" or not is_tensor(torch, value):
        return
    try:
        wants = getattr(value, "requires_grad", None)
        grad_fn = getattr(value, "grad_fn", None)
    except Exception:
        return
    if isinstance(wants, bool):
        obs["requires_grad"] = wants
        if grad_fn is not None:
            obs["grad_fn"] = type(grad_fn).__name__[:100]


def _argument(node: Node, where: str) -> Any:
    """The literal of ``arg2`` (a position, as :func:`alignbot.checks.signatures.role` names it) or
    of a keyword, else None."""
    args = call_args(node)
    if where.startswith("arg") and where[3:].isdigit():
        index = int(where[3:])
        return args[index] if index < len(args) else None
    return call_kwargs(node).get(where)


def _tensor_arguments(torch: Any, node: Node, values: dict[str, Any]) -> dict[str, Any]:
    """The tensors a call takes as arguments, by :func:`_argument`'s name."""
    if not is_call(node):
        return {}
    named: dict[str, Any] = {f"arg{i}": a for i, a in enumerate(call_args(node))}
    named.update(call_kwargs(node))
    found = {}
    for where, literal in named.items():
        value = values.get(literal["ref"]) if is_ref(literal) else None
        if is_tensor(torch, value):
            found[where] = value
    return found


def argument_snapshots(torch: Any, node: Node, values: dict[str, Any]
                       ) -> dict[str, tuple[int, Any]]:
    """Each tensor argument of a call as its version counter (``_version``) and, for a
    function (``F.batch_norm`` writes its running statistics without moving the counter),
    a copy: what :func:`written_arguments` compares after the call."""
    snapshots = {}
    for where, value in _tensor_arguments(torch, node, values).items():
        try:
            copy = value.detach().clone() if node["op"] == "call" else None
            snapshots[where] = (int(value._version), copy)
        except Exception:  # an inference tensor has no version counter
            continue
    return snapshots


def written_arguments(torch: Any, node: Node, values: dict[str, Any],
                      before: dict[str, tuple[int, Any]]) -> list[str]:
    """The arguments a call wrote into (their version counter moved, or their values
    changed), besides the tensor an in-place call mutates (observed as ``!self``): running
    statistics, an ``out=`` tensor."""
    # the mutated tensor of an in-place call, or of an in-place module (after the module)
    skip = ("arg1" if node["op"] == "invoke" else "arg0") if node.get("inplace") else None
    written = []
    for where, value in _tensor_arguments(torch, node, values).items():
        if where == skip or where not in before:
            continue
        version, old = before[where]
        try:
            moved = int(value._version) != version
        except Exception:
            moved = False
        if moved or (old is not None and not _same(torch, old, value.detach())):
            written.append(where)
    return written


def _same(torch: Any, old: Any, new: Any) -> bool:
    """The same values, NaN where NaN was (``torch.equal`` calls NaN unequal); a dtype that
    cannot be compared (float8) counts as unchanged."""
    try:
        if old.shape != new.shape or old.dtype != new.dtype:
            return False
        if old.is_floating_point() or old.is_complex():
            return bool(torch.allclose(old, new, rtol=0.0, atol=0.0, equal_nan=True))
        return bool(torch.equal(old, new))
    except Exception:
        return True


def _stepped(torch: Any, node_id: str, optimizer: Any) -> Observations:
    """The parameters an optimizer's ``step()`` updated, each keyed by the expression that
    reads it (``v9!state.param_groups[0]['params'][1]``): a wrong update shows at the step."""
    groups = getattr(optimizer, "param_groups", None)
    if not isinstance(groups, list):
        return {}
    out: Observations = {}
    for g, group in enumerate(groups):
        params = group.get("params", []) if isinstance(group, dict) else []
        for i, param in enumerate(params):
            out[f"{node_id}!state.param_groups[{g}]['params'][{i}]"] = observe(torch, param)
    return out


def run_node(torch: Any, node: Node, values: dict[str, Any], hooks: Hooks) -> Any:
    """Run one node on this side; raises what the framework raises (MissingApi for lookups)."""
    if node["op"] == "input":
        return make_input(torch, node, hooks.device)
    op = node["op"]
    args = decode_literal(torch, node.get("args", []), values)
    kwargs = {k: decode_literal(torch, v, values) for k, v in node.get("kwargs", {}).items()}
    if op == "call":
        fn = hooks.callable_for(torch, node, resolve(torch, node["target"]))
        return fn(*args, **kwargs)
    if op == "module":
        cls = resolve(torch, node["target"])
        module = cls(*args, **kwargs)
        if hooks.device != "cpu":
            module = module.to(hooks.device)
        load_state(torch, module, node.get("state", {}))
        return module
    if op == "invoke":
        module, rest = args[0], args[1:]
        call = hooks.callable_for(torch, node, module, module)
        if "state" in node:
            # a lazy module's first call: it makes its parameters (at random), which then
            # get the reference's values before the call that counts
            call(*rest, **kwargs)
            load_state(torch, module, node["state"])
        return call(*rest, **kwargs)
    if op == "method":
        self_value, rest = args[0], args[1:]
        if node["target"] in hooks.overrides:
            return hooks.callable_for(torch, node, hooks.overrides[node["target"]],
                                      self_value)(self_value, *rest, **kwargs)
        try:
            method = getattr(self_value, node["name"])
        except AttributeError as exc:
            raise MissingApi(f"{node['target']}: the candidate has no such method") from exc
        result = hooks.callable_for(torch, node, method, self_value)(*rest, **kwargs)
        # ``module.parameters()``: a generator, kept as the list it yields
        return list(result) if isinstance(result, types.GeneratorType) else result
    if op == "getattr":
        try:
            return getattr(args[0], node["name"])
        except AttributeError as exc:
            raise MissingApi(f"{node['target']}: the candidate has no such attribute") from exc
    raise ValueError(f"unknown node op {op!r}")


def run_backward(
    torch: Any, program: Program, values: dict[str, Any], device: str = "cpu",
    tracker: BackwardTracker | None = None, probes: dict[str, Any] | None = None,
) -> Observations:
    """Backward from the program's outputs with seeded random upstream gradients; the
    tracker (if any) records the first pass, the one that reaches the leaves. ``probes``
    stand for values (``probe:v3``, used as ``v3 - probe``: the gradient is its negation)."""
    spec = program.get("backward")
    if not spec:
        return {}
    outputs = [values[ref] for ref in spec["outputs"]]
    seeds = []
    for out, seed in zip(outputs, spec["seeds"], strict=True):
        wide = WIDE.get(dtype_name(out.dtype), WIDE[DEFAULT])
        arr = make_array(seed, wide, list(out.shape))
        grad = _from_numpy(torch, arr).to(out.dtype)
        seeds.append(grad.to(device) if device != "cpu" else grad)
    # Leaves (inputs, parameters) and intermediates are asked for in separate passes: some
    # candidates stop propagating at an intermediate that is listed as an input of grad().
    result: Observations = {}
    groups = [list(spec["wrt"])]
    if spec.get("intermediates"):
        groups.append(list(spec["intermediates"]))
    for number, keys in enumerate(groups):
        probed = {key: probes[f"probe:{key}"] for key in keys if f"probe:{key}" in probes} \
            if probes else {}
        wrt = [probed[key] if key in probed else _lookup(values, key) for key in keys]
        if tracker is not None:
            tracker.recording = number == 0
        try:
            grads = torch.autograd.grad(outputs, wrt, grad_outputs=seeds, allow_unused=True,
                                        retain_graph=number + 1 < len(groups))
        finally:
            if tracker is not None:
                tracker.recording = False
        for key, grad in zip(keys, grads, strict=True):
            # None stays None (an unused input): "None or zeros" is for the judge to compare
            result[f"grad:{key}"] = observe(torch, -grad if key in probed and grad is not None
                                            else grad)
    return result


def _lookup(values: dict[str, Any], key: str) -> Any:
    """``v3`` or ``v3:weight`` (a module's parameter)."""
    if ":" in key:
        node_id, name = key.split(":", 1)
        target = values[node_id]
        for part in name.split("."):
            target = getattr(target, part)
        return target
    return values[key]


def replay(torch: Any, program: Program, hooks: Hooks,
           progress: Callable[[int], None] | None = None) -> Observations:
    """Run every node, observing as we go; stop where this side's raising differs from the
    reference's, since everything after that point is a consequence."""
    values: dict[str, Any] = {}
    observations: Observations = {}
    tracker = None
    if program.get("backward"):
        # progress past the last node: len(nodes) is the backward, len(nodes) + 1 + i the
        # backward node of call i, so a crash or hang there still names its call
        index_of = {node["id"]: i for i, node in enumerate(program["nodes"])}
        base = len(program["nodes"]) + 1
        tracker = BackwardTracker(torch, on_enter=None if progress is None else (
            lambda call_id: progress(base + index_of[call_id])))
    for index, node in enumerate(program["nodes"]):
        if progress is not None:
            progress(index)
        try:
            result = run_node(torch, node, values, hooks)
        except MissingApi as exc:
            observations[node["id"]] = observe_error(exc, missing_api=True)
            return observations
        except Exception as exc:
            observations[node["id"]] = observe_raised(exc)
            if node.get("raises"):
                continue
            return observations
        bind_result(torch, node["id"], result, values)
        observations.update(observe_result(torch, node, result, values))
        if tracker is not None:
            tracker.watch(node, result)
        if node.get("raises"):
            return observations
    if progress is not None:
        progress(len(program["nodes"]))
    observations.update(observe_finals(torch, program, values))
    try:
        observations.update(run_backward(torch, program, values, hooks.device, tracker))
    except Exception as exc:
        observations["backward"] = backward_error(exc, tracker)
        observations["backward"]["traceback"] = traceback.format_exc(limit=8)
    if tracker is not None:
        observations.update(tracker.observations())
    return observations


_HERE = os.path.dirname(os.path.abspath(__file__))


def raised_at(exc: BaseException) -> str:
    """Where an exception was raised, as ``file.py:function``: the innermost frame that is
    not this runtime's (empty when there is none, as for an error of a C function)."""
    try:
        frames = traceback.extract_tb(exc.__traceback__)
    except Exception:
        return ""
    for frame in reversed(frames):
        if os.path.dirname(os.path.abspath(frame.filename)) != _HERE:
            return f"{os.path.basename(frame.filename)}:{frame.name}"[:200]
    return ""


def observe_raised(exc: BaseException) -> dict[str, Any]:
    """:func:`observe_error` with where it was raised (``where``: see :func:`raised_at`)."""
    obs = observe_error(exc)
    where = raised_at(exc)
    if where:
        obs["where"] = where
    return obs


def backward_error(exc: BaseException, tracker: BackwardTracker | None) -> dict[str, Any]:
    """The ``backward`` observation of a backward that raised, with the call whose backward
    node was running (``node``) when the tracker saw one."""
    obs = observe_raised(exc)
    call = tracker.raising_call() if tracker is not None else None
    if call is not None:
        obs["node"] = call
    return obs


def observe_finals(torch: Any, program: Program, values: dict[str, Any]) -> Observations:
    """Inputs at the end of the program, when an in-place call may have changed them."""
    if not any(node.get("inplace") for node in program["nodes"]):
        return {}
    return {
        f"final:{node['id']}": observe(torch, values[node["id"]])
        for node in program["nodes"]
        if node["op"] == "input" and node["id"] in values
    }
