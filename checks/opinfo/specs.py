"""A spec per OpInfo entry: programs built from the entry's own sample, reference and error
inputs, every choice drawn through the DSL so a run is replayable and shrinkable.

A draw picks, in this order: a dtype among the entry's CPU dtypes that the Program format
carries (:data:`DTYPES`, through ``oneof`` so that exploration reaches every one; the first is
the one Hypothesis shrinks to), whether to take the
reference inputs (where the entry has them), a seed for the sample generator and a sample.
The sample's tensors become ``literal`` inputs and its other arguments the call's literals.
A sample that cannot be written as a Program (a complex32 or sparse tensor, an output the
engine cannot observe) is left out of the pool before the draw picks from it.
"""

from __future__ import annotations

import functools
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from ..choice_points import Site
from ..dsl import current, literal_tensor, oneof, random, random_bool, resolve
from ..runtime.dtypes import TABLE
from ..runtime.values import differentiable, observe, to_numpy
from ..spec import Spec
from . import adapter
from .adapter import Entry, Sample
from .plans import Plan, TensorValue

# Input dtypes the Program format carries, in the order a draw prefers them (shrinks toward).
DTYPES = tuple(row.name for row in sorted(TABLE, key=lambda row: row.draw_rank))
MAX_ELEMENTS = 10_000  # per sample: its values travel in the Program as literals
SEEDS = 2**16
SAMPLE_DRAWS = 10
UNCOMPARED = 1e300  # rtol and atol of a random op's spec: any two finite values agree
LOW_PRECISION = tuple(row.name for row in TABLE if row.finite_max is not None)
ERROR_DRAWS = 5


class _Declared(Protocol):
    @property
    def dtypes(self) -> tuple[str, ...]: ...  # every dtype the entry declares for the CPU


E = TypeVar("E", bound=_Declared)  # an entry of OpInfo's or ModuleInfo's database


class Unsupported(Exception):
    """A sample holds a value that a Program cannot carry."""


@dataclass
class Catalog:
    """The OpInfo specs and why entries (or their dtypes) gave none."""

    specs: list[Spec] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> entries
    dtypes_left_out: Counter[str] = field(default_factory=Counter)  # dtype -> entries


def plan(sample: Sample) -> Plan:
    """``sample`` with every value checked and every tensor copied; raises :class:`Unsupported`."""
    import torch

    seen: dict[int, TensorValue] = {}

    def convert(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if id(value) not in seen:
                seen[id(value)] = _tensor(torch, value)
            return seen[id(value)]
        if value is None or value is Ellipsis \
                or isinstance(value, (bool, int, float, complex, str)):
            return value
        if isinstance(value, (torch.dtype, torch.device, torch.memory_format, torch.layout)):
            return value
        if isinstance(value, torch.Size):
            return value
        if isinstance(value, (list, tuple)):
            items = [convert(v) for v in value]
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, slice):
            return slice(convert(value.start), convert(value.stop), convert(value.step))
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return {k: convert(v) for k, v in value.items()}
        raise Unsupported(f"an argument of type {type(value).__name__}")

    return Plan(convert(sample.input), tuple(convert(a) for a in sample.args),
                {k: convert(v) for k, v in sample.kwargs.items()})


def _tensor(torch: Any, tensor: Any) -> TensorValue:
    if tensor.device.type != "cpu":
        raise Unsupported(f"a tensor on {tensor.device}")
    if tensor.layout != torch.strided:
        raise Unsupported(f"a {tensor.layout} tensor")
    name = str(tensor.dtype).rsplit(".", 1)[-1]
    if name not in DTYPES:
        raise Unsupported(f"a {name} tensor")
    if tensor.numel() > MAX_ELEMENTS:
        raise Unsupported(f"a tensor of {tensor.numel()} elements")
    grad = bool(tensor.requires_grad) and differentiable(name)
    try:
        array = to_numpy(torch, tensor)[1]
    except Exception as exc:  # a tensor NumPy cannot hold (more than 64 dimensions)
        raise Unsupported(f"a tensor NumPy cannot hold: {exc}") from exc
    return TensorValue(array, name, grad)


def accepted(entry: Entry, planned: Plan) -> bool:
    """Whether the reference takes the planned call without raising (a respelled keyword)."""
    import torch

    def make(value: TensorValue) -> Any:
        return torch.from_numpy(value.array.copy()).to(getattr(torch, value.dtype))

    first, args, kwargs = arguments(planned, make)
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            invoke(torch, entry, first, args, kwargs)
        except Exception:
            return False
    return True


