"""Judge every call of a program on its own, so that no bug hides behind another.

The chained run (each call fed what the candidate computed before it) shows the first
divergence; every call after it sees inputs that already differ, and a call whose backward
received wrong upstream gradients was never judged either. Each such call is replayed alone
on the candidate, fed the reference's values (:func:`checks.isolate.slice_calls`), and
judged against the reference's run of the same slice. That run is the control: where it does
not reproduce what the reference's chained run computed at that call (random numbers,
aliasing through views), the slice is no evidence and is dropped.

Findings are then marked with what diverged upstream of them in the same draw
(``downstream_of``): such a finding is a bug of its own (its call was judged on the
reference's inputs), shown after the root causes.
"""

from __future__ import annotations

import re
from typing import Any

from .candidate import CandidateProcess, RunOutcome
from .compare import compare
from .findings import (
    BACKWARD_OP,
    MISMATCH_KINDS,
    Finding,
    Kind,
    judge_all,
    mask,
    mismatch_signature,
    node_of,
    role,
)
from .isolate import Sliced, slice_calls
from .program import Observations, Program, reference_observations
from .runtime.replay import AUTOGRAD_KEY
from .spec import Spec

MAX_SLICES = 12  # calls judged alone per program: a draw is a handful of calls
_NOT_CALLS = ("input", "module", "getattr")
_ID = re.compile(r"\bv\d+\b")


def outcome_finding(spec: Spec, program: Program, outcome: RunOutcome) -> Finding:
    """A finding for a worker that crashed or hung, named by the node it was running."""
    nodes = program["nodes"]
    index = outcome.node_index
    key = ""
    if 0 <= index < len(nodes):
        op, node = nodes[index].get("target", "input"), nodes[index]["id"]
    elif len(nodes) < index <= 2 * len(nodes):  # in the backward node of call index-len-1
        call = nodes[index - len(nodes) - 1]
        op, node, key = call.get("target", "input"), call["id"], "backward"
    elif index >= len(nodes):
        op, node, key = BACKWARD_OP, "", "backward"
    else:
        op, node = "worker", ""
    kind = Kind.CANDIDATE_TIMEOUT if outcome.died == "timeout" else Kind.CANDIDATE_CRASH
    detail = outcome.detail
    signature = mask(detail.split("; stderr:", 1)[0])  # how it died, not what it printed
    if key and node:
        detail = f"in the backward of {op} ({node}): {detail}"
    return Finding(kind, op, spec.name, detail, program, key=key, node=node,
                   signature=signature)


def judge_program(spec: Spec, program: Program, ref: Observations, outcome: RunOutcome,
                  candidate: CandidateProcess, want: Finding | None = None) -> list[Finding]:
    """Every bug one draw shows: the chained run's, then each call judged alone where the
    chained run could not clear it. With ``want`` (shrinking asks about one bug) only what
    can show that bug is replayed."""
    if outcome.observations is None:
        found, cand = [outcome_finding(spec, program, outcome)], {}
    else:
        cand = outcome.observations
        found = judge_all(program, ref, cand, spec.name, spec.rtol, spec.atol)
    if not found:
        return []
    if want is not None and any(f.core == want.core for f in found):
        return found
    only = want.op if want is not None else None
    found = judge_calls(spec, program, ref, cand, found, candidate, only)
    mark_downstream(program, found)
    return found


def judge_calls(spec: Spec, program: Program, ref: Observations, cand: Observations,
                found: list[Finding], candidate: CandidateProcess, only: str | None = None
                ) -> list[Finding]:
    """``found`` (the chained run's findings) with the findings of the calls the chained run
    did not clear, each judged alone. A wrong gradient the chained run blamed on a call is
    judged alone too: when that call's backward agrees on its own and another finding of the
    draw lies downstream of it (where its wrong gradient came from), it is dropped as a
    consequence."""
    nodes = program["nodes"]
    blamed = {f.node for f in found}
    to_confirm = {f.node: f for f in found if f.kind is Kind.GRAD and f.node
                  and not f.extra.get("judged_alone")}
    backward_agrees = _backward_agrees(ref, cand, spec)
    ref_calls, cand_calls = _per_call(ref), _per_call(cand)
    wanted: dict[int, tuple[bool, bool]] = {}
    for index, node in enumerate(nodes):
        if node["op"] in _NOT_CALLS or (node["id"] in blamed and node["id"] not in to_confirm):
            continue
        if only is not None and node.get("target") != only:
            continue
        inplace = bool(node.get("inplace"))
        forward_ok = _forward_agrees(node["id"], ref, cand, spec)
        backward = (bool(program.get("backward")) and not backward_agrees
                    and _gets_gradient(node, ref)
                    and not _call_agrees(ref_calls.get(node["id"]),
                                         cand_calls.get(node["id"]), spec))
        if node["id"] in to_confirm:
            backward = True
        elif forward_ok and not backward:
            continue
        wanted[index] = (not inplace, backward)
        if len(wanted) >= MAX_SLICES:
            break
    if not wanted:
        return found
    alone: list[Finding] = []
    judged: set[str] = set()
    for index, piece in slice_calls(program, wanted, ref).items():
        new = _judge_alone(spec, program, nodes[index], piece, ref, candidate)
        if new is None:
            continue
        judged.add(nodes[index]["id"])
        blamed_here = to_confirm.get(nodes[index]["id"])
        if blamed_here is not None:  # the chained finding stands for this call's own bug
            confirmed = [f for f in new if f.kind is Kind.GRAD and f.node == blamed_here.node]
            if confirmed:
                blamed_here.extra["judged_alone"] = True
            new = [f for f in new if f not in confirmed]
        alone += new
    return _without_consequences(program, ref, found, alone, to_confirm, judged) + alone


