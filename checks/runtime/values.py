"""Materialise Program data on either side: input recipes, literal arrays, snapshots of results.

Both the reference (in the engine's process) and the candidate (in the worker) build inputs and
take observations with these functions, so the two sides can only differ in what the
framework computes.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import numpy as np

try:  # imported as part of the ``checks`` package in the engine
    from .dtypes import BY_NAME
    from .literals import LiteralVisitor, walk_literal
except ImportError:  # imported as a top-level module inside the worker
    from dtypes import BY_NAME  # type: ignore[no-redef]
    from literals import LiteralVisitor, walk_literal  # type: ignore[no-redef]

if TYPE_CHECKING:
    from .program_types import EncodedArray, EncodedLiteral, Recipe, Scalar


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype that ``name``'s values travel in: bfloat16, float8 and complex32 have
    none of their own and travel as float32 / complex64 (which hold each of their values
    exactly), cast by the framework (:func:`cast_input`) and cast back when observed
    (:func:`to_numpy`)."""
    row = BY_NAME.get(name)
    return np.dtype(row.numpy if row is not None else name)


def cast_input(torch: Any, tensor: Any, dtype: str) -> Any:
    """A tensor built from a NumPy array, in ``dtype`` where NumPy has no such dtype."""
    row = BY_NAME.get(dtype)
    return tensor.to(getattr(torch, dtype)) if row is not None and row.cast else tensor


def differentiable(dtype: str) -> bool:
    """Autograd works on floating and complex tensors (float8's kernels have no backward)."""
    row = BY_NAME.get(dtype)
    return row is not None and row.grad


def finite_range(dtype: str, low: float, high: float) -> tuple[float, float]:
    """``[low, high]`` clipped to what ``dtype`` holds, so uniform draws stay finite."""
    row = BY_NAME.get(dtype)
    top = row.finite_max if row is not None else None
    if top is None:
        return low, high
    return min(max(low, -top), top), min(max(high, -top), top)


def dtype_name(dtype: Any) -> str:
    """``torch.float32`` / ``paddle.float32`` / ``np.float32`` -> ``"float32"``."""
    return str(dtype).rsplit(".", 1)[-1]


def encode_array(arr: np.ndarray) -> EncodedArray:
    arr = np.asarray(arr)
    return {
        "dtype": arr.dtype.str,
        "shape": list(arr.shape),
        "b64": base64.b64encode(arr.tobytes()).decode("ascii"),
    }


def decode_array(data: EncodedArray) -> np.ndarray:
    raw = base64.b64decode(data["b64"])
    arr = np.frombuffer(raw, dtype=np.dtype(data["dtype"])).reshape(data["shape"])
    return arr.copy()


def make_array(recipe: Recipe, dtype: str, shape: list[int]) -> np.ndarray:
    """Build the array an input recipe describes; the same on every machine for one recipe."""
    if recipe["kind"] == "literal":
        return decode_array(recipe["array"]).astype(numpy_dtype(dtype)).reshape(shape)
    if recipe["kind"] == "pattern":
        return _pattern(recipe["pattern"], dtype, shape)
    rng = np.random.default_rng(int(recipe["seed"]))
    low, high = recipe.get("low", -1.0), recipe.get("high", 1.0)
    row = BY_NAME.get(dtype)
    family = row.family if row is not None else None
    if family == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if family == "int":
        info = np.iinfo(numpy_dtype(dtype))  # uint8 holds no negative value
        lo = min(max(int(np.floor(low)), int(info.min)), int(info.max))
        hi = min(max(int(np.ceil(high)), int(info.min)), int(info.max))
        return rng.integers(lo, max(hi, lo + 1), size=shape).astype(numpy_dtype(dtype))
    if family == "complex":
        real = rng.uniform(low, high, size=shape)
        imag = rng.uniform(low, high, size=shape)
        return (real + 1j * imag).astype(numpy_dtype(dtype))
    arr = rng.uniform(low, high, size=shape)
    specials = recipe.get("specials") or []
    if specials and arr.size:
        mask = rng.random(size=shape) < float(recipe.get("density", 0.25))
        picks = rng.integers(0, len(specials), size=shape)
        table = np.array([_special(s) for s in specials], dtype=np.float64)
        arr = np.where(mask, table[picks], arr)
    return arr.astype(numpy_dtype(dtype))


def _special(value: Any) -> float:
    return float(value) if not isinstance(value, str) else float(value.replace("neg", "-"))


