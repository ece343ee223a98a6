"""Findings: one mismatch between reference and candidate, named by its first divergent call."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .compare import Mismatch, compare


class Kind(StrEnum):
    VALUE = "value-mismatch"
    GRAD = "grad-mismatch"
    SHAPE = "shape-mismatch"
    DTYPE = "dtype-mismatch"
    STATE = "state-mismatch"
    CANDIDATE_ERROR = "candidate-error"
    MISSING_API = "missing-api"
    REFERENCE_ERROR = "reference-error"
    CANDIDATE_CRASH = "candidate-crash"
    CANDIDATE_TIMEOUT = "candidate-timeout"


BACKWARD_OP = "torch.autograd.grad"


@dataclass
class Finding:
    """A mismatch; ``key`` is the observation that diverged, ``node`` the call it belongs to."""

    kind: Kind
    op: str
    spec: str
    message: str
    program: dict[str, Any]
    key: str = ""
    node: str = ""
    count: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        """Stable across runs and draws: the same kind of divergence at the same op."""
        return hashlib.sha256(f"{self.kind.value}|{self.op}".encode()).hexdigest()[:12]

    def to_json(self) -> dict[str, Any]:
        data = {"fingerprint": self.fingerprint, "kind": self.kind.value, "op": self.op,
                "spec": self.spec, "message": self.message, "count": self.count,
                "observation": self.key, "node": self.node, "program": self.program}
        data.update(self.extra)
        return data


def describe_key(key: str) -> str:
    """Where a mismatch was observed, in words."""
    if key.startswith("grad:"):
        return f"gradient w.r.t. {key[len('grad:'):]}"
    if key.startswith("final:"):
        return f"{key[len('final:'):]} at the end of the program"
    if "!self" in key:
        return f"the tensor mutated by {node_of(key)}"
    if "!state." in key:
        return f"module buffer {key.split('!state.', 1)[1]} after {node_of(key)}"
    if key == "backward":
        return "the backward pass"
    return f"result {key}"


def _kind_for(key: str, mismatch: Mismatch) -> Kind:
    if mismatch.aspect in ("reference-error", "candidate-error", "missing-api"):
        return Kind(mismatch.aspect)
    if key.startswith("grad:"):
        return Kind.GRAD
    if mismatch.aspect == "shape":
        return Kind.SHAPE
    if mismatch.aspect == "dtype":
        return Kind.DTYPE
    if "!" in key or key.startswith("final:"):
        return Kind.STATE
    return Kind.VALUE


def node_of(key: str) -> str:
    """``v3.1`` / ``v3!self`` / ``grad:v3:weight`` -> ``v3``."""
    key = key.split(":", 1)[1] if key.startswith(("grad:", "final:")) else key
    return key.split(":")[0].split("!")[0].split(".")[0]


def _refs(value: Any) -> list[str]:
    if isinstance(value, dict):
        if "ref" in value:
            return [value["ref"]]
        return [r for v in value.values() for r in _refs(v)]
    if isinstance(value, list):
        return [r for v in value for r in _refs(v)]
    return []


def judge(program: dict[str, Any], ref: dict[str, dict[str, Any]],
          cand: dict[str, dict[str, Any]], spec: str,
          rtol: float | None = None, atol: float | None = None) -> Finding | None:
    """The first divergence, walking the program in call order, then final states, then
    gradients; everything after the first divergent call is a consequence of it."""
    nodes = {n["id"]: n for n in program["nodes"]}

    def finding(key: str, mismatch: Mismatch, node_id: str, op: str) -> Finding:
        extra = {}
        if mismatch.max_abs is not None:
            extra = {"max_abs": mismatch.max_abs, "max_rel": mismatch.max_rel}
        message = f"{describe_key(key)}: {mismatch.message}"
        return Finding(_kind_for(key, mismatch), op, spec, message, program, key, node_id,
                       extra=extra)

    forward = [k for k in ref if not k.startswith(("grad:", "final:")) and k != "backward"]
    for key in forward:
        node = nodes[node_of(key)]
        mismatch = compare(ref[key], cand.get(key), rtol, atol)
        if mismatch is not None:
            return finding(key, mismatch, node["id"], node.get("target", "input"))
    for key in (k for k in ref if k.startswith("final:")):
        mismatch = compare(ref[key], cand.get(key), rtol, atol)
        if mismatch is not None:
            inplace = [n for n in program["nodes"] if n.get("inplace")]
            blamed = inplace[-1] if inplace else nodes[node_of(key)]
            return finding(key, mismatch, blamed["id"], blamed.get("target", "input"))
    if "backward" in ref or "backward" in cand:
        mismatch = compare(ref.get("backward", {"t": "value", "value": None}),
                           cand.get("backward", {"t": "value", "value": None}))
        if mismatch is not None:
            return finding("backward", mismatch, "", BACKWARD_OP)
        if "backward" in ref:
            return None
    bad = {}
    for key in (k for k in ref if k.startswith("grad:")):
        mismatch = compare(ref[key], cand.get(key), rtol, atol)
        if mismatch is not None:
            bad[key] = mismatch
    if not bad:
        return None
    blamed_node, key = _blame_backward(program, bad)
    return finding(key, bad[key], blamed_node["id"], blamed_node.get("target", "input"))


def _blame_backward(program: dict[str, Any], bad: dict[str, Mismatch]
                    ) -> tuple[dict[str, Any], str]:
    """The call whose output gradient agrees while an input's gradient does not: walk the
    calls from last to first, as backward does."""
    bad_ids = {k[len("grad:"):] for k in bad}
    for node in reversed(program["nodes"]):
        if node["op"] in ("input", "module"):
            continue
        outputs = {i for i in bad_ids if node_of(i) == node["id"]}
        if outputs:
            continue
        for ref_id in _refs(node.get("args", [])) + _refs(node.get("kwargs", {})):
            hits = sorted(i for i in bad_ids if i == ref_id or i.startswith(ref_id + ":"))
            if hits:
                return node, f"grad:{hits[0]}"
    first = next(iter(bad))
    node = next(n for n in program["nodes"] if n["id"] == node_of(first[len("grad:"):]))
    return node, first
