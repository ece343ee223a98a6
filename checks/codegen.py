"""Turn a (sliced) Program into Python statements that need only ``torch`` (and NumPy)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from .runtime.dtypes import BY_NAME, COMPLEX_DTYPES, DEFAULT, FLOAT_DTYPES, PART_DTYPES
from .runtime.literals import LiteralVisitor, walk_literal
from .runtime.program_types import CallNode, EncodedLiteral, Node, Program, Recipe, Scalar
from .runtime.values import decode_array, make_array, numpy_dtype

LITERAL_LIMIT = 64
# Module methods that return a generator: ``model.parameters()``
GENERATORS = frozenset({"parameters", "buffers", "children", "modules", "named_parameters",
                        "named_buffers", "named_children", "named_modules"})
BINARY = {"__add__": "+", "__sub__": "-", "__mul__": "*", "__truediv__": "/",
          "__floordiv__": "//", "__mod__": "%", "__pow__": "**", "__matmul__": "@",
          "__and__": "&", "__or__": "|", "__xor__": "^", "__lshift__": "<<",
          "__rshift__": ">>", "__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">=",
          "__eq__": "==", "__ne__": "!="}
REFLECTED = {f"__r{name[2:]}": op for name, op in BINARY.items()
             if name not in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__")}
UNARY = {"__neg__": "-", "__pos__": "+", "__invert__": "~", "__abs__": "abs"}
INPLACE = {f"__i{name[2:]}": op for name, op in BINARY.items() if name in
           ("__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__",
            "__pow__", "__matmul__", "__and__", "__or__", "__xor__")}



def number(value: Any, dtype: str) -> str:
    if dtype == "bool":
        return "True" if value else "False"
    if dtype in COMPLEX_DTYPES:
        return complex_source(complex(value).real, complex(value).imag, PART_DTYPES[dtype])
    if dtype not in FLOAT_DTYPES:
        return str(int(value))
    value = float(value)
    if np.isnan(value):
        return 'float("nan")'
    if np.isinf(value):
        return 'float("inf")' if value > 0 else '-float("inf")'
    if numpy_dtype(dtype) != np.float64:  # a float32 value: float32's shortest digits
        text = np.format_float_positional(np.float32(value), unique=True, trim="0")
    else:
        text = repr(value)
    return text


def complex_source(real: float, imag: float, part: str = "float64") -> str:
    """``(1.5-2.0j)``; ``complex(float("nan"), -0.0)`` where a part is not finite or a zero
    whose sign the sum would lose. ``part`` is the dtype of each part (its shortest digits)."""
    re_text, im_text = number(real, part), number(imag, part)
    if not (np.isfinite(real) and np.isfinite(imag)) or real == 0 or imag == 0:
        return f"complex({re_text}, {im_text})"
    sign = "-" if im_text.startswith("-") else "+"
    return f"({re_text}{sign}{im_text.lstrip('-')}j)"


def nested(arr: np.ndarray, dtype: str) -> str:
    if arr.ndim == 0:
        return number(arr.item(), dtype)
    return "[" + ", ".join(nested(a, dtype) for a in arr) + "]"


def _dtype_kw(dtype: str, default: str = DEFAULT, float_dtype: str | None = None) -> str:
    if float_dtype is not None and dtype in FLOAT_DTYPES:
        return f", dtype={float_dtype}"
    if float_dtype is not None and dtype in COMPLEX_DTYPES:  # complex64 with float32
        return f", dtype={float_dtype}.to_complex()"
    return "" if dtype == default else f", dtype=torch.{dtype}"


def _shape_args(shape: list[int]) -> str:
    return ", ".join(str(d) for d in shape) if shape else ""


def tensor_expr(recipe: Recipe, dtype: str, shape: list[int], grad: bool,
                float_dtype: str | None = None) -> str:
    """Source for one input tensor: a pattern, a literal, or seeded generation code.
    ``float_dtype`` names a variable that replaces floating dtypes (the float64 variant)."""
    kw = _dtype_kw(dtype, float_dtype=float_dtype)
    suffix = ".requires_grad_()" if grad else ""
    row = BY_NAME.get(dtype)  # the float64 variant aside, made as the runtime makes it
    if recipe["kind"] == "pattern":
        pattern = recipe["pattern"]
        if pattern in ("zeros", "ones"):
            return f"torch.{pattern}({_shape_args(shape) or '()'}{kw}){suffix}"
        size = int(np.prod(shape)) if shape else 1
        centered = f" - {size // 2}" if pattern == "arange-centered" else ""
        if row is not None and not row.arange and float_dtype is None:  # made in int64, cast
            base = (f"(torch.arange({size}){centered})" if centered
                    else f"torch.arange({size})") + f".to(torch.{dtype})"
        else:
            base = f"torch.arange({size}{_dtype_kw(dtype, 'int64', float_dtype)})"
            base = f"({base}{centered})" if centered else base
        return f"{base}.reshape({_shape_args(shape) or '()'}){suffix}"
    arr = make_array(recipe, dtype, shape)
    grad_kw = ", requires_grad=True" if grad else ""
    if arr.size == 0:  # nested lists lose the sizes after a zero: torch.tensor([]) is (0,)
        return f"torch.empty({_shape_args(shape) or '()'}{kw}{grad_kw})"
    if recipe["kind"] == "uniform" and arr.size > LITERAL_LIMIT and not recipe.get("specials") \
            and dtype in FLOAT_DTYPES:
        gen = (f"np.random.default_rng({recipe['seed']}).uniform({recipe['low']}, "
               f"{recipe['high']}, {tuple(shape)})")
        if row is not None and row.cast and float_dtype is None:  # drawn in its NumPy dtype
            return f"torch.tensor({gen}, dtype=torch.{row.numpy}).to(torch.{dtype}){suffix}"
        return f"torch.tensor({gen}{_dtype_kw(dtype, 'float64', float_dtype)}{grad_kw})"
    return f"torch.tensor({nested(arr, dtype)}{kw}{grad_kw})"


def literal(value: EncodedLiteral, names: Mapping[str, str], in_index: bool = False,
            float_dtype: str | None = None) -> str:
    """Source for one literal; ``names`` names earlier values, ``in_index`` writes tuples and
    slices as in ``x[1:2, ...]``, ``float_dtype`` names a variable for floating dtypes."""
    return render_literal(value, names.__getitem__, in_index=in_index, float_dtype=float_dtype)


def render_literal(value: EncodedLiteral, refs: Callable[[str], str], in_index: bool = False,
                   float_dtype: str | None = None, module: str = "torch") -> str:
    """:func:`literal` with ``refs`` naming earlier values, and the framework's attributes
    (dtypes, ``Size``, ``torch.channels_last``) written under ``module``."""
    return walk_literal(value, LiteralWriter(refs, in_index, float_dtype, module))


class LiteralWriter(LiteralVisitor[str]):
    """Renders a literal as Python source (see :func:`render_literal`)."""

    def __init__(self, refs: Callable[[str], str], in_index: bool = False,
                 float_dtype: str | None = None, module: str = "torch") -> None:
        self.refs, self.in_index, self.float_dtype = refs, in_index, float_dtype
        self.module = module

    def items(self, kind: str) -> LiteralWriter:
        # a list keeps the float dtype; a tuple keeps the index form (``x[1:2, ::2]``)
        if kind == "list":
            return LiteralWriter(self.refs, False, self.float_dtype, self.module)
        if kind == "tuple":
            return LiteralWriter(self.refs, self.in_index, None, self.module)
        return LiteralWriter(self.refs, False, None, self.module)

    def visit_scalar(self, value: Scalar) -> str:
        return repr(value)

    def visit_list(self, items: list[str]) -> str:
        return "[" + ", ".join(items) + "]"

    def visit_ref(self, name: str) -> str:
        return self.refs(name)

    def visit_tuple(self, items: list[str]) -> str:
        if self.in_index:
            return ", ".join(items) if len(items) > 1 else items[0] + ","
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

    def visit_float(self, text: str) -> str:
        return f"float({text!r})"

    def visit_complex(self, real: float, imag: float) -> str:
        return complex_source(real, imag)

    def visit_slice(self, parts: list[str | None]) -> str:
        if self.in_index:
            texts = [p or "" for p in parts]
            return ":".join(texts[:2]) + (f":{texts[2]}" if texts[2] else "")
        return "slice(" + ", ".join(p or "None" for p in parts) + ")"

    def visit_ellipsis(self) -> str:
        return "..."

    def visit_dtype(self, name: str) -> str:
        if self.float_dtype is not None and name in FLOAT_DTYPES:
            return self.float_dtype
        if self.float_dtype is not None and name in COMPLEX_DTYPES:
            return f"{self.float_dtype}.to_complex()"
        return f"{self.module}.{name}"

    def visit_size(self, dims: list[int]) -> str:
        return f"{self.module}.Size({dims!r})"

    def visit_device(self, name: str) -> str:
        return repr(name)

    def visit_attr(self, path: str) -> str:
        if self.module == "torch" or not path.startswith("torch."):
            return path
        return self.module + path[len("torch"):]

    def visit_dict(self, items: dict[str, str]) -> str:
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in items.items()) + "}"


def _call_args(node: CallNode, names: dict[str, str], skip: int = 0,
               float_dtype: str | None = None) -> str:
    args = [literal(a, names, float_dtype=float_dtype) for a in node.get("args", [])[skip:]]
    args += [f"{k}={literal(v, names, float_dtype=float_dtype)}"
             for k, v in node.get("kwargs", {}).items()]
    return ", ".join(args)


def statements(program: Program, wrap: bool = False,
               float_dtype: str | None = None, names: dict[str, str] | None = None,
               device: bool = False) -> Iterator[str]:
    """One statement per node; names are ``names[node id]`` (default: the node ids, ``v0``,
    and ``m0`` for modules). ``wrap`` routes every call through ``call(name, fn)`` (how the
    candidate's worker applies overrides and ``alignbot_wrap``); ``device`` moves inputs and
    modules to ``device``; ``float_dtype`` writes floating dtypes as that variable (for the
    float64 variant)."""
    fd = float_dtype
    chosen = names or {}
    names = {}
    for position, node in enumerate(program["nodes"]):
        node_id, op = node["id"], node["op"]
        name = chosen.get(node_id) or (node_id if op != "module" else "m" + node_id[1:])
        names[node_id] = name
        if node["op"] == "input":
            grad = bool(node.get("requires_grad"))
            expr = tensor_expr(node["recipe"], node["dtype"], node["shape"], grad and not device,
                               fd)
            if device:
                expr += ".to(device)" + (".requires_grad_()" if grad else "")
            yield f"{name} = {expr}"
        elif node["op"] == "module":
            to = f".to({fd})" if fd else ".to(device)" if device else ""
            yield f"{name} = {node['target']}({_call_args(node, names, float_dtype=fd)}){to}"
            yield from _state_lines(name, node, _fresh_state(node, program["nodes"][:position]))
        elif node["op"] == "call":
            fn = node["target"]
            if wrap:
                fn = f"call({fn!r}, {fn})"
            yield f"{name} = {fn}({_call_args(node, names, float_dtype=fd)})"
        elif node["op"] == "invoke":
            module = literal(node["args"][0], names)
            fn = f"call({node['target']!r}, {module})" if wrap else module
            if "state" in node:  # a lazy module: its first call makes the parameters we set
                yield f"{fn}({_call_args(node, names, skip=1, float_dtype=fd)})"
                yield from _state_lines(module, node, {})
            yield f"{name} = {fn}({_call_args(node, names, skip=1, float_dtype=fd)})"
        elif node["op"] == "getattr":
            yield f"{name} = {literal(node['args'][0], names)}.{node['name']}"
        elif node["op"] == "method":
            yield from _method(node, names, name, wrap, fd)
        for index in range(8):  # the elements of a tuple result, and of its tuples (LSTM)
            names.setdefault(f"{node_id}.{index}", f"{name}[{index}]")
            for inner in range(4):
                names.setdefault(f"{node_id}.{index}.{inner}", f"{name}[{index}][{inner}]")


def _method(node: CallNode, names: dict[str, str], name: str, wrap: bool,
            fd: str | None) -> Iterator[str]:
    method = node["name"]
    args = node.get("args", [])
    this = literal(args[0], names)
    rest = [literal(a, names, float_dtype=fd) for a in args[1:]]
    if wrap:
        fn = f"call({node['target']!r}, {this}.{method})"
        called = f"{fn}({_call_args(node, names, skip=1, float_dtype=fd)})"
        # the replay keeps what a generator yields as a list
        yield f"{name} = list({called})" if method in GENERATORS else f"{name} = {called}"
    elif method in BINARY and len(rest) == 1 and not node.get("kwargs"):
        yield f"{name} = {this} {BINARY[method]} {rest[0]}"
    elif method in REFLECTED and len(rest) == 1 and not node.get("kwargs"):
        yield f"{name} = {rest[0]} {REFLECTED[method]} {this}"
    elif method in UNARY and not rest:
        op = UNARY[method]
        yield f"{name} = abs({this})" if op == "abs" else f"{name} = {op}{this}"
    elif method == "__getitem__" and len(rest) == 1:
        yield f"{name} = {this}[{literal(args[1], names, in_index=True)}]"
    elif method == "__setitem__" and len(rest) == 2:
        yield f"{this}[{literal(args[1], names, in_index=True)}] = {rest[1]}"
        yield f"{name} = None"
    elif method in INPLACE and len(rest) == 1:
        yield f"{this} {INPLACE[method]}= {rest[0]}"
        yield f"{name} = {this}"
    elif method in GENERATORS:  # the replay keeps what they yield as a list
        yield f"{name} = list({this}.{method}({_call_args(node, names, skip=1, float_dtype=fd)}))"
    else:
        yield f"{name} = {this}.{method}({_call_args(node, names, skip=1, float_dtype=fd)})"


def _state_lines(name: str, node: CallNode, fresh: dict[str, np.ndarray]) -> Iterator[str]:
    """Set the module's parameters and buffers that differ from ``fresh`` (what a freshly
    built module would already have)."""
    lines = []
    for key, data in node.get("state", {}).items():
        arr = decode_array(data)
        if key in fresh and np.array_equal(fresh[key], arr):
            continue
        dtype = str(arr.dtype)
        if np.all(arr == 1):
            expr = f"torch.ones({_shape_args(list(arr.shape)) or '()'}{_dtype_kw(dtype)})"
        elif np.all(arr == 0):
            expr = f"torch.zeros({_shape_args(list(arr.shape)) or '()'}{_dtype_kw(dtype)})"
        else:
            expr = f"torch.tensor({nested(arr, dtype)}{_dtype_kw(dtype)})"
        lines.append(f"    {name}.{key}.copy_({expr})")
    if lines:
        yield "with torch.no_grad():"
        yield from lines


def _fresh_state(node: CallNode, before: list[Node]) -> dict[str, np.ndarray]:
    """The state a module gets when constructed twice with different seeds, where it agrees
    (deterministic initialisations such as BatchNorm's ones and zeros). ``before`` are the
    nodes that precede the module: its arguments may refer to them (``weight=v0``). A module
    that cannot be built again here gets no fresh state: every tensor is then written out."""
    import torch

    from .runtime.replay import Hooks, bind_result, module_tensors, run_node
    from .runtime.replay import seed as seed_reference
    from .runtime.values import to_numpy

    states = []
    for value in (1, 2):
        seed_reference(torch, value)
        values: dict[str, Any] = {}
        try:
            for earlier in before:
                try:
                    bind_result(torch, earlier["id"], run_node(torch, earlier, values, Hooks()),
                                values)
                except Exception:
                    if not earlier.get("raises"):
                        raise
            fresh = node.copy()
            fresh["state"] = {}
            module = run_node(torch, fresh, values, Hooks())
        except Exception:
            return {}
        states.append({k: to_numpy(torch, t)[1] for k, t in module_tensors(module).items()})
    return {k: v for k, v in states[0].items()
            if k in states[1] and np.array_equal(v, states[1][k])}
