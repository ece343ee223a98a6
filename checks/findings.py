"""Findings: one mismatch between reference and candidate, named by its first divergent call."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from .compare import Mismatch, compare
from .program import (
    Node,
    Observations,
    Program,
    as_json,
    call_args,
    is_call,
    is_op_call,
    is_step,
    target_of,
)
from .report_types import FindingEntry, FindingExtra
from .runtime.literals import node_refs, refs
from .runtime.program_types import GRAD_AFTER, IN_PROGRAM_BACKWARDS
from .runtime.region import PROGRAM_KEY
from .runtime.replay import computing_name, per_call
from .signatures import (
    describe_key,
    error_cause,
    error_signature,
    is_forward,
    mismatch_signature,
    node_of,
    precision_cause,
    role,
)
from .vocab import Kind

BACKWARD_OP = "torch.autograd.grad"
REGION_OP = "alignbot_program"  # the op of a region that failed: the candidate's hook
# kinds whose signature ends with the keyword names of the call (`` kw=[beta]``)
MISMATCH_KINDS = frozenset({Kind.VALUE, Kind.GRAD, Kind.SHAPE, Kind.DTYPE, Kind.STATE})
_KEYWORDS = re.compile(r" kw=\[[^\]]*\]$")
MAX_EXAMPLES = 5  # distinct messages a merged finding keeps
MAX_EXAMPLE_CHARS = 1000


def _no_extra() -> FindingExtra:
    return {}


@dataclass
class Finding:
    """A mismatch; ``key`` is the observation that diverged, ``node`` the call it belongs to."""

    kind: Kind
    op: str
    spec: str
    message: str
    program: Program
    key: str = ""
    node: str = ""
    count: int = 1
    extra: FindingExtra = field(default_factory=_no_extra)
    signature: str = ""  # what failed, without values: see :func:`signature`
    examples: list[str] = field(default_factory=list)  # distinct messages of merged draws
    # the candidate-side failure it shares with other findings (``raised: …``,
    # ``precision: …``; see checks/causes.py), or "" for a failure of its own
    cause: str = ""

    def __post_init__(self) -> None:
        if not self.examples:
            self.examples = [_example(self.message)]

    @property
    def identity(self) -> tuple[str, str, bool, str]:
        """The bug: its kind, op, whether a backward raised (not the same bug as its forward
        raising) and the signature of the failure."""
        return self.kind.value, self.op, self.key == "backward", self.signature

    @property
    def fingerprint(self) -> str:
        """Stable across runs and draws: a digest of :attr:`identity`."""
        kind, op, backward, sig = self.identity
        where = "|backward" if backward else ""
        return hashlib.sha256(f"{kind}|{op}{where}|{sig}".encode()).hexdigest()[:12]

    @property
    def core(self) -> tuple[str, str, bool, str]:
        """:attr:`identity` without the keyword names a mismatching call passes: what
        simplifying keeps while it drops the keyword arguments the bug does not need."""
        kind, op, backward, sig = self.identity
        if self.kind in MISMATCH_KINDS:
            sig = _KEYWORDS.sub("", sig)
        return kind, op, backward, sig

    def same_bug(self, other: Finding) -> bool:
        """``other`` shows this bug: same kind, op and signature."""
        return self.identity == other.identity

    def merge(self, other: Finding) -> None:
        """Count ``other`` (a draw of the same bug) and keep its message if it is new. The
        bug is downstream of another only if it was in every draw."""
        self.count += other.count
        if not other.extra.get("downstream_of"):
            self.extra.pop("downstream_of", None)
        for example in other.examples:
            if len(self.examples) >= MAX_EXAMPLES:
                break
            if example not in self.examples:
                self.examples.append(example)

    def to_json(self) -> FindingEntry:
        return {"fingerprint": self.fingerprint, "kind": self.kind, "op": self.op,
                "spec": self.spec, "message": self.message, "count": self.count,
                "observation": self.key, "node": self.node, "program": as_json(self.program),
                "signature": self.signature, "examples": list(self.examples),
                "cause": self.cause, **self.extra}


def _example(message: str) -> str:
    return message if len(message) <= MAX_EXAMPLE_CHARS else \
        message[:MAX_EXAMPLE_CHARS - 1] + "\u2026"


def _kind_for(key: str, mismatch: Mismatch) -> Kind:
    if mismatch.aspect in ("reference-error", "candidate-error", "missing-api"):
        return Kind(mismatch.aspect)
    if key.startswith("grad:") or GRAD_AFTER in key:
        return Kind.GRAD
    if mismatch.aspect == "shape":
        return Kind.SHAPE
    if mismatch.aspect == "dtype":
        return Kind.DTYPE
    if "!" in key or key.startswith("final:"):
        return Kind.STATE
    return Kind.VALUE


_NO_BACKWARD = {"t": "value", "value": None}


def backward_mismatch(ref: Observations, cand: Observations) -> Mismatch | None:
    """How the backward runs differ in raising (one side raised, or they raised
    differently), else None."""
    if "backward" not in ref and "backward" not in cand:
        return None
    return compare(ref.get("backward", _NO_BACKWARD), cand.get("backward", _NO_BACKWARD))


def gradient_mismatches(ref: Observations, cand: Observations,
                        rtol: float | None = None, atol: float | None = None
                        ) -> dict[str, Mismatch]:
    """The gradients that differ, by key, in the reference's order."""
    found = {}
    for key in (k for k in ref if k.startswith("grad:")):
        mismatch = compare(ref[key], cand.get(key), rtol, atol)
        if mismatch is not None:
            found[key] = mismatch
    return found


