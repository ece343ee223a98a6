"""The Program format as types: what a drawn program is on the wire (JSON, so TypedDicts).

Only ``typing``: the worker imports this in the candidate's interpreter. The helpers at the
end narrow a node for the type checker where its ``op`` alone does not, and say which nodes
are calls, in the three senses the engine and the worker mean (one place for all three):
``is_call``, every node but an input (it has a ``target``, ``args`` and ``kwargs``);
``is_step``, a node the forward computes, not one it starts from (an input, a module's
construction: what a region is handed built); ``is_op_call``, a step that calls an API (a
function, a method, a module invoked), not an attribute read: what the backward hooks watch,
the judge blames and calls.py replays alone.

A Program is a list of nodes (each binds one value, named by its ``id``: ``v0``, ``v1``, ...;
the elements of a tuple result are ``v3.0``, ``v3.1``, ...), an optional backward plan, and
the draw it came from. Arguments are *encoded literals*: JSON scalars and lists as they are,
everything else as a one-key object (``{"ref": "v0"}``, ``{"tuple": [...]}``, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias, TypedDict

if TYPE_CHECKING:  # typing has it from Python 3.11; annotations are never evaluated here
    from typing import NotRequired, TypeGuard

# -- encoded literals ---------------------------------------------------------------------


class RefLiteral(TypedDict):
    """An earlier value: a node's id, or ``v3.1`` for an element of its tuple result."""
    ref: str


class TupleLiteral(TypedDict):
    tuple: list[EncodedLiteral]


class SliceLiteral(TypedDict):
    """``[start, stop, step]``, each ``None`` when left out."""
    slice: list[EncodedLiteral]


class FloatLiteral(TypedDict):
    """A float JSON cannot hold: ``"inf"``, ``"-inf"``, ``"nan"`` (its ``repr``)."""
    float: str


class ComplexLiteral(TypedDict):
    """A complex number: its real and imaginary parts, each ``repr`` of a float (``"nan"``)."""
    complex: list[str]


class EllipsisLiteral(TypedDict):
    ellipsis: Literal[True]


class DtypeLiteral(TypedDict):
    """A dtype by name: ``"float32"``."""
    dtype: str


class SizeLiteral(TypedDict):
    """A ``torch.Size``."""
    size: list[int]


class DeviceLiteral(TypedDict):
    """A ``torch.device`` as its text: ``"cpu"``, ``"cuda:0"``."""
    device: str


class AttrLiteral(TypedDict):
    """An attribute of the framework by dotted path: ``"torch.channels_last"``."""
    attr: str


class DictLiteral(TypedDict):
    dict: dict[str, EncodedLiteral]


Scalar: TypeAlias = bool | int | float | str | None
EncodedLiteral: TypeAlias = (
    Scalar | list["EncodedLiteral"] | RefLiteral | TupleLiteral | SliceLiteral | FloatLiteral
    | ComplexLiteral | EllipsisLiteral | DtypeLiteral | SizeLiteral | DeviceLiteral | AttrLiteral
    | DictLiteral
)

# -- value recipes --------------------------------------------------------------------------


class EncodedArray(TypedDict):
    """A NumPy array: its dtype (``arr.dtype.str``), shape and raw bytes in base64."""
    dtype: str
    shape: list[int]
    b64: str


class UniformRecipe(TypedDict):
    """Seeded uniform values in ``[low, high)`` (by default ``[-1, 1)``), sprinkled with
    ``specials`` (``"nan"``, ``"inf"``, ``"neg0"``, ...) at about ``density`` of them."""
    kind: Literal["uniform"]
    seed: int
    low: NotRequired[float]
    high: NotRequired[float]
    specials: NotRequired[list[str | float]]
    density: NotRequired[float]


class LiteralRecipe(TypedDict):
    kind: Literal["literal"]
    array: EncodedArray


class PatternRecipe(TypedDict):
    """``zeros``, ``ones``, ``arange`` or ``arange-centered``."""
    kind: Literal["pattern"]
    pattern: str


