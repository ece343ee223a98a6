"""The one walker over encoded literals: which encoding means what, in one place.

The runtime decodes literals to real values with it (``values.decode_literal``) and codegen
renders them to source text (``codegen.literal``); each is a :class:`LiteralVisitor`. Only the
standard library: the worker runs this in the candidate's interpreter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

if TYPE_CHECKING:
    from typing import TypeGuard

    from .program_types import EncodedLiteral, Node, RefLiteral, Scalar

T = TypeVar("T")


class LiteralVisitor(Generic[T]):
    """What one encoding becomes. The walker visits the items of a list, tuple, slice or dict
    first, with the visitor :meth:`items` returns for that kind (a renderer writes the items
    of an index's tuple differently from those of a list), then hands them over."""

    def items(self, kind: str) -> LiteralVisitor[T]:
        """The visitor for the items of a ``list``, ``tuple``, ``slice`` or ``dict``."""
        return self

    def visit_scalar(self, value: Scalar) -> T:
        raise NotImplementedError

    def visit_list(self, items: list[T]) -> T:
        raise NotImplementedError

    def visit_ref(self, name: str) -> T:
        raise NotImplementedError

    def visit_tuple(self, items: list[T]) -> T:
        raise NotImplementedError

    def visit_float(self, text: str) -> T:
        raise NotImplementedError

    def visit_complex(self, real: float, imag: float) -> T:
        raise NotImplementedError

    def visit_slice(self, parts: list[T | None]) -> T:
        """``[start, stop, step]``; a part left out (``None``) is not visited."""
        raise NotImplementedError

    def visit_ellipsis(self) -> T:
        raise NotImplementedError

    def visit_dtype(self, name: str) -> T:
        raise NotImplementedError

    def visit_size(self, dims: list[int]) -> T:
        raise NotImplementedError

    def visit_device(self, name: str) -> T:
        raise NotImplementedError

    def visit_attr(self, path: str) -> T:
        raise NotImplementedError

    def visit_dict(self, items: dict[str, T]) -> T:
        raise NotImplementedError


def walk_literal(value: EncodedLiteral, visitor: LiteralVisitor[T]) -> T:
    """Fold one encoded literal with ``visitor``; ``ValueError`` for an unknown encoding."""
    if isinstance(value, list):
        inner = visitor.items("list")
        return visitor.visit_list([walk_literal(v, inner) for v in value])
    if not isinstance(value, dict):
        return visitor.visit_scalar(value)
    data = cast(dict[str, Any], value)
    if "ref" in data:
        return visitor.visit_ref(data["ref"])
    if "tuple" in data:
        inner = visitor.items("tuple")
        return visitor.visit_tuple([walk_literal(v, inner) for v in data["tuple"]])
    if "float" in data:
        return visitor.visit_float(data["float"])
    if "complex" in data:
        real, imag = (float(part) for part in data["complex"])
        return visitor.visit_complex(real, imag)
    if "slice" in data:
        inner = visitor.items("slice")
        return visitor.visit_slice([None if v is None else walk_literal(v, inner)
                                    for v in data["slice"]])
    if "ellipsis" in data:
        return visitor.visit_ellipsis()
    if "dtype" in data:
        return visitor.visit_dtype(data["dtype"])
    if "size" in data:
        return visitor.visit_size(data["size"])
    if "device" in data:
        return visitor.visit_device(data["device"])
    if "attr" in data:
        return visitor.visit_attr(data["attr"])
    if "dict" in data:
        inner = visitor.items("dict")
        return visitor.visit_dict({k: walk_literal(v, inner) for k, v in data["dict"].items()})
    raise ValueError(f"unknown literal {value!r}")


def is_ref(value: object) -> TypeGuard[RefLiteral]:
    """A reference literal: ``{"ref": "v3.1"}``."""
    return isinstance(value, dict) and "ref" in value


def ref_of(value: object) -> str:
    """The id a reference literal names; ``ValueError`` for any other value (a program whose
    module or mutated tensor is not a value of its own is malformed)."""
    if not is_ref(value):
        raise ValueError(f"expected a reference literal, got {value!r:.80}")
    return value["ref"]


def refs(value: object) -> list[str]:
    """Every id an encoded literal refers to, in order, however deep; also of a list or a
    dict of literals (a call's ``args``, its ``kwargs``)."""
    if is_ref(value):
        return [value["ref"]]
    if isinstance(value, dict):
        return [r for v in value.values() for r in refs(v)]
    if isinstance(value, list):
        return [r for v in value for r in refs(v)]
    return []


def node_refs(node: Node) -> list[str]:
    """What a node's arguments refer to: its ``args``, then its ``kwargs``."""
    return refs(node.get("args", [])) + refs(node.get("kwargs", {}))