def _without_consequences(program: Program, ref: Observations, found: list[Finding],
                          alone: list[Finding], to_confirm: dict[str, Finding],
                          judged: set[str]) -> list[Finding]:
    """The chained findings, less the wrong gradients blamed on a call that was judged
    alone and agreed: dropped when another finding of the draw lies downstream of it (the
    wrong gradient came from there), else charged to the last in-place call that wrote into
    a value computed from it (each call agrees alone; writing in place, through a view or
    not, is what the candidate's autograd gets wrong)."""
    ancestors = upstream_of(program)
    everything = found + alone
    kept = []
    calls = {n["id"] for n in program["nodes"] if n["op"] not in _NOT_CALLS}
    for finding in found:
        node = finding.node
        # blamed on a call that agrees alone, or on no call at all (an input, a module)
        unconfirmed = node in judged or node not in calls
        if node in to_confirm and unconfirmed and not finding.extra.get("judged_alone"):
            below = [g for g in everything if g is not finding and g.node
                     and node in ancestors.get(g.node, set())]
            if below:
                continue
            writers = [n for n in program["nodes"] if n.get("inplace")
                       and node in ancestors.get(n["id"], set())]
            if writers:
                finding = _charged_to(program, ref, finding, writers[-1])
        kept.append(finding)
    return kept


def _charged_to(program: Program, ref: Observations, finding: Finding,
                writer: dict[str, Any]) -> Finding:
    op = str(writer.get("target", "input"))
    message = (f"{finding.message} (the gradient flows back through {op} ({writer['id']}), "
               f"which wrote in place into a value computed from {finding.op} "
               f"({finding.node}); each call agrees on its own)")
    return Finding(finding.kind, op, finding.spec, message, program, finding.key,
                   writer["id"], extra=dict(finding.extra),
                   signature=mismatch_signature(program, finding.key, writer["id"],
                                                ref.get(finding.key)))


def _judge_alone(spec: Spec, program: Program, node: dict[str, Any], piece: Sliced,
                 ref: Observations, candidate: CandidateProcess) -> list[Finding] | None:
    """The call's findings on its own, or None when the slice is no evidence."""
    try:
        alone = reference_observations(piece.program)
    except Exception:  # the reference cannot run the slice: no evidence either way
        return None
    call = piece.program["nodes"][-1]["id"]
    if not _control(ref, alone, call, node["id"], spec):
        return None
    outcome = candidate.run(piece.program)
    if outcome.observations is None:
        found = [outcome_finding(spec, piece.program, outcome)]
    elif not _scaffolding_agrees(piece.program, call, alone, outcome.observations, spec):
        return None  # the candidate's views or clone of the inputs already differ
    else:
        found = judge_all(piece.program, alone, outcome.observations, spec.name,
                          spec.rtol, spec.atol)
    out = []
    for finding in found:
        if finding.node != call and finding.kind is Kind.GRAD and finding.op != BACKWARD_OP:
            # a slice is the call and its scaffolding (literal inputs, a clone): a wrong
            # gradient in it is the call's
            finding = Finding(finding.kind, str(node.get("target")), finding.spec,
                              finding.message, piece.program, finding.key, call,
                              extra=finding.extra, signature=mismatch_signature(
                                  piece.program, finding.key, call, alone.get(finding.key)))
        if finding.node == call or finding.op == BACKWARD_OP:
            out.append(_mapped(finding, program, piece))
    return out


def _scaffolding_agrees(sliced: Program, call: str, alone: Observations,
                        cand: Observations, spec: Spec) -> bool:
    """Both sides computed the same before the call: its literal inputs and the views or
    clone that rebuild what the call received."""
    return all(_forward_agrees(n["id"], alone, cand, spec) for n in sliced["nodes"]
               if n["id"] != call)


def _control(ref: Observations, alone: Observations, call: str, original: str,
             spec: Spec) -> bool:
    """The reference computes the same at this call alone as in the whole program."""
    keys = [k for k in alone if node_of(k) == call and not k.startswith(("grad:", "final:"))]
    for key in keys:
        mine = ref.get(original + key[len(call):])
        if mine is None or compare(mine, alone[key], spec.rtol, spec.atol) is not None:
            return False
    return bool(keys)