Recipe: TypeAlias = UniformRecipe | LiteralRecipe | PatternRecipe

# -- nodes ----------------------------------------------------------------------------------

CallOp = Literal["call", "method", "module", "invoke", "getattr"]
NodeOp = Literal["input", CallOp]


class InputNode(TypedDict):
    """A tensor made from a recipe."""
    id: str
    op: Literal["input"]
    dtype: str
    shape: list[int]
    recipe: Recipe
    requires_grad: bool
    raises: NotRequired[bool]


class CallNode(TypedDict):
    """``target(*args, **kwargs)``: a function (``call``), a module's constructor
    (``module``, with its parameters and buffers in ``state``), a module called on its
    arguments (``invoke``, the module is ``args[0]``), a Tensor method (``method``, ``self``
    is ``args[0]``, the method is ``name``) or an attribute read (``getattr`` of ``name``)."""
    id: str
    op: CallOp
    target: str
    args: list[EncodedLiteral]
    kwargs: dict[str, EncodedLiteral]
    name: NotRequired[str]
    inplace: NotRequired[bool]
    # the arguments (``arg2``, or a keyword) the reference's call wrote into, besides an
    # in-place call's own tensor: observed after the call as ``v3!arg2``
    writes: NotRequired[list[str]]
    raises: NotRequired[bool]
    state: NotRequired[dict[str, EncodedArray]]


Node: TypeAlias = InputNode | CallNode

# -- the program ----------------------------------------------------------------------------


class BackwardPlan(TypedDict):
    """``torch.autograd.grad(outputs, wrt, grad_outputs=seeds)``, then again for the
    ``intermediates``; ``wrt`` names values (``v0``) or module parameters (``v2:weight``)."""
    outputs: list[str]
    seeds: list[Recipe]
    wrt: list[str]
    intermediates: list[str]


class Program(TypedDict):
    """A drawn program (``spec``, ``seed`` and ``choices`` say how it was drawn) or a slice of
    one (``sliced_from``: the id of its call in the program it was cut from);
    ``expect_raise`` when the spec declares inputs the reference must reject."""
    nodes: list[Node]
    version: NotRequired[int]
    spec: NotRequired[str]
    seed: NotRequired[int]
    choices: NotRequired[list[int | float]]
    backward: NotRequired[BackwardPlan | None]
    expect_raise: NotRequired[bool]
    sliced_from: NotRequired[str]


# -- narrowing ------------------------------------------------------------------------------


def is_call(node: Node) -> TypeGuard[CallNode]:
    """Any node but an input: it has a ``target``, ``args`` and ``kwargs``."""
    return node["op"] != "input"


def is_step(node: Node) -> bool:
    """A node the forward computes: a call, a method, a module invoked, an attribute read; not
    an input nor a module's construction, which the steps start from."""
    return node["op"] not in ("input", "module")


def is_op_call(node: Node) -> bool:
    """A step that calls an API (``call``, ``method``, ``invoke``): not an input, a module's
    construction or an attribute read (``getattr``). Only these are watched by the backward
    hooks, blamed for a gradient and judged alone."""
    return node["op"] not in ("input", "module", "getattr")


# The calls that run a backward pass inside a program (a training step's ``loss.backward()``):
# after one, every leaf's ``.grad`` is observed (``v9!grad.v0:weight``, ``v9!grad.v3``).
IN_PROGRAM_BACKWARDS = frozenset({"torch.Tensor.backward", "torch.autograd.backward"})
# what the key of a leaf's gradient after such a call holds between the call and the leaf
GRAD_AFTER = "!grad."


def target_of(node: Node) -> str:
    """What a node calls (``torch.add``); ``input`` for an input."""
    return node["target"] if is_call(node) else "input"


def call_args(node: Node) -> list[EncodedLiteral]:
    """A call's positional arguments; none for an input."""
    return node["args"] if is_call(node) else []


def call_kwargs(node: Node) -> dict[str, EncodedLiteral]:
    """A call's keyword arguments; none for an input."""
    return node["kwargs"] if is_call(node) else {}