def backward_agrees(ref: Observations, cand: Observations,
                    rtol: float | None = None, atol: float | None = None) -> bool:
    """Both backward runs raise alike and give the same gradients."""
    return backward_mismatch(ref, cand) is None and not gradient_mismatches(
        ref, cand, rtol, atol)


def judge(program: Program, ref: Observations, cand: Observations, spec: str,
          rtol: float | None = None, atol: float | None = None) -> Finding | None:
    """The first divergence of :func:`judge_all`, or None."""
    found = judge_all(program, ref, cand, spec, rtol, atol)
    return found[0] if found else None


def judge_all(program: Program, ref: Observations, cand: Observations, spec: str,
              rtol: float | None = None, atol: float | None = None) -> list[Finding]:
    """What the chained run shows: the first divergence, walking the program in call order,
    then final states, then the backward. A forward divergence ends the walk (every later
    value is fed by it: :func:`alignbot.checks.calls.judge_calls` judges those calls on the
    reference's inputs instead); so does a result that lost its backward node (no
    ``grad_fn`` where the reference's has one: :func:`detached`). In the backward, the
    gradients that are None on one side only are one finding, apart from the call blamed
    for wrong gradients."""
    nodes = {n["id"]: n for n in program["nodes"]}
    finding = _finder(program, ref, cand, spec)
    for key in (k for k in ref if is_forward(k)):
        node = nodes[node_of(key)]
        mismatch = compare(ref[key], cand.get(key), rtol, atol)
        if mismatch is not None and GRAD_AFTER in key \
                and _kind_for(key, mismatch) is Kind.GRAD:
            return [_leaf_gradient(program, key, mismatch, node, finding)]
        if mismatch is not None:
            return [finding(key, mismatch, node["id"], target_of(node))]
        if backpropagates(program) and detached(ref[key], cand.get(key)):
            return [_detached(program, ref, cand, key, node, spec)]
    for key in (k for k in ref if k.startswith("final:")):
        mismatch = compare(ref[key], cand.get(key), rtol, atol)
        if mismatch is not None:
            inplace = [n for n in program["nodes"] if n.get("inplace")]
            blamed = inplace[-1] if inplace else nodes[node_of(key)]
            return [finding(key, mismatch, blamed["id"], target_of(blamed))]
    mismatch = backward_mismatch(ref, cand)
    if mismatch is not None:
        return [_backward_raised(program, ref, cand, mismatch, finding, spec)]
    if "backward" in ref:
        return []
    return judge_gradients(program, ref, cand, spec, rtol, atol)


