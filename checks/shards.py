"""Shards: a check split into groups of specs run apart (CI jobs, machines), and their reports
merged back into the report one run over every spec writes.

Specs are dealt out in name order, the i-th to shard ``i % N``: every family spreads over the
shards. Merging follows :class:`alignbot.checks.engine.Merger`: findings of one fingerprint found by
different specs become one, the first of the smallest drawn programs in spec order, with the
counts added and the first few distinct messages kept. Within one spec a report holds each
fingerprint once, so going through the specs in name order is all the order merging needs,
and ``--no-minimize`` shards merge into exactly the bytes of the whole run
(``tests/test_shards.py``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypeVar, cast

from . import causes
from .engine import input_elements
from .findings import MAX_EXAMPLES
from .program import Program
from .report_types import FindingEntry, Report

T = TypeVar("T")
SHARD = re.compile(r"([0-9]{1,4})/([0-9]{1,4})")
# Every key a report has, so that merging never drops one it does not know.
REPORT_KEYS = frozenset(Report.__annotations__)
SAME = ("report_version", "reference", "candidate", "candidate_packages", "seed",
        "capabilities")


class ShardError(ValueError):
    """A shard spelled wrongly, or reports that are not shards of one run."""


def parse(text: str) -> tuple[int, int]:
    """``"2/4"`` -> ``(2, 4)``: the second of four shards."""
    match = SHARD.fullmatch(text.strip())
    if match is None or not 1 <= int(match[1]) <= int(match[2]):
        raise ShardError(f"expected K/N with 1 <= K <= N (such as 2/4), got {text!r}")
    return int(match[1]), int(match[2])


def select(items: Sequence[T], index: int, count: int) -> list[T]:
    """Shard ``index`` of ``count`` (from 1) of ``items``, in their order."""
    return [item for position, item in enumerate(items) if position % count == index - 1]


def merge(reports: Sequence[Report]) -> Report:
    """One report from the reports of shards of one run (same reference, candidate and seed;
    no spec in two of them)."""
    if not reports:
        raise ShardError("no report to merge")
    first = reports[0]
    for number, report in enumerate(reports, 1):
        missing = Report.__required_keys__ - set(report)
        if missing:
            raise ShardError(f"report {number} lacks {', '.join(sorted(missing))}")
        unknown = set(report) - REPORT_KEYS
        if unknown:
            raise ShardError(f"report {number} has keys this alignbot does not know: "
                             f"{', '.join(sorted(unknown))}")
        for key in SAME:
            if report.get(key) != first.get(key):
                raise ShardError(f"report {number} has {key} {report.get(key)!r}, report 1 "
                                 f"{first.get(key)!r}: not shards of one run")
    specs: dict[str, int] = {}
    for number, report in enumerate(reports, 1):
        for name in report["specs"]:
            if name in specs:
                raise ShardError(f"spec {name} is in reports {specs[name]} and {number}")
            specs[name] = number
    merged: dict[str, FindingEntry] = {}
    entries = [entry for report in reports for entry in report["findings"]]
    try:
        for entry in sorted(entries, key=lambda entry: entry["spec"]):  # stable: report order
            _add(merged, cast(FindingEntry, {**entry, "examples": list(entry["examples"])}))
    except (KeyError, TypeError) as exc:
        raise ShardError(f"a finding is not one alignbot wrote ({type(exc).__name__}: "
                         f"{exc})") from exc
    findings = sorted(merged.values(), key=_report_order)
    joined: Report = {
        "report_version": first["report_version"],
        "reference": first["reference"],
        "candidate": first["candidate"],
        "candidate_packages": dict(first.get("candidate_packages") or {}),
        "seed": first["seed"],
        "specs_run": len(specs),
        "specs": sorted(specs),
        "programs_run": sum(report["programs_run"] for report in reports),
        "complete": all(report["complete"] for report in reports),
        "findings": findings,
        "causes": causes.group(findings),
        "exploration": sorted((spec for report in reports for spec in report["exploration"]),
                              key=lambda spec: spec["spec"]),
    }
    if "capabilities" in first:
        joined["capabilities"] = first["capabilities"]
    return joined


def _add(merged: dict[str, FindingEntry], entry: FindingEntry) -> None:
    """:meth:`alignbot.checks.engine.Merger.add` on report entries."""
    known = merged.get(entry["fingerprint"])
    if known is None:
        merged[entry["fingerprint"]] = entry
        return
    if _size(entry) < _size(known):
        _count(known, entry)
        entry["count"], entry["examples"] = known["count"], known["examples"]
        if "downstream_of" not in known:
            entry.pop("downstream_of", None)
        merged[entry["fingerprint"]] = entry
    else:
        _count(known, entry)


def _count(into: FindingEntry, other: FindingEntry) -> None:
    """:meth:`alignbot.checks.findings.Finding.merge` on report entries."""
    into["count"] += other["count"]
    if not other.get("downstream_of"):
        into.pop("downstream_of", None)
    for example in other["examples"]:
        if len(into["examples"]) >= MAX_EXAMPLES:
            break
        if example not in into["examples"]:
            into["examples"].append(example)


def _size(entry: FindingEntry) -> tuple[int, int]:
    """What :class:`alignbot.checks.engine.Merger` compares: the drawn program's size."""
    program = cast(Program, entry["program"])
    return input_elements(program), len(program["nodes"])


def _report_order(entry: FindingEntry) -> tuple[bool, str, str, str, str, str]:
    """:meth:`alignbot.checks.engine.Merger.collected`'s order."""
    return (bool(entry.get("downstream_of")), entry["spec"], entry["op"], entry["kind"],
            entry["signature"], entry["observation"])
