"""The one adapter over PyTorch's private OpInfo database (``torch.testing._internal``).

``torch.testing._internal.common_methods_invocations.op_db`` is PyTorch's own list of ops with
sample inputs; it is private and changes between releases, so nothing else in alignbot touches
it. :func:`database` imports it (seconds: only when OpInfo specs are asked for, and only in the
engine's process, never in a candidate's worker) and checks, before reading anything, that every
entry, sample and error input still has the attributes read here: :class:`OpInfoChanged` names
what is missing.

Each entry becomes an :class:`Entry` when its callable is a public torch API the replay can
resolve by path (``torch.add``, ``torch.nn.functional.relu``, or a ``torch.Tensor`` method called
on the sample's input); the others are :class:`Skipped` with a reason.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..runtime import replay
from .lambdas import WrappedCall, unwrap
from .seeding import cpu_seeded

OP_DB_MODULE = "torch.testing._internal.common_methods_invocations"
ENTRY_ATTRS = ("name", "variant_test_name", "op", "method_variant", "aten_name",
               "supports_autograd", "supported_dtypes", "supported_backward_dtypes",
               "sample_inputs", "reference_inputs",
               "reference_inputs_func", "error_inputs", "error_inputs_func",
               "has_nondeterministic_output")
SAMPLE_ATTRS = ("input", "args", "kwargs")
ERROR_ATTRS = ("sample_input", "error_type", "error_regex")
# Namespaces a target may live in: attributes of these resolve on any torch-like candidate.
PUBLIC_PREFIXES = ("torch.nn.functional", "torch.linalg", "torch.special", "torch.fft",
                   "torch.masked", "torch.signal.windows", "torch.sparse", "torch.Tensor", "torch")
MAX_SAMPLES = 48  # taken from one generator call: reference inputs can be hundreds
# Samples read from one generator call to choose those from: a generator that loops over
# sizes first yields its every keyword combination on empty tensors before any other
# (searchsorted's right=True on a non-empty boundary is its 53rd sample)
MAX_READ = 4 * MAX_SAMPLES


class OpInfoChanged(RuntimeError):
    """PyTorch's OpInfo database no longer has the shape this adapter was written against."""


@dataclass(frozen=True)
class Entry:
    """One usable ``op_db`` entry. ``target`` is the API the program calls: a function
    (``method`` False, called as ``target(input, *args, **kwargs)``) or a Tensor method
    (``method`` True, called on the sample's input)."""

    name: str
    variant: str
    index: int  # position in op_db
    target: str
    method: bool
    dtypes: tuple[str, ...]  # every dtype the entry declares for the CPU, sorted
    autograd: bool
    grad_dtypes: tuple[str, ...]  # those its backward supports on the CPU, sorted
    has_errors: bool
    has_reference: bool
    # How a test wrapper (a lambda) passes the sample to the API; None: as it comes
    call: WrappedCall | None = None

    @property
    def key(self) -> str:
        return f"{self.name}.{self.variant}" if self.variant else self.name


@dataclass(frozen=True)
class Skipped:
    name: str
    variant: str
    reason: str


@dataclass(frozen=True)
class Database:
    entries: tuple[Entry, ...]
    skipped: tuple[Skipped, ...]
    total: int  # entries in op_db
    names: frozenset[str]  # distinct op names in op_db


@dataclass(frozen=True)
class Sample:
    """A call's arguments with real tensors: ``target(input, *args, **kwargs)``."""

    input: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def op_db() -> list[Any]:
    """The raw database; ``OpInfoChanged`` when it cannot be imported or is not a list."""
    import importlib

    try:
        module = importlib.import_module(OP_DB_MODULE)
    except ImportError as exc:
        raise OpInfoChanged(f"cannot import {OP_DB_MODULE}: {exc} (it needs expecttest, "
                            "part of alignbot's install; --no-opinfo leaves the OpInfo specs "
                            "out)") from exc
    entries = getattr(module, "op_db", None)
    if not isinstance(entries, list) or not entries:
        raise OpInfoChanged(f"{OP_DB_MODULE}.op_db is no longer a non-empty list")
    return entries


def check_attrs(obj: Any, attrs: tuple[str, ...], what: str) -> None:
    missing = [a for a in attrs if not hasattr(obj, a)]
    if missing:
        raise OpInfoChanged(f"{what} {type(obj).__name__} has no {', '.join(missing)}: "
                            "torch.testing._internal changed; update checks/opinfo/adapter.py")