def observable(entry: Entry, planned: Plan) -> bool:
    """Whether the engine can observe the reference's result on the planned sample, made as
    the trace makes it (a sparse or complex32 result cannot be compared). A call that raises
    is observable: raising is compared too."""
    import torch

    def make(value: TensorValue) -> Any:  # bfloat16 and complex32 travel widened
        tensor = torch.from_numpy(value.array.copy()).to(getattr(torch, value.dtype))
        return tensor.requires_grad_(True) if value.requires_grad else tensor

    first, args, kwargs = arguments(planned, make)
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the traced call warns again, where it counts
        try:
            result = invoke(torch, entry, first, args, kwargs)
        except Unsupported:
            return False
        except Exception:
            return True
    try:
        for item in result if isinstance(result, (tuple, list)) else [result]:
            observe(torch, item)
    except Exception:
        return False
    return True


@functools.lru_cache(maxsize=256)
def sample_pool(entry: Entry, dtype: str, seed: int, reference: bool) -> tuple[Plan, ...]:
    """The samples a draw picks from, each kind first (:func:`kinds_first`). Where the entry
    has gradients for ``dtype``, the generator's samples with gradients, then those it gives
    only without them (embedding's ``padding_idx`` and ``max_norm``: their gradients differ
    from the numerical ones its own tests use), which stay without."""
    grad = entry.autograd and dtype in entry.grad_dtypes
    try:
        plans = _plans(adapter.samples(entry, dtype, seed, reference, grad))
        if grad:
            kinds = {kind(p) for p in plans}
            plans += [p for p in _plans(adapter.samples(entry, dtype, seed, reference, False))
                      if kind(p) not in kinds]
    except adapter.OpInfoChanged:
        raise
    except Exception:  # the database's own generator failed: nothing to draw from
        return ()
    return _observable(entry, kinds_first(plans))


def kind(planned: Plan) -> tuple[Any, ...]:
    """What a sample is, but for its tensors' values and shapes: its plain arguments and
    keywords (``right=True``, ``padding_idx=2``), a tensor where it has one."""
    def shown(value: Any) -> Any:
        if isinstance(value, TensorValue):
            return "tensor"
        if isinstance(value, (list, tuple)):
            return tuple(shown(v) for v in value)
        return repr(value)

    return (shown(planned.input), tuple(shown(a) for a in planned.args),
            tuple(sorted((k, shown(v)) for k, v in planned.kwargs.items())))


def _tensors(value: Any) -> list[TensorValue]:
    if isinstance(value, TensorValue):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def kinds_first(plans: list[Plan]) -> list[Plan]:
    """``plans`` with one of each :func:`kind` first, in the order the kinds first appear
    (the first of a kind whose tensors are all non-empty, where one is), then the rest in
    the generator's order, those with an empty tensor last: a spec's first draws pick each
    sample in turn, so they reach every keyword combination, on non-empty tensors, however
    the generator orders them."""
    first: dict[tuple[Any, ...], int] = {}  # a kind's first sample, in order of appearance
    filled: dict[tuple[Any, ...], int] = {}  # and its first whose tensors are not empty
    for index, planned in enumerate(plans):
        key = kind(planned)
        first.setdefault(key, index)
        if _filled(planned):
            filled.setdefault(key, index)
    chosen = [filled.get(key, index) for key, index in first.items()]
    taken = set(chosen)
    rest = [i for i in range(len(plans)) if i not in taken]
    full = set(filled.values()) | {i for i in rest if _filled(plans[i])}
    return [plans[i] for i in chosen] + [plans[i] for i in rest if i in full] + \
        [plans[i] for i in rest if i not in full]


def _filled(planned: Plan) -> bool:
    """Whether every tensor of the sample has elements."""
    return all(t.array.size for t in _tensors([planned.input, planned.args, planned.kwargs]))


@functools.lru_cache(maxsize=256)
def error_pool(entry: Entry, seed: int) -> tuple[Plan, ...]:
    try:
        return _pool(entry, adapter.error_samples(entry, seed))
    except adapter.OpInfoChanged:
        raise
    except Exception:
        return ()


