"""Judge every call of a program on its own, so that no bug hides behind another.

The chained run (each call fed what the candidate computed before it) shows the first
divergence; every call after it sees inputs that already differ, and a call whose backward
received wrong upstream gradients was never judged either. Each such call is replayed alone
on the candidate, fed the reference's values (:func:`alignbot.checks.isolate.slice_calls`), and
judged against the reference's run of the same slice. That run is the control: where it does
not reproduce what the reference's chained run computed at that call (random numbers,
aliasing through views), the slice is no evidence and is dropped.

Findings are then marked with what diverged among their ancestors in the same draw
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
    ancestors_of,
    backward_agrees,
    judge_all,
    judge_gradients,
    region_finding,
)
from .isolate import Sliced, slice_calls
from .program import (
    Node,
    Observations,
    Program,
    is_op_call,
    reference_observations,
    target_of,
)
from .report_types import FindingExtra
from .runtime.replay import per_call
from .signatures import is_forward, mask, mismatch_signature, node_of, role
from .spec import Spec

MAX_SLICES = 12  # calls judged alone per program: a draw is a handful of calls
_ID = re.compile(r"\bv\d+\b")


def outcome_finding(spec: Spec, program: Program, outcome: RunOutcome) -> Finding:
    """A finding for a worker that crashed or hung, named by the node it was running."""
    nodes = program["nodes"]
    index = outcome.node_index
    key = ""
    if 0 <= index < len(nodes):
        op, node = target_of(nodes[index]), nodes[index]["id"]
    elif len(nodes) < index <= 2 * len(nodes):  # in the backward node of call index-len-1
        call = nodes[index - len(nodes) - 1]
        op, node, key = target_of(call), call["id"], "backward"
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
        region = region_finding(program, cand, spec.name)
        if region is not None:
            found.append(region)
    if not found:
        return []
    if want is not None and any(f.core == want.core for f in found):
        return found
    only = want.op if want is not None else None
    found = judge_calls(spec, program, ref, cand, found, candidate, only)
    mark_descendants(program, found)
    return found


def judge_calls(spec: Spec, program: Program, ref: Observations, cand: Observations,
                found: list[Finding], candidate: CandidateProcess, only: str | None = None
                ) -> list[Finding]:
    """``found`` (the chained run's findings) with the findings of the calls the chained run
    did not clear, each judged alone. A wrong gradient the chained run blamed on a call is
    judged alone too: when that call's backward agrees on its own and another finding of the
    draw lies downstream of it or of the value whose gradient is wrong (where its wrong
    gradient came from), it is dropped as a consequence. Where the chained run could not
    place a backward failure on a call it confirmed (a guess that agreed alone, an input,
    ``torch.autograd.grad`` itself), every call that gets a gradient is judged alone."""
    blamed = {f.node for f in found}
    to_confirm = {f.node: f for f in found if f.kind is Kind.GRAD and f.node
                  and not f.extra.get("judged_alone")}
    agrees = backward_agrees(ref, cand, spec.rtol, spec.atol)
    wanted = _wanted(spec, program, ref, cand, blamed, to_confirm, only, agrees)
    alone: list[Finding] = []
    judged: set[str] = set()
    _judge_slices(spec, program, ref, candidate, wanted, to_confirm, alone, judged)
    agreed = judged - {n for n, f in to_confirm.items() if f.extra.get("judged_alone")}
    if _unplaced(program, found, agreed) and not agrees:
        done = {program["nodes"][index]["id"] for index in wanted}
        more = _wanted(spec, program, ref, cand, blamed | done, {}, only, agrees,
                       every=True, budget=MAX_SLICES - len(wanted))
        _judge_slices(spec, program, ref, candidate, more, {}, alone, judged)
        agreed = judged - {n for n, f in to_confirm.items() if f.extra.get("judged_alone")}
    if not judged:
        return found
    return _without_consequences(spec, program, ref, cand, found, alone, to_confirm,
                                 agreed) + alone


def _wanted(spec: Spec, program: Program, ref: Observations, cand: Observations,
            skip: set[str], to_confirm: dict[str, Finding], only: str | None, agrees: bool,
            every: bool = False, budget: int = MAX_SLICES) -> dict[int, tuple[bool, bool]]:
    """The calls to judge alone, by index: (judge the forward, judge the backward). Those
    whose forward differs, those whose backward the hooks do not clear (``every``: whose
    result needs a gradient at all), and the blamed calls to confirm."""
    ref_calls, cand_calls = per_call(ref), per_call(cand)
    forward = _forward_keys(ref)
    wanted: dict[int, tuple[bool, bool]] = {}
    for index, node in enumerate(program["nodes"]):
        if len(wanted) >= budget:
            break
        if not is_op_call(node) or (node["id"] in skip and node["id"] not in to_confirm):
            continue
        if only is not None and node.get("target") != only:
            continue
        forward_ok = _agrees_at(node["id"], forward, ref, cand, spec)
        if every:
            backward = bool(program.get("backward")) and _wants_gradient(node, ref)
        else:
            backward = (bool(program.get("backward")) and not agrees
                        and _gets_gradient(node, ref)
                        and not _call_agrees(ref_calls.get(node["id"]),
                                             cand_calls.get(node["id"]), spec))
        if node["id"] in to_confirm:
            backward = True
        elif forward_ok and not backward:
            continue
        wanted[index] = (not node.get("inplace"), backward)
    return wanted


def _judge_slices(spec: Spec, program: Program, ref: Observations,
                  candidate: CandidateProcess, wanted: dict[int, tuple[bool, bool]],
                  to_confirm: dict[str, Finding], alone: list[Finding], judged: set[str]
                  ) -> None:
    """Judge each wanted call alone: its findings go to ``alone``, its id to ``judged``
    when the slice was evidence; a blamed call that shows its wrong gradient alone marks
    the chained finding ``judged_alone``."""
    if not wanted:
        return
    nodes = program["nodes"]
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


def _unplaced(program: Program, found: list[Finding], agreed: set[str]) -> bool:
    """A backward failure of the chained run that no call judged alone confirmed: charged to
    ``torch.autograd.grad``, to no call (an input, a module), or to a guess that agreed
    alone."""
    calls = {n["id"] for n in program["nodes"] if is_op_call(n)}
    for finding in found:
        backward = finding.kind is Kind.GRAD or finding.key == "backward"
        if not backward or finding.extra.get("judged_alone"):
            continue
        if finding.op == BACKWARD_OP or finding.node not in calls or finding.node in agreed:
            return True
    return False


def _without_consequences(spec: Spec, program: Program, ref: Observations,
                          cand: Observations, found: list[Finding], alone: list[Finding],
                          to_confirm: dict[str, Finding], agreed: set[str]) -> list[Finding]:
    """The chained findings, less the backward failures that a call judged alone explains:
    a wrong gradient blamed on a call that agreed alone (``agreed``), or on no call at all
    (an input, a module), is dropped when another finding of the draw lies downstream of
    that call or of the value whose gradient is wrong (the wrong gradient came from there),
    else blamed again knowing which calls agreed alone
    (:func:`alignbot.checks.findings.judge_gradients`); one charged to ``torch.autograd.grad`` is
    dropped when a call alone shows a backward failure of that form."""
    ancestors = ancestors_of(program)
    everything = found + alone
    kept = []
    calls = {n["id"] for n in program["nodes"] if is_op_call(n)}
    for finding in found:
        node = finding.node
        if finding.op == BACKWARD_OP and not node and _explained(finding, alone):
            continue
        if node in to_confirm and (node in agreed or node not in calls):
            value = node_of(finding.key[len("grad:"):]) if finding.key.startswith("grad:") \
                else node
            below = [g for g in everything if g is not finding and g.node
                     and {node, value} & ancestors.get(g.node, set())]
            if below:
                continue
            again = [f for f in judge_gradients(program, ref, cand, spec.name, spec.rtol,
                                                spec.atol, agreed)
                     if _none_form(f) == _none_form(finding)]
            finding = again[0] if again else finding
            if any(g.node == finding.node and g.kind is finding.kind for g in alone):
                continue  # the call alone shows it: that finding stands for it
            if finding.op == BACKWARD_OP and _explained(finding, alone):
                continue
        kept.append(finding)
    return kept


def _none_form(finding: Finding) -> bool:
    """A finding of gradients that are None on one side (not of wrong values)."""
    return finding.signature.startswith("None on the ")


def _explained(finding: Finding, alone: list[Finding]) -> bool:
    """A call judged alone shows a backward failure of the same form as ``finding``: a
    gradient None on one side, a wrong one, or a backward that raised."""
    for other in alone:
        if other.op == BACKWARD_OP or not other.node:
            continue
        if finding.key == "backward" and other.key == "backward":
            return True
        if finding.kind is Kind.GRAD and other.kind is Kind.GRAD \
                and _none_form(finding) == _none_form(other):
            return True
    return False


def _judge_alone(spec: Spec, program: Program, node: Node, piece: Sliced,
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
    forward = _forward_keys(alone)
    return all(_agrees_at(n["id"], forward, alone, cand, spec) for n in sliced["nodes"]
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
    extra: FindingExtra = {**finding.extra, "judged_alone": True}
    return Finding(finding.kind, finding.op, finding.spec, rename(finding.message), program,
                   key, node, extra=extra, signature=signature)


def _forward_keys(ref: Observations) -> dict[str, list[str]]:
    """The reference's forward observations, by the node they belong to."""
    keys: dict[str, list[str]] = {}
    for key in (k for k in ref if is_forward(k)):
        keys.setdefault(node_of(key), []).append(key)
    return keys


def _agrees_at(node_id: str, forward: dict[str, list[str]], ref: Observations,
               cand: Observations, spec: Spec) -> bool:
    """Both sides computed the same at this node (``forward``: :func:`_forward_keys`)."""
    return all(compare(ref[k], cand.get(k), spec.rtol, spec.atol) is None
               for k in forward.get(node_id, []))


def _wants_gradient(node: Node, ref: Observations) -> bool:
    """The reference's result of this call requires a gradient (a tensor of it, or the
    tensor an in-place call wrote into)."""
    return any(node_of(key) == node["id"] and "!" not in key
               and ref[key].get("requires_grad") is True for key in ref if is_forward(key)) \
        or (bool(node.get("inplace")) and _gets_gradient(node, ref))


def _gets_gradient(node: Node, ref: Observations) -> bool:
    """The reference's chained run sent a gradient into this call's output (for an in-place
    call, whose result is the tensor it wrote into: that tensor is a floating one)."""
    if node.get("inplace"):
        obs = ref.get(node["id"]) or {}
        return obs.get("t") == "tensor" and str(obs.get("dtype", "")).startswith(
            ("float", "bfloat", "complex"))
    return any(key.startswith("grad:") and node_of(key) == node["id"]
               and ref[key].get("t") == "tensor" for key in ref)


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


def mark_descendants(program: Program, found: list[Finding]) -> None:
    """``downstream_of`` on each finding whose call took a value computed, in this draw,
    from a call that has a finding of its own."""
    ancestors = ancestors_of(program)
    for finding in found:
        above = ancestors.get(finding.node, set())
        roots = [g for g in found if g is not finding and g.node and g.node in above]
        if roots:
            finding.extra["downstream_of"] = [
                {"kind": g.kind, "op": g.op, "node": g.node} for g in roots]