@functools.cache
def database() -> Database:
    import torch

    entries, skipped = [], []
    raw = op_db()
    for index, info in enumerate(raw):
        check_attrs(info, ENTRY_ATTRS, f"op_db[{index}] ({getattr(info, 'name', '?')})")
        found = _target(torch, info)
        reason = found if isinstance(found, str) else None
        if reason is None and info.has_nondeterministic_output:
            reason = "nondeterministic output"
        if reason is not None:
            skipped.append(Skipped(info.name, info.variant_test_name, reason))
            continue
        assert isinstance(found, tuple)
        entries.append(Entry(info.name, info.variant_test_name, index, found[0], found[1],
                             _names(info.supported_dtypes("cpu")),
                             bool(info.supports_autograd),
                             _names(info.supported_backward_dtypes("cpu")),
                             info.error_inputs_func is not None,
                             info.reference_inputs_func is not None,
                             found[2] if len(found) > 2 else None))
    return Database(tuple(entries), tuple(skipped), len(raw),
                    frozenset(info.name for info in raw))


def _names(dtypes: Any) -> tuple[str, ...]:
    return tuple(sorted(str(d).rsplit(".", 1)[-1] for d in dtypes))


def _target(torch: Any, info: Any) -> tuple[str, bool] | tuple[str, bool, WrappedCall] | str:
    """``(path, is_method)`` of the public API ``info.op`` is, with the :class:`WrappedCall` that
    passes the sample on when ``info.op`` is a test wrapper; or why there is none."""
    fn = info.op
    if any(part.startswith("_") and not _dunder(part) for part in info.name.split(".")):
        return "private op"
    names = list(dict.fromkeys((info.name, info.name.rsplit(".", 1)[-1], info.aten_name)))
    paths = [f"torch.{info.name}"] + [f"{prefix}.{name}" for prefix in PUBLIC_PREFIXES
                                      for name in names]
    for path in paths:  # an ordered list: the same target on every run
        if _lookup(torch, path) is fn:
            return path, path.startswith("torch.Tensor.")
    method = info.method_variant
    path = f"torch.Tensor.{info.name}"
    if getattr(fn, "__name__", "") == "<lambda>" and method is not None \
            and _lookup(torch, path) is method:
        return path, True  # the lambda wraps the method (``lambda x, *a: x.view(*a)``)
    if type(fn).__name__ in ("OpOverload", "OpOverloadPacket"):
        return "aten operator (torch.ops), not a public API"
    if getattr(fn, "__name__", "") == "<lambda>":
        unwrapped = unwrap(fn)
        if isinstance(unwrapped, str):
            return f"a test wrapper (lambda) {unwrapped}"
        called = unwrapped.target.rsplit(".", 1)[-1].rstrip("_")
        if called not in (info.name.rsplit(".", 1)[-1], info.aten_name.rsplit(".", 1)[-1]):
            return f"a test wrapper (lambda) that calls {unwrapped.target}, not its own op"
        if called.startswith(("empty", "new_empty")):
            return "uninitialized output"
        if _lookup(torch, unwrapped.target) is None:
            return "a test wrapper (lambda) around an API the replay cannot resolve"
        return unwrapped.target, unwrapped.method, unwrapped
    return "callable is not a public torch API"


def _dunder(name: str) -> bool:
    """``__radd__``: a Python operator's method, public although it starts with ``_``."""
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _lookup(torch: Any, path: str) -> Any:
    """What the replay finds at ``path``, or None."""
    try:
        return replay.resolve(torch, path)
    except replay.MissingApi:
        return None


def samples(entry: Entry, dtype: str, seed: int, reference: bool,
            requires_grad: bool) -> list[Sample]:
    """The entry's sample (or reference) inputs for ``dtype`` (at most :data:`MAX_READ`),
    drawn from torch's generator seeded with ``seed``; the caller's random state is left as
    it was."""
    import torch

    info = op_db()[entry.index]
    make = info.reference_inputs if reference else info.sample_inputs
    with cpu_seeded(torch, seed):
        drawn = list(itertools.islice(
            make("cpu", getattr(torch, dtype), requires_grad=requires_grad), MAX_READ))
    return [_sample(s) for s in drawn]


def error_samples(entry: Entry, seed: int) -> list[Sample]:
    """The inputs the entry's ``error_inputs`` declare invalid (the expected error types are
    not kept: the reference's own error is what the candidate must match)."""
    import torch

    info = op_db()[entry.index]
    with cpu_seeded(torch, seed):
        drawn = list(itertools.islice(_errors(info), MAX_SAMPLES))
    return [_sample(e.sample_input) for e in drawn]


def _errors(info: Any) -> Iterator[Any]:
    for error in info.error_inputs("cpu"):
        check_attrs(error, ERROR_ATTRS, f"an error input of {info.name}")
        yield error


def _sample(sample: Any) -> Sample:
    check_attrs(sample, SAMPLE_ATTRS, "a sample input")
    return Sample(sample.input, tuple(sample.args), dict(sample.kwargs))


def resolve(path: str) -> Any:
    """The reference's callable at ``path`` (an entry's ``target``)."""
    import torch

    return _lookup(torch, path)