def _plans(samples: list[Sample]) -> list[Plan]:
    plans = []
    for sample in samples:
        try:
            plans.append(plan(sample))
        except Unsupported:
            continue
    return plans


def _observable(entry: Entry, plans: list[Plan]) -> tuple[Plan, ...]:
    """The first :data:`adapter.MAX_SAMPLES` of ``plans`` whose result the engine observes."""
    kept: list[Plan] = []
    for planned in plans:
        if len(kept) == adapter.MAX_SAMPLES:
            break
        if observable(entry, planned):
            kept.append(planned)
    return tuple(kept)


def _pool(entry: Entry, samples: list[Sample]) -> tuple[Plan, ...]:
    return _observable(entry, _plans(samples))


def literal_input(value: TensorValue) -> Any:
    return literal_tensor(value.array, value.dtype, value.requires_grad).resolve()


def build(value: Any, made: dict[int, Any],
          make: Callable[[TensorValue], Any] = literal_input) -> Any:
    """A planned value with its tensors made by ``make`` (by default as ``literal_tensor``
    inputs of the draw); a tensor the sample holds twice is made once."""
    if isinstance(value, TensorValue):
        if id(value) not in made:
            made[id(value)] = make(value)
        return made[id(value)]
    if isinstance(value, list):
        return [build(v, made, make) for v in value]
    if isinstance(value, tuple) and type(value) is tuple:
        return tuple(build(v, made, make) for v in value)
    if isinstance(value, dict):
        return {k: build(v, made, make) for k, v in value.items()}
    return value


def arguments(planned: Plan, make: Callable[[TensorValue], Any] = literal_input
              ) -> tuple[Any, list[Any], dict[str, Any]]:
    """The planned input, args and kwargs, each tensor made once."""
    made: dict[int, Any] = {}
    return (build(planned.input, made, make), [build(a, made, make) for a in planned.args],
            {k: build(v, made, make) for k, v in planned.kwargs.items()})


def call(torch: Any, entry: Entry, planned: Plan) -> Any:
    """Record ``target(input, *args, **kwargs)`` (or the method on the input)."""
    first, args, kwargs = arguments(planned)
    return invoke(torch, entry, first, args, kwargs)


def invoke(torch: Any, entry: Entry, first: Any, args: list[Any], kwargs: dict[str, Any]
           ) -> Any:
    """``target(first, *args, **kwargs)``, the method on ``first``, or the arguments as the
    entry's wrapper passes them (:class:`Unsupported` where it would not take them)."""
    values = [first, *args]
    name = entry.target.rsplit(".", 1)[-1]
    if entry.call is not None:
        arranged = entry.call.arrange(values, kwargs)
        if arranged is None:
            raise Unsupported("arguments the test wrapper does not take")
        values, kwargs = arranged
        if entry.call.attribute:
            return getattr(values[0], name)
    if entry.method and not hasattr(values[0], name):  # an error input of a plain number
        raise Unsupported(f"a method called on a {type(values[0]).__name__}")
    if entry.method:
        return getattr(values[0], name)(*values[1:], **kwargs)
    fn = torch
    for part in entry.target.split(".")[1:]:
        fn = getattr(fn, part)
    return fn(*values, **kwargs)


def _pick(pool: tuple[Plan, ...]) -> Plan | None:
    """One sample of the pool, through a choice point: the first draws of a spec reach every
    sample (a plain random index stays near the first few, whose keywords are the defaults)."""
    if not pool:
        return None
    # one choice point per pool size (pools of one entry differ by dtype and by gradients):
    # the explorer covers a point's alternatives only where their number stays the same
    site = Site(__file__, 10_000 + len(pool), f"sample of {len(pool)}")
    return pool[current().draw_alternative(site, [str(i) for i in range(len(pool))])]


def draws(dtypes: tuple[str, ...]) -> int:
    """Programs drawn from an entry's spec: room for every dtype, and two more."""
    return max(SAMPLE_DRAWS, len(dtypes) + 2)


