"""Causes: the findings whose candidate-side failure is one (one missing kernel, one
precision loss, one compiler error), grouped from a report's findings.

A finding names the call that is wrong; a maintainer fixes causes. When one missing lowering
of ``aten.convolution_backward`` breaks the backward of every convolution, each op is a
finding of its own and all of them are one cause. Judging gives each finding the failure it
may share (``Finding.cause``, a string ``form: what``, see :mod:`alignbot.checks.findings`):

- ``raised``: the exception the candidate raised, its type and message masked but for
  operator and quoted names, and where it was raised (``alignbot.checks.signatures.error_cause``);
- ``region``: the same, raised by the candidate's ``alignbot_program`` for a whole region;
- ``precision``: results that differ as a narrower dtype's would (float64 computed in
  float32: ``alignbot.checks.signatures.precision_cause``);
- ``dtype``: a result of another dtype than the reference's (float32 for float64);
- ``detached``: results of a compiled region without a backward node.

Findings with the same string are one cause; a finding without one is a cause of its own.
Grouping reads only the report's findings, so merged shards and the App (which groups the
findings it validated, never trusting a report's own list) get the same causes. A cause's
id is a digest of what its members share: the same across runs, draws and shards.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import cast

from .findings import MISMATCH_KINDS, Kind, ancestors_of
from .program import Program
from .report_types import Cause, CauseForm, CauseMember, FindingEntry
from .runtime.dtypes import DTYPES

FORMS: dict[str, str] = {
    "raised": "the candidate raises {}",
    "region": "alignbot_program raises {}",
    "precision": "{} results computed at {} precision",
    "dtype": "{} results returned as {}",
    "detached": "{}",
}
ALONE: CauseForm = "finding"
MAX_NODES = 1000  # a program larger than any drawn one is not walked (a report is untrusted)


def parse(cause: str) -> tuple[CauseForm, str]:
    """``("raised", "NotImplementedError: …")`` from a finding's cause; a cause of a form
    this version does not know (or none) is the finding's own."""
    form, sep, what = cause.partition(": ")
    if not sep or form not in FORMS or not what:
        return ALONE, ""
    return cast(CauseForm, form), what


def cause_id(signature: str) -> str:
    """The id of the cause that findings with this signature share."""
    return hashlib.sha256(f"cause|{signature}".encode()).hexdigest()[:12]


def summary(form: CauseForm, what: str, entry: FindingEntry) -> str:
    """The cause in words: ``the candidate raises NotImplementedError: …``, ``float64
    results computed at float32 precision``; a finding alone: ``grad-mismatch at torch.mm``."""
    if form == "precision":
        wide, _, narrow = what.partition(" at ")
        return FORMS[form].format(wide, narrow)
    if form == "dtype":
        wide, _, narrow = what.partition(" returned as ")
        return FORMS[form].format(wide, narrow)
    if form == ALONE:
        return f"{entry['kind']} at {entry['op']}"
    return FORMS[form].format(what)


def member_dtype(entry: FindingEntry) -> str:
    """The dtype a finding is about: that of the value that differed (from its signature),
    else those of the inputs its call was computed from."""
    parts = entry["signature"].split(" ")
    if entry["kind"] in MISMATCH_KINDS and len(parts) >= 2 and parts[1] in DTYPES:
        return parts[1]
    program = cast(Program, entry["program"])
    nodes = program.get("nodes") or []
    if len(nodes) > MAX_NODES:
        return ""
    inputs = {n["id"]: n for n in nodes if n.get("op") == "input"}
    feeding = ancestors_of(program).get(entry["node"]) if entry["node"] else None
    chosen = [inputs[i] for i in sorted(feeding & inputs.keys())] if feeding is not None \
        else list(inputs.values())
    return ",".join(dict.fromkeys(str(n.get("dtype", "")) for n in chosen if n.get("dtype")))


def _member(entry: FindingEntry) -> CauseMember:
    try:
        dtype = member_dtype(entry)[:100]
    except Exception:  # a program this version cannot read (the App groups untrusted ones)
        dtype = ""
    return {"fingerprint": entry["fingerprint"], "kind": Kind(entry["kind"]),
            "op": entry["op"], "dtype": dtype, "count": entry["count"]}


def group(findings: Sequence[FindingEntry]) -> list[Cause]:
    """The causes of a report's findings: those with one cause signature together, each
    other finding alone; most members first, then most draws, then report order. Members
    keep the report's order."""
    causes: dict[str, Cause] = {}
    for entry in findings:
        form, what = parse(entry.get("cause") or "")
        signature = f"{form}: {what}" if form != ALONE else ""
        key = cause_id(signature) if signature else entry["fingerprint"]
        cause = causes.get(key)
        if cause is None:
            cause = causes[key] = {"id": key, "form": form, "signature": signature,
                                   "summary": summary(form, what, entry), "count": 0,
                                   "members": []}
        cause["members"].append(_member(entry))
        cause["count"] += entry["count"]
    order = {key: position for position, key in enumerate(causes)}
    return sorted(causes.values(),
                  key=lambda c: (-len(c["members"]), -c["count"], order[c["id"]]))
