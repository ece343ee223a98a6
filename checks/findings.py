"""Findings: one mismatch between reference and candidate, named by its first divergent call."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .compare import Mismatch, compare
from .runtime.replay import AUTOGRAD_KEY


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
        """Stable across runs and draws: the same kind of divergence at the same op (in its
        backward, for a backward that raised: not the same bug as its forward raising)."""
        where = "|backward" if self.key == "backward" else ""
        return hashlib.sha256(f"{self.kind.value}|{self.op}{where}".encode()).hexdigest()[:12]

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

    forward = [k for k in ref if not k.startswith(("grad:", "final:"))
               and k not in ("backward", AUTOGRAD_KEY)]
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
            return _backward_raised(program, ref, cand, mismatch, finding, spec)
        if "backward" in ref:
            return None
    bad = {}
    for key in (k for k in ref if k.startswith("grad:")):
        mismatch = compare(ref[key], cand.get(key), rtol, atol)
        if mismatch is not None:
            bad[key] = mismatch
    if not bad:
        return None
    blamed_node, key = _blame_backward(program, bad, _per_call(ref), _per_call(cand),
                                       rtol, atol)
    return finding(key, bad[key], blamed_node["id"], blamed_node.get("target", "input"))


def _backward_raised(program: dict[str, Any], ref: dict[str, dict[str, Any]],
                     cand: dict[str, dict[str, Any]], mismatch: Mismatch,
                     finding: Any, spec: str) -> Finding:
    """One side's backward raised: name the call whose backward node was running."""
    side = "reference" if mismatch.aspect == "reference-error" else "candidate"
    obs = (ref if side == "reference" else cand).get("backward") or {}
    node = backward_call(program, obs)
    if node is None:
        result: Finding = finding("backward", mismatch, "", BACKWARD_OP)
        return result
    op = str(node.get("target", "input"))
    other = "candidate" if side == "reference" else "reference"
    message = (f"the backward of {op} ({node['id']}) raised {obs.get('type')}: "
               f"{obs.get('message')} on the {side}; the {other}'s backward ran")
    return Finding(_kind_for("backward", mismatch), op, spec, message, program, "backward",
                   node["id"])


_BACKWARD_NAME = re.compile(r"\b_*([A-Za-z][A-Za-z0-9]*?)Backward\d*\b"
                            r"|\b([a-z][a-z0-9_]*?)_backward\b")
_NOT_CALLS = ("input", "module", "getattr")


def _squash(name: str) -> str:
    return name.lower().replace("_", "")


def backward_call(program: dict[str, Any], obs: dict[str, Any]) -> dict[str, Any] | None:
    """The call whose backward raised: the node the hooks saw running (``obs["node"]``), else
    the call named by a backward function in the error (``TanhBackward0``,
    ``replication_pad2d_backward``), else None."""
    nodes = {n["id"]: n for n in program["nodes"]}
    hooked = nodes.get(str(obs.get("node", "")))
    if hooked is not None and hooked["op"] not in _NOT_CALLS:
        return hooked
    text = f"{obs.get('message', '')}\n{obs.get('traceback', '')}"
    wanted = [_squash(a or b) for a, b in _BACKWARD_NAME.findall(text)]
    for name in reversed([w for w in wanted if w]):
        for node in reversed(program["nodes"]):
            if node["op"] in _NOT_CALLS or node.get("raises"):
                continue
            last = node.get("name") or str(node.get("target", "")).rsplit(".", 1)[-1]
            if _squash(last) == name:
                return node
    return None


def _per_call(obs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    data = obs.get(AUTOGRAD_KEY) or {}
    calls = data.get("calls") if isinstance(data, dict) else None
    return calls if isinstance(calls, dict) else {}


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


def _blame_backward(program: dict[str, Any], bad: dict[str, Mismatch],
                    ref_calls: dict[str, dict[str, Any]] | None = None,
                    cand_calls: dict[str, dict[str, Any]] | None = None,
                    rtol: float | None = None, atol: float | None = None
                    ) -> tuple[dict[str, Any], str]:
    """The call whose output gradient agrees while an input's gradient does not: walk the
    calls from last to first, as backward does. Where both sides' hooks saw the same kind of
    backward node for a call, its own gradients decide (what flowed into its output, what it
    sent to its inputs); elsewhere the gradients w.r.t. the program's values do."""
    ref_calls, cand_calls = ref_calls or {}, cand_calls or {}
    bad_ids = {k[len("grad:"):] for k in bad}
    for node in reversed(program["nodes"]):
        if node["op"] in ("input", "module"):
            continue
        arg_refs = _refs(node.get("args", [])) + _refs(node.get("kwargs", {}))
        hits = sorted(i for i in bad_ids for r in arg_refs if i == r or i.startswith(r + ":"))
        mine, theirs = ref_calls.get(node["id"]), cand_calls.get(node["id"])
        if mine is not None and theirs is not None and _comparable(mine, theirs):
            if (_grads_agree(mine["out"], theirs["out"], rtol, atol)
                    and not _grads_agree(mine["in"], theirs["in"], rtol, atol)):
                return node, f"grad:{hits[0]}" if hits else next(iter(bad))
            continue
        outputs = {i for i in bad_ids if node_of(i) == node["id"]}
        if outputs:
            continue
        if hits:
            return node, f"grad:{hits[0]}"
    first = next(iter(bad))
    node = next(n for n in program["nodes"] if n["id"] == node_of(first[len("grad:"):]))
    return node, first
