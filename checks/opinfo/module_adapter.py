"""The one adapter over PyTorch's private ModuleInfo database (``torch.testing._internal``).

``torch.testing._internal.common_modules.module_db`` lists ``torch.nn`` module classes with
constructor and forward inputs; like ``op_db`` it is private and changes between releases, so
nothing else in alignbot reads it. :func:`database` imports it (only when OpInfo specs are
asked for) and checks, before reading anything, that every entry and sample still has the
attributes read here: :class:`~alignbot.checks.opinfo.adapter.OpInfoChanged` names what is missing.

An entry becomes a :class:`ModuleEntry` when its class is ``torch.nn.<Name>`` (what a
candidate's replay resolves); the others are :class:`~alignbot.checks.opinfo.adapter.Skipped`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from .adapter import OpInfoChanged, Skipped, _lookup, check_attrs
from .seeding import cpu_seeded

MODULE_DB_MODULE = "torch.testing._internal.common_modules"
ENTRY_ATTRS = ("name", "module_cls", "module_inputs_func", "supported_dtypes",
               "train_and_eval_differ", "module_error_inputs_func")
ERROR_ATTRS = ("module_error_input", "error_on", "error_type", "error_regex")
SAMPLE_ATTRS = ("constructor_input", "forward_input", "desc")
FUNCTION_INPUT_ATTRS = ("args", "kwargs")
MAX_SAMPLES = 48  # taken from one generator call: LinearCrossEntropyLoss makes hundreds


@dataclass(frozen=True)
class ModuleEntry:
    """One usable ``module_db`` entry: the class at ``target`` (``torch.nn.LSTM``)."""

    name: str  # ``nn.LSTM``
    index: int  # position in module_db
    target: str
    dtypes: tuple[str, ...]  # every dtype the entry declares for the CPU, sorted
    train_and_eval_differ: bool
    has_errors: bool = False  # the entry declares inputs its constructor or forward rejects


@dataclass(frozen=True)
class ModuleDatabase:
    entries: tuple[ModuleEntry, ...]
    skipped: tuple[Skipped, ...]
    total: int  # entries (module classes) in module_db


@dataclass(frozen=True)
class ModuleSample:
    """``module_cls(*constructor_args, **constructor_kwargs)(*args, **kwargs)``."""

    constructor_args: tuple[Any, ...]
    constructor_kwargs: dict[str, Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    desc: str


def module_db() -> list[Any]:
    """The raw database; ``OpInfoChanged`` when it cannot be imported or is not a list."""
    import importlib

    try:
        module = importlib.import_module(MODULE_DB_MODULE)
    except ImportError as exc:
        raise OpInfoChanged(f"cannot import {MODULE_DB_MODULE}: {exc}") from exc
    entries = getattr(module, "module_db", None)
    if not isinstance(entries, list) or not entries:
        raise OpInfoChanged(f"{MODULE_DB_MODULE}.module_db is no longer a non-empty list")
    return entries


@functools.cache
def database() -> ModuleDatabase:
    import torch

    entries, skipped = [], []
    raw = module_db()
    for index, info in enumerate(raw):
        check_attrs(info, ENTRY_ATTRS, f"module_db[{index}] ({getattr(info, 'name', '?')})")
        cls = info.module_cls
        target = f"torch.nn.{getattr(cls, '__name__', '?')}"
        if _lookup(torch, target) is not cls:
            skipped.append(Skipped(info.name, "", "class is not a public torch.nn API"))
            continue
        dtypes = tuple(sorted(str(d).rsplit(".", 1)[-1] for d in info.supported_dtypes("cpu")))
        entries.append(ModuleEntry(info.name, index, target, dtypes,
                                   bool(info.train_and_eval_differ),
                                   info.module_error_inputs_func is not None))
    return ModuleDatabase(tuple(entries), tuple(skipped), len(raw))


def samples(entry: ModuleEntry, dtype: str, seed: int, training: bool) -> list[ModuleSample]:
    """The entry's module inputs for ``dtype`` and mode, drawn from torch's generator seeded
    with ``seed``; the caller's random state is left as it was."""
    import torch

    info = module_db()[entry.index]
    with cpu_seeded(torch, seed):
        drawn = info.module_inputs_func(info, device="cpu", dtype=getattr(torch, dtype),
                                        requires_grad=True, training=training)
    return [_sample(s) for s in list(drawn)[:MAX_SAMPLES]]


def error_samples(entry: ModuleEntry, dtype: str, seed: int) -> list[ModuleSample]:
    """The module inputs the entry declares invalid (the expected error types are not kept:
    the reference's own error is what the candidate must match)."""
    import torch

    info = module_db()[entry.index]
    with cpu_seeded(torch, seed):
        drawn = info.module_error_inputs_func(info, device="cpu", dtype=getattr(torch, dtype),
                                              requires_grad=False, training=True)
    errors = list(drawn)[:MAX_SAMPLES]
    for error in errors:
        check_attrs(error, ERROR_ATTRS, f"an error input of {info.name}")
    return [_sample(error.module_error_input) for error in errors]


def _sample(sample: Any) -> ModuleSample:
    check_attrs(sample, SAMPLE_ATTRS, "a module input")
    construct, forward = sample.constructor_input, sample.forward_input
    check_attrs(construct, FUNCTION_INPUT_ATTRS, "a module input's constructor_input")
    if forward is None:
        return ModuleSample(tuple(construct.args), dict(construct.kwargs), (), {}, sample.desc)
    check_attrs(forward, FUNCTION_INPUT_ATTRS, "a module input's forward_input")
    return ModuleSample(tuple(construct.args), dict(construct.kwargs), tuple(forward.args),
                        dict(forward.kwargs), str(sample.desc))