def _pattern(pattern: str, dtype: str, shape: list[int]) -> np.ndarray:
    size = int(np.prod(shape)) if shape else 1
    if pattern == "zeros":
        flat = np.zeros(size)
    elif pattern == "ones":
        flat = np.ones(size)
    elif pattern == "arange":
        flat = np.arange(size, dtype=np.float64)
    elif pattern == "arange-centered":
        flat = np.arange(size, dtype=np.float64) - size // 2
    else:
        raise ValueError(f"unknown pattern {pattern!r}")
    if dtype == "bool":
        return (flat.reshape(shape) != 0)
    return flat.reshape(shape).astype(numpy_dtype(dtype))


def decode_literal(torch: Any, value: EncodedLiteral, refs: dict[str, Any]) -> Any:
    """Turn a Program literal back into a Python / framework value; refs name earlier values."""
    return walk_literal(value, _Decoder(torch, refs))


class _Decoder(LiteralVisitor[Any]):
    def __init__(self, torch: Any, refs: dict[str, Any]) -> None:
        self.torch, self.refs = torch, refs

    def visit_scalar(self, value: Scalar) -> Any:
        return value

    def visit_list(self, items: list[Any]) -> Any:
        return items

    def visit_ref(self, name: str) -> Any:
        return self.refs[name]

    def visit_tuple(self, items: list[Any]) -> Any:
        return tuple(items)

    def visit_float(self, text: str) -> Any:
        return float(text)

    def visit_complex(self, real: float, imag: float) -> Any:
        return complex(real, imag)

    def visit_slice(self, parts: list[Any]) -> Any:
        return slice(*parts)

    def visit_ellipsis(self) -> Any:
        return Ellipsis

    def visit_dtype(self, name: str) -> Any:
        return getattr(self.torch, name)

    def visit_size(self, dims: list[int]) -> Any:
        size_cls = getattr(self.torch, "Size", tuple)
        return size_cls([int(v) for v in dims])

    def visit_device(self, name: str) -> Any:
        return name

    def visit_attr(self, path: str) -> Any:
        return _resolve_path(self.torch, path)

    def visit_dict(self, items: dict[str, Any]) -> Any:
        return items


def _resolve_path(torch: Any, path: str) -> Any:
    obj = torch
    for part in path.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def is_tensor(torch: Any, value: Any) -> bool:
    tensor_cls = getattr(torch, "Tensor", None)
    return tensor_cls is not None and isinstance(value, tensor_cls)


def to_numpy(torch: Any, tensor: Any) -> tuple[str, np.ndarray]:
    """A detached host copy of a tensor and its dtype name."""
    name = dtype_name(tensor.dtype)
    t = tensor.detach()
    if str(getattr(t, "device", "cpu")) != "cpu":
        t = t.cpu()
    row = BY_NAME.get(name)
    if row is not None and row.cast:
        t = t.to(getattr(torch, row.numpy))
    for lazy in ("resolve_conj", "resolve_neg"):  # torch's lazy conjugate/negative views
        if hasattr(t, lazy):
            t = getattr(t, lazy)()
    return name, np.array(t.numpy(), copy=True)


def observe(torch: Any, value: Any) -> dict[str, Any]:
    """What is compared of one value: tensors by content, plain values by equality."""
    if is_tensor(torch, value):
        name, arr = to_numpy(torch, value)
        return {"t": "tensor", "dtype": name, "shape": list(arr.shape), "data": arr}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"t": "value", "value": value}
    if isinstance(value, complex):  # JSON has no complex number: the literal's encoding
        return {"t": "value", "value": {"complex": [repr(value.real), repr(value.imag)]}}
    if isinstance(value, (tuple, list)) and all(
        v is None or isinstance(v, (bool, int, float, str)) for v in value
    ):
        return {"t": "value", "value": list(value)}
    if isinstance(value, getattr(torch, "dtype", ())):
        return {"t": "value", "value": dtype_name(value)}
    return {"t": "opaque", "type": type(value).__name__}


def observe_error(exc: BaseException, missing_api: bool = False) -> dict[str, Any]:
    """``bases``: the names of the exception's classes, its own first, so that raising a
    subclass of what the reference raised (what ``except`` catches) counts as the same."""
    return {
        "t": "error",
        "type": type(exc).__name__,
        "message": str(exc)[:2000],
        "missing_api": missing_api,
        "bases": [cls.__name__ for cls in type(exc).__mro__[:-1]],
    }
