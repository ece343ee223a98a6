"""What a finding is keyed by: observation keys, the role of what diverged, and error
messages with their values masked, so that one bug gives one signature whatever the draw."""

from __future__ import annotations

import re
from typing import Any

from .program import Node, Program, call_args, call_kwargs
from .runtime.literals import refs
from .runtime.replay import AUTOGRAD_KEY

_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_NUMBERED = re.compile(r"(?<=[A-Za-z]_)\d+\b")  # generated_tensor_117: a counter in a name
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?!\w)")
_DTYPE = re.compile(r"\b(?:torch\.\w+|(?:Complex)?(?:Float|Double|Half|BFloat16|Long|Int|Short"
                    r"|Char|Byte|Bool)|u?int\d+|float\d+|bfloat16|complex\d+|bool)\b")
_GROUP = re.compile(r"[\[(][^\[\]()]*[\])]")
_MASKED_GROUP = re.compile(r"([\[(])[\s#,]*([\])])")
MAX_SIGNATURE_CHARS = 300


def mask(message: str) -> str:
    """An error message without its values: quoted names, numbers, shapes, sizes and the
    dtypes listed in brackets become ``#`` (``Expected weight to be of shape [#] but got
    [#]``)."""
    text = " ".join(str(message).split())
    text = _QUOTED.sub(lambda m: m.group()[0] + "#" + m.group()[0], text)
    text = _HEX.sub("#", text)
    text = _NUMBERED.sub("#", text)
    text = _NUMBER.sub("#", text)
    text = _GROUP.sub(lambda m: _DTYPE.sub("#", m.group()), text)
    text = _MASKED_GROUP.sub(r"\1#\2", text)
    return text[:MAX_SIGNATURE_CHARS]


def error_signature(obs: dict[str, Any]) -> str:
    """``RuntimeError: Expected weight to be of shape [#] but got [#]``."""
    return f"{obs.get('type') or 'error'}: {mask(str(obs.get('message') or ''))}"


def _call_keywords(program: Program, node: Node) -> list[str]:
    """The keyword names a call passes, with its module's constructor keywords."""
    nodes = {n["id"]: n for n in program["nodes"]}
    names = set(call_kwargs(node))
    if node["op"] == "invoke":
        for ref in refs(call_args(node)[:1]):
            module = nodes.get(ref)
            if module is not None and module["op"] == "module":
                names |= set(call_kwargs(module))
    return sorted(names)


def _position(node: Node, value: str) -> str:
    """Which argument of ``node`` holds ``value`` (``arg0``, ``weight``, ``arg0:bias`` for a
    module's parameter), else ``upstream`` (a value the call's inputs were computed from)."""
    def holds(arg: Any) -> str | None:
        for ref in refs(arg):
            if value == ref:
                return ""
            if value.startswith(ref + ":"):
                return value[len(ref):]
        return None

    kwargs = call_kwargs(node)
    for index, arg in enumerate(call_args(node)):
        suffix = holds(arg)
        if suffix is not None:
            return f"arg{index}{suffix}"
    for name in sorted(kwargs):
        suffix = holds(kwargs[name])
        if suffix is not None:
            return f"{name}{suffix}"
    return "upstream"


def role(program: Program, key: str, node_id: str) -> str:
    """What diverged, relative to the blamed call and without internal ids: ``out``,
    ``out.1``, ``self``, ``state.running_mean``, ``final:arg0``, ``grad:arg1``, ``grad:out``."""
    nodes = {n["id"]: n for n in program["nodes"]}
    node = nodes.get(node_id)
    if key.startswith(("grad:", "final:")):
        head, value = key.split(":", 1)
        if node_of(value) == node_id:
            rest = value[len(node_id):]
            return f"{head}:out{rest}" if rest[:1] != ":" else f"{head}:param{rest}"
        return f"{head}:{'upstream' if node is None else _position(node, value)}"
    if "!" in key:
        return key.split("!", 1)[1]
    return "out" + key[len(node_of(key)):]


def mismatch_signature(program: Program, key: str, node_id: str,
                       obs: dict[str, Any] | None) -> str:
    """``out float32 kw=[beta,threshold]``: the role, the reference's dtype (or kind of
    value), and the keyword names the blamed call passes."""
    nodes = {n["id"]: n for n in program["nodes"]}
    obs = obs or {}
    dtype = obs.get("dtype") or obs.get("t") or "none"
    keywords = _call_keywords(program, nodes[node_id]) if node_id in nodes else []
    return f"{role(program, key, node_id)} {dtype} kw=[{','.join(keywords)}]"


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


def node_of(key: str) -> str:
    """``v3.1`` / ``v3!self`` / ``grad:v3:weight`` -> ``v3``."""
    key = key.split(":", 1)[1] if key.startswith(("grad:", "final:")) else key
    return key.split(":")[0].split("!")[0].split(".")[0]


def is_forward(key: str) -> bool:
    """An observation of the forward run: a call's result, a mutated argument or buffer (not
    a final state, a gradient, the backward's error or the per-call hook data)."""
    return not key.startswith(("grad:", "final:")) and key not in ("backward", AUTOGRAD_KEY)
