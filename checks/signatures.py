"""What a finding is keyed by: observation keys, the role of what diverged, and error
messages with their values masked, so that one bug gives one signature whatever the draw."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .compare import compare_tensors, tolerance
from .program import Node, Program, call_args, call_kwargs
from .runtime.dtypes import BY_NAME, TABLE
from .runtime.literals import refs
from .runtime.program_types import GRAD_AFTER
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


# what an error message names that says which failure it is: an operator
# (``aten::convolution_backward``, ``aten.mm.default``) or a name in quotes
_OPERATOR = re.compile(r"\b(?:aten|prims|quantized|torch\.ops\.\w+)(?:::|\.)[A-Za-z_][\w.]*")
_NAME = re.compile(r"^[A-Za-z_][\w.:]{0,79}$")
_KEPT = "\x00{}\x00"
_KEPT_BACK = re.compile(r"\x00(\d+)\x00")


def cause_mask(message: str) -> str:
    """:func:`mask`, keeping what tells one failure from another: operator names and the
    names in quotes (``No lowering for 'aten.convolution_backward'`` stays whole), so that
    one missing operator is one cause and two are two."""
    kept: list[str] = []

    def keep(text: str) -> str:
        kept.append(text)
        return _KEPT.format(len(kept) - 1)

    text = " ".join(str(message).replace("\x00", "").split())
    text = _QUOTED.sub(lambda m: keep(m.group()) if _NAME.match(m.group()[1:-1]) else
                       m.group(), text)
    text = _mask_around(_OPERATOR.sub(lambda m: keep(m.group()), text))
    return _KEPT_BACK.sub(lambda m: kept[int(m.group(1))], text)[:MAX_SIGNATURE_CHARS]


def _mask_around(text: str) -> str:
    """:func:`mask` of the text between the kept pieces (their placeholders stay)."""
    parts = re.split(r"(\x00\d+\x00)", text)
    return "".join(part if _KEPT_BACK.fullmatch(part) else _mask_part(part) for part in parts)


def _mask_part(text: str) -> str:
    edge = (text[:1] == " ", text[-1:] == " ")
    inner = mask(text)
    return (" " if edge[0] and inner else "") + inner + (" " if edge[1] and inner else "")


def error_cause(obs: dict[str, Any]) -> str:
    """What a candidate's exception says of its cause: ``NotImplementedError: No lowering
    for aten.convolution_backward (in lowerings.py:lookup)``: its type, its message masked
    but for operator and quoted names, and where it was raised when known."""
    where = str(obs.get("where") or "")
    suffix = f" (in {where})" if where else ""
    return f"{obs.get('type') or 'error'}: {cause_mask(str(obs.get('message') or ''))}{suffix}"


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
    if GRAD_AFTER in key:  # a leaf's .grad after the program's own backward
        leaf = key.split(GRAD_AFTER, 1)[1]
        return f"grad:{'leaf' if node is None else _position(node, leaf)}"
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
    if GRAD_AFTER in key:
        return f"the gradient of {key.split(GRAD_AFTER, 1)[1]} after {node_of(key)}"
    if "!" in key:
        return f"the tensor {node_of(key)} wrote into ({key.split('!', 1)[1]})"
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


def _narrower(wide: str) -> tuple[str, ...]:
    rows = [row for row in TABLE if wide in row.narrows]
    return tuple(row.name for row in sorted(rows, key=lambda row: row.eps or 0.0))


# dtype -> the narrower ones a candidate may compute it in, most precise first
NARROWER = {row.name: _narrower(row.name) for row in TABLE if _narrower(row.name)}


def holds(data: np.ndarray, dtype: str) -> bool:
    """Every value of ``data`` is one ``dtype`` has (NaN and infinities included): one of
    the narrower dtypes of :data:`NARROWER` (of each part, for complex data)."""
    row = BY_NAME.get(dtype)
    if data.dtype.kind == "c":
        part = row.part if row is not None else None
        return part is not None and holds(data.real, part) and holds(data.imag, part)
    if row is None or row.family != "float" or not row.narrows or row.significand is None:
        return False
    carrier = np.dtype(row.numpy)
    wide = np.asarray(data, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        narrow = wide.astype(carrier)
        same = (narrow.astype(np.float64) == wide) | (np.isnan(wide) & np.isnan(narrow))
    dropped = np.finfo(carrier).nmant - row.significand  # bfloat16 in float32: 16 bits
    if dropped:
        bits = narrow.view(np.dtype(f"u{carrier.itemsize}"))
        same &= (bits & ((1 << dropped) - 1)) == 0
    return bool(same.all())


def precision_cause(ref: dict[str, Any], cand: dict[str, Any]) -> str:
    """``precision: float64 at float32`` when the candidate's values differ from the
    reference's as a narrower dtype's would: each is one the narrower dtype holds (the
    reference's are not) and they agree within its tolerance; also when they agree within
    a ``presumed`` one's (a float64 or complex128 result within float32's, complex64's),
    whatever its values. The one precision loss
    then shows as one cause across every op it touches. "" otherwise."""
    if ref.get("t") != "tensor" or cand.get("t") != "tensor" \
            or ref.get("dtype") != cand.get("dtype") or not cand["data"].size:
        return ""
    dtype = str(ref["dtype"])
    for narrower in NARROWER.get(dtype, ()):
        rtol, atol = tolerance(narrower)
        if compare_tensors(ref, cand, rtol, atol) is not None:
            continue
        if (holds(cand["data"], narrower) and not holds(ref["data"], narrower)) \
                or BY_NAME[narrower].presumed:
            return f"precision: {dtype} at {narrower}"
    return ""