def judge_gradients(program: Program, ref: Observations, cand: Observations, spec: str,
                    rtol: float | None = None, atol: float | None = None,
                    agreed_alone: Collection[str] | None = None) -> list[Finding]:
    """The wrong gradients of a backward that ran on both sides: those None on one side only
    (one autograd-level finding), then the rest, charged to one call by
    :func:`_blame_backward` (``agreed_alone``: see there)."""
    bad = gradient_mismatches(ref, cand, rtol, atol)
    missing = [k for k in bad if _is_none(ref[k]) != _is_none(cand.get(k))]
    for key in missing:
        del bad[key]
    found: list[Finding] = []
    if missing:
        found.append(_none_gradients(program, ref, cand, missing, spec, agreed_alone))
    if bad:
        blame = _blame_backward(program, bad, per_call(ref), per_call(cand), rtol, atol,
                                agreed_alone)
        op = target_of(blame.node)
        note = "" if blame.through is None else (
            f" (the gradient flows back through {op} ({blame.node['id']}), which wrote in "
            f"place into a value computed from {target_of(blame.through)} "
            f"({blame.through['id']}); each call agrees on its own)")
        found.append(_finder(program, ref, cand, spec)(blame.key, bad[blame.key],
                                                       blame.node["id"], op, note))
    return found


# the calls that run a backward inside the program (a training step's ``loss.backward()``)
BACKWARD_CALLS = IN_PROGRAM_BACKWARDS | {"torch.autograd.grad"}


def backpropagates(program: Program) -> bool:
    """Whether the program runs a backward: its backward plan, or a call of one."""
    return bool(program.get("backward")) or any(
        is_call(node) and node["target"] in BACKWARD_CALLS for node in program["nodes"])


def detached(ref: dict[str, Any], cand: dict[str, Any] | None) -> bool:
    """A result that requires a gradient on the reference and not on the candidate: the
    candidate's call gave it no backward node, so no gradient flows back through it."""
    return ref.get("requires_grad") is True and cand is not None \
        and cand.get("requires_grad") is False


def _detached(program: Program, ref: Observations, cand: Observations, key: str, node: Node,
              spec: str) -> Finding:
    """The first call whose result lost its backward node. It is the backward through it
    that fails (it raises, or gives None), so the finding is the backward's, at this call."""
    op = target_of(node)
    region = (cand.get(PROGRAM_KEY) or {}).get("mode") == "region"
    where = "the compiled region's " if region else ""
    message = (f"{describe_key(key)} of {op} ({node['id']}) has no grad_fn in {where}"
               f"the candidate's run, where the reference's is "
               f"{ref[key].get('grad_fn') or 'a backward node'}: the autograd graph is "
               "cut there, so no gradient flows back through it")
    return Finding(Kind.CANDIDATE_ERROR, op, spec, message, program, "backward", node["id"],
                   signature=f"{role(program, key, node['id'])} detached",
                   cause="detached: the compiled region's results have no grad_fn"
                   if region else "")


def _leaf_gradient(program: Program, key: str, mismatch: Mismatch, backward: Node,
                   finding: Callable[..., Finding]) -> Finding:
    """A leaf's ``.grad`` differs just after the program's own backward (``loss.backward()``):
    charged to the call through which the gradient reaches the leaf, the last tensor
    computation of that step (since the previous backward) that takes the leaf, or its
    module for a parameter. A leaf no call of this step takes got its gradient in an earlier
    step, where it agreed: this backward wrote into memory the candidate had handed out as
    that gradient, and the call of the step that wrote it is named. Where the calls that
    take it are of more than one API, each may have sent its share: the backward call itself
    is named. (A wrong gradient that comes from further down the graph arrives through the
    same call: the message says how the call was chosen.)"""
    leaf = key.split(GRAD_AFTER, 1)[1]
    modules = {n["id"] for n in program["nodes"] if n["op"] == "module"}
    for back, step in enumerate(reversed(_steps(program, backward["id"], modules))):
        takers = _takers(step, leaf.split(":", 1)[0], modules)
        if takers is None:  # no call of this step takes it: an earlier step's did
            continue
        if not takers:
            break
        taker = takers[-1]
        how = (f"the gradient reaches {leaf} through {target_of(taker)} ({taker['id']}), the "
               f"last call before {target_of(backward)} ({backward['id']}) that takes it"
               if back == 0 else
               f"its gradient was written through {target_of(taker)} ({taker['id']}) in an "
               f"earlier step and changed during {target_of(backward)} ({backward['id']}), "
               f"whose graph does not hold {leaf}: the candidate reused memory it had "
               "handed out as that gradient")
        return finding(key, mismatch, taker["id"], target_of(taker), f" ({how})")
    return finding(key, mismatch, backward["id"], target_of(backward))


