"""Replay a Program's calls as one region, handed to the candidate's ``alignbot_program`` hook.

A candidate that defines ``alignbot_program(forward)`` (a compiler: ``torch.compile``) gets
the whole forward of a drawn program as one function, so it can fuse across calls, where
compilers go wrong, instead of seeing each call alone. ``forward(tensors)`` takes the
program's input tensors (and gradient probes, below) by id and returns every value it
computed by id, so each is still observed and compared as in the call-by-call replay; the
backward then runs through whatever the hook returned (a compiled backward).

Gradients of intermediates (the backward plan's ``intermediates``) need the intermediate to be
a node of the autograd graph the outputs hang from; inside a compiled region it is not. Each
such value ``y`` is therefore used downstream as ``y - p``, with ``p`` a zero leaf of y's
shape: the gradient of ``p`` is minus that of ``y``, and the subtraction of +0 changes no
value, not even the sign of a zero. A probe stands between two calls, which would keep a
compiler from rewriting the pair (``mm`` + ``add`` into ``addmm``), so the probed region is a
second run, for those gradients only: the values and the leaves' gradients come from the
region as drawn. A region has no backward node per call: it yields no ``autograd``
observation (each call's backward is judged alone when the gradients differ), a crash inside
it names no call, and which gradients are None (no output depends on the value) is taken
from the call-by-call replay, since a compiled region gives every tensor it takes a gradient.

What one region cannot hold runs call by call instead, and the candidate's observations say
so (``program``: ``{"t": "program", "mode": "eager", "reason": ...}``; the judge reads only
the reference's keys, so the note is never compared): a call expected to raise, an in-place
call (its ``!self`` and the inputs' final values are observed after that call, not after the
region), a module built from a computed value or called twice (its state is observed after
each call), and a region that raised (the eager replay then shows which call raises, if any;
a compiler that fails where eager does not is named in the reason), and a program whose own
``backward()`` leaves gradients that a later call changes (a second backward, a
``zero_grad()``: the leaves' gradients are observed after each backward call).
Data-dependent shapes need nothing here: a compiler splits its region itself (graph breaks).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

try:  # imported as part of the ``checks`` package in the engine
    from .literals import ref_of, refs
    from .program_types import IN_PROGRAM_BACKWARDS, is_call, is_step
    from .replay import (
        Hooks,
        Observations,
        backward_error,
        bind_result,
        observe_raised,
        observe_result,
        replay,
        run_backward,
        run_node,
    )
    from .values import is_tensor
except ImportError:  # imported as a top-level module inside the worker
    from literals import ref_of, refs  # type: ignore[no-redef]
    from program_types import (  # type: ignore[no-redef]
        IN_PROGRAM_BACKWARDS,
        is_call,
        is_step,
    )
    from replay import (  # type: ignore[no-redef]
        Hooks,
        Observations,
        backward_error,
        bind_result,
        observe_raised,
        observe_result,
        replay,
        run_backward,
        run_node,
    )
    from values import is_tensor  # type: ignore[no-redef]

if TYPE_CHECKING:
    from .program_types import Node, Program

PROGRAM_KEY = "program"
Forward = Callable[[dict[str, Any]], dict[str, Any]]


class RegionFailed(Exception):
    """The region raised: the program is replayed call by call instead. ``error`` is the
    observed exception when the candidate's hook or the region it returned raised (None
    when the probes alignbot adds are to blame)."""

    def __init__(self, reason: str, error: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.error = error


def eager_reason(program: Program) -> str | None:
    """Why this program cannot run as one region, or None when it can."""
    nodes = program["nodes"]
    calls = [n for n in nodes if is_step(n)]
    if not calls:
        return "no calls"
    if any(n.get("raises") for n in nodes):
        return "a call is expected to raise"
    if any(n.get("inplace") for n in nodes):
        return "an in-place call"
    if any(n.get("writes") for n in nodes):
        return "a call that writes into its argument"
    computed = {n["id"] for n in calls}
    for node in nodes:
        if node["op"] == "module" and any(
                name.split(".")[0] in computed
                for name in refs([node.get("args", []), node.get("kwargs", {})])):
            return "a module built from a computed value"
    invoked = [ref_of(n["args"][0]) for n in calls if n["op"] == "invoke"]
    if len(invoked) != len(set(invoked)):
        return "a module called twice"
    backwards = [i for i, n in enumerate(nodes)
                 if is_call(n) and n["target"] in IN_PROGRAM_BACKWARDS]
    if len(backwards) > 1 or (backwards and any(
            n.get("name") == "zero_grad" for n in nodes[backwards[0] + 1:])):
        # the leaves' gradients are observed after each backward; after a region, only the
        # last ones could be
        return "gradients that a later call of the program changes"
    return None


def note(mode: str, reason: str = "", error: dict[str, Any] | None = None
         ) -> dict[str, dict[str, Any]]:
    """How the program ran; ``error``: what the region raised while the same calls ran call
    by call without raising (the candidate's compiler failed, not an op)."""
    entry: dict[str, Any] = {"t": "program", "mode": mode, "reason": reason}
    if error is not None:
        entry["error"] = error
    return {PROGRAM_KEY: entry}


def region_of(program: Program, fixed: dict[str, Any], probes: dict[str, Any],
              run: Callable[[Any, dict[str, Any]], Any],
              bind: Callable[[str, Any, dict[str, Any]], None]) -> Forward:
    """The program's calls as one function of its tensors (inputs and probes, by id).
    ``fixed`` holds what was built before the region (modules, non-tensor inputs); ``run``
    runs one node on a values dict, ``bind`` stores its result (and a tuple's items)."""
    calls = _calls(program)

    def forward(tensors: dict[str, Any]) -> dict[str, Any]:
        values = {**fixed, **tensors}
        for node in calls:
            bind(node["id"], run(node, values), values)
            mine = f"probe:{node['id']}"
            if mine in probes or any(k.startswith(mine + ".") for k in probes):
                _probe(node["id"], values, tensors)
        return {k: v for k, v in values.items() if k not in fixed and k not in tensors}

    return forward


def _probe(node_id: str, values: dict[str, Any], tensors: dict[str, Any]) -> None:
    """``y - p`` in place of each probed value of this node (and of its tuple's items)."""
    whole = values[node_id]
    if f"probe:{node_id}" in tensors:
        values[node_id] = whole - tensors[f"probe:{node_id}"]
        return
    if not isinstance(whole, (tuple, list)):
        return
    items = list(whole)
    for index in range(len(items)):
        key = f"{node_id}.{index}"
        if f"probe:{key}" in tensors:
            items[index] = items[index] - tensors[f"probe:{key}"]
            values[key] = items[index]
    values[node_id] = type(whole)(items)


def make_probes(torch: Any, like: dict[str, Any]) -> dict[str, Any]:
    """A zero leaf (requiring its gradient) per intermediate, shaped like the dry run's value."""
    probes = {}
    for key, value in like.items():
        probe = torch.zeros(value.shape, dtype=value.dtype, device=value.device)
        probes[f"probe:{key}"] = probe.requires_grad_(True)
    return probes


def _calls(program: Program) -> list[Node]:
    return [n for n in program["nodes"] if is_step(n)]


def replay_program(torch: Any, program: Program, hooks: Hooks,
                   progress: Callable[[int], None] | None = None) -> Observations:
    """:func:`alignbot.checks.runtime.replay.replay`, with the forward as one region where the
    candidate has a program hook and the program allows it."""
    if hooks.program is None:
        return replay(torch, program, hooks, progress)
    reason = eager_reason(program)
    error = None
    if reason is None:
        try:
            return _replay_region(torch, program, hooks, progress)
        except RegionFailed as exc:
            reason, error = str(exc), exc.error
    observations = replay(torch, program, hooks, progress)
    if error is not None and any(obs.get("t") == "error" for obs in observations.values()):
        error = None  # a call raises call by call too: that call's finding says it
    observations.update(note("eager", reason, error))
    return observations


def _replay_region(torch: Any, program: Program, hooks: Hooks,
                   progress: Callable[[int], None] | None) -> Observations:
    values: dict[str, Any] = {}
    for index, node in enumerate(program["nodes"]):
        if not is_step(node):
            if progress is not None:
                progress(index)
            values[node["id"]] = run_node(torch, node, values, hooks)
    built = dict(values)
    # the probed run draws the same random numbers (a framework without the call: no matter)
    rng = torch.get_rng_state() if hasattr(torch, "get_rng_state") else None
    if progress is not None:
        progress(-1)  # a crash inside the region is no one call's
    values.update(_run_region(torch, program, hooks, built, {}))
    observations: Observations = {}
    for node in program["nodes"]:
        observations.update(observe_result(torch, node, values[node["id"]], values))
    if progress is not None:
        progress(len(program["nodes"]))
    plan = program.get("backward")
    inner = list(plan.get("intermediates") or []) if plan else []
    try:
        observations.update(run_backward(torch, _only(program, "wrt"), values, hooks.device))
    except Exception as exc:
        observations["backward"] = backward_error(exc, None)
        inner = []  # as call by call: the backward stops at its first raise
    if inner:
        # the intermediates' gradients: the region once more, each used through a probe;
        # where that fails, the probes are to blame, not the candidate: call by call instead
        if rng is not None:
            torch.set_rng_state(rng)
        probes = make_probes(torch, {key: values[key] for key in inner})
        probed = {**built, **_run_region(torch, program, hooks, built, probes)}
        try:
            observations.update(run_backward(torch, _only(program, "intermediates"), probed,
                                             hooks.device, probes=probes))
        except Exception as exc:
            raise RegionFailed(f"the probed backward raised {_one_line(exc)}") from exc
    _none_as_eager(torch, program, hooks, observations)
    observations.update(note("region"))
    return observations


def _none_as_eager(torch: Any, program: Program, hooks: Hooks,
                   observations: Observations) -> None:
    """A compiled region is one autograd node, so every tensor it takes gets a gradient:
    zeros where no output depends on it, where the program's own graph gives None. Which
    gradients are None is the graph's shape, not a value the region computes: the
    call-by-call replay says, and a gradient of zeros there becomes None (any other value
    stays, to be judged)."""
    zeros = [k for k, obs in observations.items() if k.startswith("grad:")
             and obs.get("t") == "tensor" and not obs["data"].any()]
    if not zeros:
        return
    eager = replay(torch, program, Hooks(hooks.overrides, hooks.wrap, hooks.device,
                                         wrap_also=hooks.wrap_also))
    for key in zeros:
        if eager.get(key) == {"t": "value", "value": None}:
            observations[key] = eager[key]


def _run_region(torch: Any, program: Program, hooks: Hooks, built: dict[str, Any],
                probes: dict[str, Any]) -> dict[str, Any]:
    """The values the region computes, from what was ``built`` before it."""
    assert hooks.program is not None
    fixed = {k: v for k, v in built.items() if not is_tensor(torch, v)}
    forward = region_of(program, fixed, probes,
                        lambda node, vals: run_node(torch, node, vals, hooks),
                        lambda key, result, vals: bind_result(torch, key, result, vals))
    try:
        computed = hooks.program(forward)({**tensors_of(torch, built), **probes})
        if not isinstance(computed, dict):
            raise TypeError(f"the function alignbot_program returned gave a "
                            f"{type(computed).__name__}: it must return what forward returns")
        missing = [n["id"] for n in _calls(program) if n["id"] not in computed]
        if missing:
            raise TypeError(f"the function alignbot_program returned gave no value for "
                            f"{', '.join(missing[:5])}: it must return what forward returns")
    except Exception as exc:
        error = None if probes else region_error(exc)
        raise RegionFailed(f"the region raised {_one_line(exc)}", error) from exc
    # what the region computed, never what it was given (a hook cannot replace an input)
    return {k: v for k, v in computed.items() if k not in built and k not in probes}


def region_error(exc: BaseException) -> dict[str, Any]:
    """The observation of what a region raised, with the last frames of its traceback."""
    obs = observe_raised(exc)
    obs["traceback"] = traceback.format_exc(limit=-8)[-4000:]
    return obs


def _only(program: Program, part: str) -> Program:
    """The program with a backward plan of its leaves (``wrt``) or its intermediates only."""
    plan = program.get("backward")
    if not plan:
        return program
    wrt = plan["wrt"] if part == "wrt" else list(plan.get("intermediates") or [])
    return {**program, "backward": {**plan, "wrt": wrt, "intermediates": []}}


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def tensors_of(torch: Any, values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if is_tensor(torch, v)}