def sample_spec(entry: Entry, dtypes: tuple[str, ...]) -> Spec:
    from . import variants

    dtype_choice = oneof(*dtypes)
    variant_choice = oneof(*variants.VARIANTS)

    def fn(torch: Any) -> Any:
        dtype = str(resolve(dtype_choice))
        reference = entry.has_reference and bool(random_bool())
        planned = _pick(sample_pool(entry, dtype, int(random(0, SEEDS)), reference))
        if planned is None:
            return None
        variant = str(resolve(variant_choice))
        changed = variants.apply(planned, variant)
        if variant == "respelled" and not accepted(entry, changed):
            changed = planned  # a spelling the reference does not take for this op
        planned = changed
        if variant == "non-contiguous" and (first := variants.first_tensor(planned)):
            def make(value: TensorValue) -> Any:
                return variants.laid_out(value) if value is first else literal_input(value)

            return invoke(torch, entry, *arguments(planned, make))
        return call(torch, entry, planned)

    return _spec(fn, f"opinfo.{entry.key}", entry, draws(dtypes), backward=entry.autograd,
                 tolerance=UNCOMPARED if random_values(entry) else None)


def error_spec(entry: Entry) -> Spec:
    def fn(torch: Any) -> Any:
        planned = _pick(error_pool(entry, int(random(0, SEEDS))))
        return None if planned is None else call(torch, entry, planned)

    # an error input the reference takes after all (bernoulli's) draws random values too
    return _spec(fn, f"opinfo.{entry.key}.errors", entry, ERROR_DRAWS, backward=False,
                 raises=True, tolerance=UNCOMPARED if random_values(entry) else None)


def _spec(fn: Callable[[Any], Any], name: str, entry: Entry, n: int, backward: bool,
          raises: bool = False, tolerance: float | None = None) -> Spec:
    fn.__name__ = fn.__qualname__ = name
    return Spec(name=name, fn=fn, n=n, backward=backward, raises=raises, ops=(entry.target,),
                source="OpInfo", rtol=tolerance, atol=tolerance)


def random_values(entry: Entry) -> bool:
    """An op that draws from the random generator: frameworks (and compilers) draw other
    numbers, so its values are not compared (:data:`UNCOMPARED`); shapes, dtypes, errors and
    where values are finite still are."""
    return entry.call is not None and entry.call.random


def entry_dtypes(entry: Entry) -> tuple[str, ...]:
    """The entry's dtypes that a spec draws, in :data:`DTYPES` order. A random op's draws in
    float16/bfloat16/complex32/float8 overflow now and then (a Cauchy sample past 65504), which the
    finiteness check would report, so those are left to ops whose values are compared."""
    left_out = LOW_PRECISION if random_values(entry) else ()
    return tuple(d for d in DTYPES if d in entry.dtypes and d not in left_out)


def why_not_carried(dtype: str) -> str:
    """Why entries declaring ``dtype`` draw it nowhere: every dtype the reference's entries
    declare for the CPU is carried, so only one a newer PyTorch adds lands here."""
    return f"the Program format does not carry it (not in {__name__}.DTYPES)"


def render_not_carried(left_out: Counter[str]) -> str:
    """The dtypes left out, each with the entries declaring it and why."""
    if not left_out:
        return "CPU dtypes not drawn: none (every dtype an entry declares is carried)\n"
    lines = [f"  {count:4d}  {dtype}: {why_not_carried(dtype)}"
             for dtype, count in left_out.most_common()]
    return "".join(f"{line}\n" for line in ["CPU dtypes not drawn (entries declaring them):",
                                              *lines])


def catalog() -> Catalog:
    """Every OpInfo spec, and the reasons for the entries that gave none."""
    data = adapter.database()
    return gather(data.skipped, data.entries, entry_dtypes,
                  lambda entry, dtypes: [sample_spec(entry, dtypes)]
                  + ([error_spec(entry)] if entry.has_errors else []))


def gather(skipped: Iterable[Any], entries: Iterable[E],
           dtypes_of: Callable[[E], tuple[str, ...]],
           specs_of: Callable[[E, tuple[str, ...]], list[Spec]]) -> Catalog:
    """A database's specs (``specs_of`` an entry and the dtypes it draws) and why entries, or
    some of their dtypes, gave none: OpInfo's and ModuleInfo's alike."""
    result = Catalog()
    for item in skipped:
        result.skipped[item.reason] += 1
    for entry in entries:
        dtypes = dtypes_of(entry)
        for other in set(entry.dtypes) - set(DTYPES):
            result.dtypes_left_out[other] += 1
        if not dtypes:
            result.skipped["no CPU dtype the Program format carries"] += 1
            continue
        result.specs += specs_of(entry, dtypes)
    return result