def _steps(program: Program, backward_id: str, modules: set[str]) -> list[list[Node]]:
    """The tensor computations of each step up to ``backward_id``: the calls before each of
    the program's own backward calls, since the previous one."""
    steps: list[list[Node]] = [[]]
    for node in program["nodes"]:
        if node["id"] == backward_id:
            break
        if is_call(node) and node["target"] in IN_PROGRAM_BACKWARDS:
            steps.append([])
        elif _computes(node, modules):
            steps[-1].append(node)
    return steps


def _takers(step: list[Node], base: str, modules: set[str]) -> list[Node] | None:
    """The calls of ``step`` that take ``base`` (a value, or a module for its parameters):
    None when there are none, [] when they are of more than one API."""
    takers = [n for n in step if base in {ref.split(".")[0] if ref.split(".")[0] in modules
                                          else ref for ref in node_refs(n)}]
    if not takers:
        return None
    return takers if len({target_of(n) for n in takers}) == 1 else []


def _computes(node: Node, modules: set[str]) -> bool:
    """A tensor computation, as ``alignbot_wrap`` sees one, told from the program alone
    (:func:`alignbot.checks.runtime.replay.computes` with a method's owner known only as a module or
    not)."""
    if node["op"] == "method":
        owner = refs(call_args(node)[:1])
        if not owner or owner[0].split(".")[0] in modules:
            return False
    return node["op"] in ("invoke", "method", "call") and computing_name(node["op"], node["target"])


def _finder(program: Program, ref: Observations, cand: Observations, spec: str
            ) -> Callable[..., Finding]:
    """A maker of the findings of one judged run: ``finding(key, mismatch, node_id, op)``,
    with a ``note`` after the message."""
    def finding(key: str, mismatch: Mismatch, node_id: str, op: str, note: str = ""
                ) -> Finding:
        extra: FindingExtra = {}
        if mismatch.max_abs is not None and mismatch.max_rel is not None:
            extra = {"max_abs": mismatch.max_abs, "max_rel": mismatch.max_rel}
        message = f"{describe_key(key)}: {mismatch.message}{note}"
        kind = _kind_for(key, mismatch)
        return Finding(kind, op, spec, message, program, key, node_id, extra=extra,
                       signature=_signature(program, kind, key, node_id, ref.get(key),
                                            cand.get(key)),
                       cause=_cause(kind, mismatch, ref.get(key), cand.get(key)))

    return finding


def _is_none(obs: dict[str, Any] | None) -> bool:
    """A gradient that ``torch.autograd.grad`` gave as None (an unused input)."""
    return obs is not None and obs.get("t") == "value" and obs.get("value") is None


def _none_gradients(program: Program, ref: Observations, cand: Observations, keys: list[str],
                    spec: str, agreed_alone: Collection[str] | None = None) -> Finding:
    """Gradients that one side gives as None and the other as a tensor, as one finding whose
    signature says which side gave None and for what. It is charged to the call that broke
    the chain (:func:`_chain_break`); where none can be named, to ``torch.autograd.grad``
    itself: a behaviour of its own (None for an intermediate listed beside an output),
    whatever calls the program makes, so one finding, not one per op."""
    plan = program.get("backward")
    leaves = set((plan.get("wrt") if plan else None) or [])
    first = keys[0]
    side = "candidate" if _is_none(cand.get(first)) else "reference"
    other = "reference" if side == "candidate" else "candidate"
    what = "leaf" if first[len("grad:"):] in leaves else "intermediate"
    names = ", ".join(k[len("grad:"):] for k in keys[:6]) + (", …" if len(keys) > 6 else "")
    node = _chain_break(program, ref, cand, keys, leaves, agreed_alone or ())
    via = "" if node is None else (
        f"; the chain breaks at {target_of(node)} ({node['id']}), whose backward sends "
        f"None where the {other}'s sends a gradient")
    message = (f"torch.autograd.grad gave None on the {side} where the {other} gives a "
               f"tensor, for {len(keys)} gradient(s) w.r.t. {what} value(s) ({names}){via}")
    return Finding(Kind.GRAD, BACKWARD_OP if node is None else target_of(node), spec,
                   message, program, first, "" if node is None else node["id"],
                   signature=f"None on the {side} for an {what}" if what == "intermediate"
                   else f"None on the {side} for a {what}")