def _mapped(finding: Finding, program: Program, piece: Sliced) -> Finding:
    """A slice's finding named in the original program's ids."""
    def rename(text: str) -> str:
        return _ID.sub(lambda m: piece.back.get(m.group(), m.group()), text)

    key, node = rename(finding.key), piece.back.get(finding.node, finding.node)
    signature = finding.signature
    if finding.kind in MISMATCH_KINDS and node:
        # what differs, named in the original call (a slice may route an argument through
        # a clone); the dtype and keywords are the same
        mine, theirs = role(piece.program, finding.key, finding.node), role(program, key, node)
        if signature.startswith(mine + " "):
            signature = theirs + signature[len(mine):]
    extra = {**finding.extra, "judged_alone": True}
    return Finding(finding.kind, finding.op, finding.spec, rename(finding.message), program,
                   key, node, extra=extra, signature=signature)


def _forward_agrees(node_id: str, ref: Observations, cand: Observations, spec: Spec) -> bool:
    keys = [k for k in ref if node_of(k) == node_id
            and not k.startswith(("grad:", "final:")) and k not in ("backward", AUTOGRAD_KEY)]
    return all(compare(ref[k], cand.get(k), spec.rtol, spec.atol) is None for k in keys)


def _backward_agrees(ref: Observations, cand: Observations, spec: Spec) -> bool:
    nothing = {"t": "value", "value": None}
    if ("backward" in ref or "backward" in cand) and compare(
            ref.get("backward", nothing), cand.get("backward", nothing)) is not None:
        return False
    return all(compare(ref[k], cand.get(k), spec.rtol, spec.atol) is None
               for k in ref if k.startswith("grad:"))


def _gets_gradient(node: dict[str, Any], ref: Observations) -> bool:
    """The reference's chained run sent a gradient into this call's output (for an in-place
    call, whose result is the tensor it wrote into: that tensor is a floating one)."""
    if node.get("inplace"):
        obs = ref.get(node["id"]) or {}
        return obs.get("t") == "tensor" and str(obs.get("dtype", "")).startswith(
            ("float", "bfloat", "complex"))
    return any(key.startswith("grad:") and node_of(key) == node["id"]
               and ref[key].get("t") == "tensor" for key in ref)


def _per_call(obs: Observations) -> dict[str, dict[str, Any]]:
    data = obs.get(AUTOGRAD_KEY) or {}
    calls = data.get("calls") if isinstance(data, dict) else None
    return calls if isinstance(calls, dict) else {}


def _call_agrees(mine: dict[str, Any] | None, theirs: dict[str, Any] | None,
                 spec: Spec) -> bool:
    """Both sides' backward node of this call received and sent the same gradients."""
    if not mine or not theirs:
        return False
    for part in ("out", "in"):
        ours, other = mine.get(part) or [], theirs.get(part) or []
        if len(ours) != len(other) or any(
                compare(r, c, spec.rtol, spec.atol) is not None
                for r, c in zip(ours, other, strict=True)):
            return False
    return True


def upstream_of(program: Program) -> dict[str, set[str]]:
    """For each node, the nodes its inputs came from, transitively: what it refers to, and
    the in-place calls that changed those values before it ran."""
    mutated: dict[str, list[str]] = {}  # value id -> in-place calls so far, in order
    ancestors: dict[str, set[str]] = {}
    for node in program["nodes"]:
        direct = {node_of(r) for r in _refs(node.get("args", []))
                  + _refs(node.get("kwargs", {}))}
        seen: set[str] = set()
        for base in direct:
            seen.add(base)
            seen |= ancestors.get(base, set())
            for writer in mutated.get(base, []):
                seen.add(writer)
                seen |= ancestors.get(writer, set())
        ancestors[node["id"]] = seen
        if node.get("inplace"):
            args = node.get("args", [])[1:] if node["op"] == "invoke" else node.get("args", [])
            for ref in _refs(args[:1]):
                mutated.setdefault(node_of(ref), []).append(node["id"])
    return ancestors


def mark_downstream(program: Program, found: list[Finding]) -> None:
    """``downstream_of`` on each finding whose call took a value computed, in this draw,
    from a call that has a finding of its own."""
    ancestors = upstream_of(program)
    for finding in found:
        above = ancestors.get(finding.node, set())
        roots = [g for g in found if g is not finding and g.node and g.node in above]
        if roots:
            finding.extra["downstream_of"] = [
                {"kind": g.kind.value, "op": g.op, "node": g.node} for g in roots]


def _refs(value: Any) -> list[str]:
    if isinstance(value, dict):
        if "ref" in value:
            return [value["ref"]]
        return [r for v in value.values() for r in _refs(v)]
    if isinstance(value, list):
        return [r for v in value for r in _refs(v)]
    return []