def _chain_break(program: Program, ref: Observations, cand: Observations, keys: list[str],
                 leaves: set[str], agreed: Collection[str]) -> Node | None:
    """The call whose backward stopped a gradient that the other side passes on: the last
    call whose backward node gave None for an input where the other side's gave a tensor;
    without hook data, the one call that takes the leaf whose gradient is missing (a guess
    that judging the calls alone checks: ``agreed`` holds those that agreed alone). None for
    an intermediate the hooks cannot place: ``torch.autograd.grad`` itself left it out."""
    none_side = cand if _is_none(cand.get(keys[0])) else ref
    full_side = ref if none_side is cand else cand
    mine, theirs = per_call(full_side), per_call(none_side)
    calls = [n for n in program["nodes"] if is_op_call(n)]
    for node in reversed(calls):
        full, cut = mine.get(node["id"]), theirs.get(node["id"])
        if not full or not cut or len(full.get("in") or []) != len(cut.get("in") or []):
            continue
        if any(f.get("t") == "tensor" and _is_none(c)
               for f, c in zip(full["in"], cut["in"], strict=True)):
            return node
    for key in keys:
        value = key[len("grad:"):]
        if value not in leaves:
            continue
        takers = [n for n in calls if value in node_refs(n) and n["id"] not in agreed]
        if len(takers) == 1:
            return takers[0]
    return None


def _signature(program: Program, kind: Kind, key: str, node_id: str,
               ref: dict[str, Any] | None, cand: dict[str, Any] | None) -> str:
    if kind is Kind.REFERENCE_ERROR:
        return error_signature(ref or {})
    if kind in (Kind.CANDIDATE_ERROR, Kind.MISSING_API):
        return error_signature(cand or {})
    return mismatch_signature(program, key, node_id, ref)


def _backward_raised(program: Program, ref: Observations, cand: Observations,
                     mismatch: Mismatch, finding: Callable[..., Finding], spec: str) -> Finding:
    """One side's backward raised: name the call whose backward node was running."""
    side = "reference" if mismatch.aspect == "reference-error" else "candidate"
    obs = (ref if side == "reference" else cand).get("backward") or {}
    node = backward_call(program, obs)
    if node is None:
        return finding("backward", mismatch, "", BACKWARD_OP)
    op = target_of(node)
    other = "candidate" if side == "reference" else "reference"
    theirs = (cand if side == "reference" else ref).get("backward") or {}
    cause = f"raised: {error_cause(obs)}" if side == "candidate" else ""
    ran = (f"the {other}'s raised {theirs.get('type')}" if theirs.get("t") == "error"
           else f"the {other}'s backward ran")
    message = (f"the backward of {op} ({node['id']}) raised {obs.get('type')}: "
               f"{obs.get('message')} on the {side}; {ran}")
    return Finding(_kind_for("backward", mismatch), op, spec, message, program, "backward",
                   node["id"], signature=error_signature(obs), cause=cause)


def _cause(kind: Kind, mismatch: Mismatch, ref: dict[str, Any] | None,
           cand: dict[str, Any] | None) -> str:
    """What a finding's candidate-side failure may share with others': the exception it
    raised, the dtype it returned in place of the reference's, the precision it computed
    at (:func:`alignbot.checks.signatures.precision_cause`); "" for a failure of its own."""
    if kind in (Kind.CANDIDATE_ERROR, Kind.MISSING_API) and cand and cand.get("t") == "error":
        return f"raised: {error_cause(cand)}"
    if kind is Kind.DTYPE and ref and cand and ref.get("t") == cand.get("t") == "tensor":
        return f"dtype: {ref['dtype']} returned as {cand['dtype']}"
    if kind in (Kind.VALUE, Kind.GRAD, Kind.STATE) and mismatch.aspect == "value" \
            and ref and cand:
        return precision_cause(ref, cand)
    return ""


def region_finding(program: Program, cand: Observations, spec: str) -> Finding | None:
    """The candidate's ``alignbot_program`` failed to build or run the program's forward as
    one region while its calls, run one by one, did not raise: a finding of its own (the
    compiler's), named after the hook, with what it raised. None when the region ran."""
    note = cand.get(PROGRAM_KEY) or {}
    error = note.get("error")
    if not isinstance(error, dict):
        return None
    calls = list(dict.fromkeys(target_of(n) for n in program["nodes"] if is_step(n)))
    named = ", ".join(calls[:6]) + (f" and {len(calls) - 6} more" if len(calls) > 6 else "")
    message = (f"alignbot_program raised {error.get('type')}: {error.get('message')} on the "
               f"region of {named}; called one by one, the same calls ran (their results "
               "are compared as usual)")
    return Finding(Kind.REGION_ERROR, REGION_OP, spec, message, program, PROGRAM_KEY, "",
                   signature=error_signature(error), cause=f"region: {error_cause(error)}")


_BACKWARD_NAME = re.compile(r"\b_*([A-Za-z][A-Za-z0-9]*?)Backward\d*\b"
                            r"|\b([a-z][a-z0-9_]*?)_backward\b")


def _squash(name: str) -> str:
    return name.lower().replace("_", "")


def backward_call(program: Program, obs: dict[str, Any]) -> Node | None:
    """The call whose backward raised: the node the hooks saw running (``obs["node"]``), else
    the call named by a backward function in the error (``TanhBackward0``,
    ``replication_pad2d_backward``), else None."""
    nodes = {n["id"]: n for n in program["nodes"]}
    hooked = nodes.get(str(obs.get("node", "")))
    if hooked is not None and is_op_call(hooked):
        return hooked
    text = f"{obs.get('message', '')}\n{obs.get('traceback', '')}"
    wanted = [_squash(a or b) for a, b in _BACKWARD_NAME.findall(text)]
    for name in reversed([w for w in wanted if w]):
        for node in reversed(program["nodes"]):
            if not is_op_call(node) or node.get("raises"):
                continue
            own = node.get("name")
            last = str(own) if own else str(node.get("target", "")).rsplit(".", 1)[-1]
            if _squash(last) == name:
                return node
    return None


def _grads_agree(ref: list[dict[str, Any]], cand: list[dict[str, Any]],
                 rtol: float | None, atol: float | None) -> bool:
    return all(compare(r, c, rtol, atol) is None for r, c in zip(ref, cand, strict=True))


def _node_kind(name: Any) -> str:
    return str(name or "").lstrip("_").rstrip("0123456789")


def _comparable(ref: dict[str, Any] | None, cand: dict[str, Any] | None) -> bool:
    """Both sides ran the same kind of backward node (``TanhBackward0``, or a custom
    Function's ``_TanhBackward``) with gradients of the same layout."""
    if not ref or not cand or _node_kind(ref.get("fn")) != _node_kind(cand.get("fn")):
        return False
    for part in ("out", "in"):
        mine, theirs = ref.get(part) or [], cand.get(part) or []
        if len(mine) != len(theirs):
            return False
        for r, c in zip(mine, theirs, strict=True):
            if r.get("t") != c.get("t") or r.get("shape") != c.get("shape"):
                return False
    return True


@dataclass
class Blame:
    """The call a wrong gradient is charged to, the gradient that shows it, and the call that
    was blamed first when an in-place call is charged instead (``through``)."""

    node: Node
    key: str
    through: Node | None = None


def _blame_backward(program: Program, bad: dict[str, Mismatch],
                    ref_calls: dict[str, dict[str, Any]] | None = None,
                    cand_calls: dict[str, dict[str, Any]] | None = None,
                    rtol: float | None = None, atol: float | None = None,
                    agreed_alone: Collection[str] | None = None) -> Blame:
    """The call whose output gradient agrees while an input's gradient does not: walk the
    calls from last to first, as backward does. Where both sides' hooks saw the same kind of
    backward node for a call, its own gradients decide (what flowed into its output, what it
    sent to its inputs); elsewhere the gradients w.r.t. the program's values do.

    Once the calls were judged alone (``agreed_alone``: those whose backward agreed on its
    own), a gradient blamed on one of them, or on no call at all (an input, a module), is
    charged to the last in-place call that wrote into a value computed from it: each call
    agrees alone, and writing in place, through a view or not, is what the candidate's
    autograd gets wrong."""
    node, key = _first_wrong(program, bad, ref_calls or {}, cand_calls or {}, rtol, atol,
                             agreed_alone or ())
    if agreed_alone is None or (node["id"] not in agreed_alone and is_op_call(node)):
        return Blame(node, key)
    ancestors = ancestors_of(program)
    writers = [n for n in program["nodes"] if n.get("inplace")
               and node["id"] in ancestors.get(n["id"], set())]
    return Blame(writers[-1], key, node) if writers else Blame(node, key)


def _first_wrong(program: Program, bad: dict[str, Mismatch],
                 ref_calls: dict[str, dict[str, Any]], cand_calls: dict[str, dict[str, Any]],
                 rtol: float | None, atol: float | None, agreed: Collection[str] = ()
                 ) -> tuple[Node, str]:
    """The call and the gradient that shows it: a call whose hooked node received the right
    gradient and sent a wrong one; without hook data, the last call that took a value whose
    gradient is wrong. A hooked node that agrees is no proof that its call does: it is the
    last node of the call's backward (``matmul`` of a vector ends in a ``squeeze``), so the
    last such call that took a wrong value is the guess when no other call is placed
    (``agreed``: calls that agreed alone, guessed no more). Every blamed call is judged
    alone (checks/calls.py), which confirms or clears a guess."""
    bad_ids = {k[len("grad:"):] for k in bad}
    guess: tuple[Node, str] | None = None
    for node in reversed(program["nodes"]):
        if not is_step(node):
            continue
        arg_refs = node_refs(node)
        hits = sorted(i for i in bad_ids for r in arg_refs if i == r or i.startswith(r + ":"))
        mine, theirs = ref_calls.get(node["id"]), cand_calls.get(node["id"])
        outputs = {i for i in bad_ids if node_of(i) == node["id"]}
        if mine is not None and theirs is not None and _comparable(mine, theirs):
            if (_grads_agree(mine["out"], theirs["out"], rtol, atol)
                    and not _grads_agree(mine["in"], theirs["in"], rtol, atol)):
                return node, f"grad:{hits[0]}" if hits else next(iter(bad))
            if hits and not outputs and guess is None and node["id"] not in agreed:
                guess = node, f"grad:{hits[0]}"
            continue
        if outputs:
            continue
        if hits:
            return node, f"grad:{hits[0]}"
    if guess is not None:
        return guess
    first = next(iter(bad))
    node = next(n for n in program["nodes"] if n["id"] == node_of(first[len("grad:"):]))
    return node, first


def ancestors_of(program: Program) -> dict[str, set[str]]:
    """For each node, the nodes its inputs came from, transitively: what it refers to, and
    the in-place calls that changed those values before it ran."""
    mutated: dict[str, list[str]] = {}  # value id -> in-place calls so far, in order
    ancestors: dict[str, set[str]] = {}
    for node in program["nodes"]:
        direct = {node_of(r) for r in node_refs(node)}
        seen: set[str] = set()
        for base in direct:
            seen.add(base)
            seen |= ancestors.get(base, set())
            for writer in mutated.get(base, []):
                seen.add(writer)
                seen |= ancestors.get(writer, set())
        ancestors[node["id"]] = seen
        if node.get("inplace"):
            args = call_args(node)[1:] if node["op"] == "invoke" else call_args(node)
            for ref in refs(args[:1]):
                mutated.setdefault(node_of(ref), []).append(node["id"])
    return ancestors
