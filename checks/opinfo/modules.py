"""A spec per ModuleInfo entry: a ``torch.nn`` module built, put in a mode and called on one of
the entry's own module inputs, every choice drawn through the DSL.

A draw picks, in this order: a dtype among the entry's CPU dtypes that the Program format
carries (:data:`alignbot.checks.opinfo.specs.DTYPES`, float32 first), the mode (training or
evaluation, only where the entry says they differ; otherwise the module stays in training
mode, as built), a seed for the input generator and a sample. The program builds the module
from the sample's constructor input (its initial parameters and buffers travel with the
Program), converts it with ``.to(dtype)`` for another dtype, calls ``.eval()`` for evaluation
mode, and calls it on the forward input; the backward pass runs where the output needs it.

Randomness: a sample whose forward gives different results under two generator seeds
(dropout in training mode) cannot be compared value by value, and is left out of the pool
for that mode; its evaluation-mode draws stay. A sample that cannot be written as a Program
(a module instance or a non-torch callable as a constructor argument, an unsupported dtype)
is left out too, with the reason counted (:func:`coverage`).

Where the entry declares error inputs, ``moduleinfo.nn.<Module>.errors`` builds and calls the
module on one of those the reference rejects here (``raises=True``).
"""

from __future__ import annotations

import functools
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..dsl import random, random_bool
from ..runtime.replay import materialized
from ..runtime.values import observe
from ..spec import Spec
from . import module_adapter
from .adapter import PUBLIC_PREFIXES, Sample, _lookup
from .module_adapter import ModuleEntry, ModuleSample
from .specs import DTYPES, Catalog, Plan, TensorValue, Unsupported, arguments, gather, plan

SEEDS = 2**16
SAMPLE_DRAWS = 10
ERROR_DRAWS = 5
RANDOM_IN_TRAINING = "its forward is random in training mode (dropout)"


@dataclass(frozen=True)
class ModulePlan:
    """A module sample with its tensors replaced by :class:`TensorValue`; ``functions`` are
    constructor keywords given a torch function (``activation=F.gelu``), by its path."""

    constructor: Plan
    functions: dict[str, str]
    forward: Plan
    desc: str


@dataclass
class Pool:
    plans: tuple[ModulePlan, ...] = ()
    left_out: Counter[str] = field(default_factory=Counter)  # reason -> samples


def function_path(fn: Any) -> str | None:
    """The public path of a torch function (``torch.nn.functional.gelu``), or None."""
    import torch

    name = getattr(fn, "__name__", "")
    for prefix in PUBLIC_PREFIXES:
        path = f"{prefix}.{name}"
        if name and _lookup(torch, path) is fn:
            return path
    return None


def plan_module(sample: ModuleSample) -> ModulePlan:
    """``sample`` checked and copied; raises :class:`Unsupported`."""
    import torch

    functions: dict[str, str] = {}
    kwargs: dict[str, Any] = {}
    for key, value in sample.constructor_kwargs.items():
        if callable(value) and not isinstance(value, (torch.Tensor, torch.nn.Module, type)):
            path = function_path(value)
            if path is None:
                raise Unsupported(f"a constructor argument {type(value).__name__}")
            functions[key] = path
        else:
            kwargs[key] = value
    for value in (*sample.constructor_args, *kwargs.values()):
        if isinstance(value, torch.nn.Module):
            raise Unsupported("a module instance as a constructor argument")
    return ModulePlan(plan(Sample(None, sample.constructor_args, kwargs)), functions,
                      plan(Sample(None, sample.args, sample.kwargs)), sample.desc)


def _path(torch: Any, target: str) -> Any:
    fn = torch
    for part in target.split(".")[1:]:
        fn = getattr(fn, part)
    return fn


def call(torch: Any, entry: ModuleEntry, planned: ModulePlan, dtype: str,
         training: bool, make: Callable[[TensorValue], Any] | None = None,
         forward_seed: int | None = None) -> Any:
    """Build, convert, set the mode of and call the module: recorded when ``torch`` is the
    spec's proxy; with ``make``, run on real tensors (the pool's checks), seeding the
    generator with ``forward_seed`` before the forward call."""
    extra = {} if make is None else {"make": make}
    _, cargs, ckwargs = arguments(planned.constructor, **extra)
    ckwargs.update({k: _path(torch, path) for k, path in planned.functions.items()})
    module = _path(torch, entry.target)(*cargs, **ckwargs)
    if dtype != "float32":
        module = module.to(getattr(torch, dtype))
    if not training:
        module = module.eval()
    _, args, kwargs = arguments(planned.forward, **extra)
    if forward_seed is not None:
        if not all(materialized(t) for t in module.parameters()):
            module(*args, **kwargs)  # a lazy module makes its parameters, as the replay does
        torch.manual_seed(forward_seed)
    return module(*args, **kwargs)


def _real(value: TensorValue) -> Any:
    import torch

    tensor = torch.from_numpy(value.array.copy())
    return tensor.requires_grad_(True) if value.requires_grad else tensor


def _check(entry: ModuleEntry, planned: ModulePlan, dtype: str, training: bool) -> str | None:
    """Why the reference's result on the sample cannot be compared, or None. A call that
    raises can be: raising is compared too. The module is built twice from one seed (the
    same parameters) and called under two others: results that differ are random."""
    import torch

    results = []
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the traced call warns again, where it counts
        for seed in (1, 2):
            torch.manual_seed(0)
            try:
                results.append(call(torch, entry, planned, dtype, training, _real,
                                    forward_seed=seed))
            except Exception:
                return None
    leaves = [_leaves(result) for result in results]
    try:
        for item in leaves[0]:
            observe(torch, item)
    except Exception as exc:
        return f"an output the engine cannot observe ({type(exc).__name__})"
    for first, second in zip(*leaves, strict=True):
        if isinstance(first, torch.Tensor) and not torch.equal(
                first.detach().nan_to_num(), second.detach().nan_to_num()):
            return RANDOM_IN_TRAINING if training else "its forward is random"
    return None


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


@functools.lru_cache(maxsize=256)
def pool(entry: ModuleEntry, dtype: str, seed: int, training: bool) -> Pool:
    """The samples a draw picks from, and why the others were left out."""
    judged = _judged(entry, dtype, seed, training)
    if seed != 0:
        # whether a sample's forward is random or observable depends on how it is built,
        # not on its values: each sample takes the verdict of seed 0's sample at its place
        first = _judged(entry, dtype, 0, training)
        same = len(first) == len(judged)
        judged = [(planned, reason if planned is None else first[index][1] if same
                   else _check(entry, planned, dtype, training))
                  for index, (planned, reason) in enumerate(judged)]
    made = Pool()
    for planned, reason in judged:
        if reason is not None:
            made.left_out[reason] += 1
        elif planned is not None:
            made.plans += (planned,)
    return made


@functools.lru_cache(maxsize=256)
def _judged(entry: ModuleEntry, dtype: str, seed: int, training: bool
            ) -> list[tuple[ModulePlan | None, str | None]]:
    """Each sample planned (or None) and why it cannot be compared (or None); the forward is
    run (:func:`_check`) only for seed 0, which the other seeds take their verdicts from."""
    try:
        drawn = module_adapter.samples(entry, dtype, seed, training)
    except module_adapter.OpInfoChanged:
        raise
    except Exception as exc:  # the database's own generator failed: nothing to draw from
        return [(None, f"its input generator raised {type(exc).__name__}")]
    judged: list[tuple[ModulePlan | None, str | None]] = []
    for sample in drawn:
        try:
            planned = plan_module(sample)
        except Unsupported as exc:
            judged.append((None, str(exc)))
            continue
        judged.append((planned, _check(entry, planned, dtype, training) if seed == 0
                       else None))
    return judged


@functools.lru_cache(maxsize=256)
def error_pool(entry: ModuleEntry, dtype: str, seed: int) -> tuple[ModulePlan, ...]:
    """The entry's error inputs that a Program can carry and that the reference rejects
    here (on the CPU, in training mode)."""
    import torch

    try:
        drawn = module_adapter.error_samples(entry, dtype, seed)
    except module_adapter.OpInfoChanged:
        raise
    except Exception:  # the database's own generator failed: nothing to draw from
        return ()
    plans = []
    for sample in drawn:
        try:
            planned = plan_module(sample)
        except Unsupported:
            continue
        with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                call(torch, entry, planned, dtype, True, _real)
            except Exception:
                plans.append(planned)
    return tuple(plans)


def dtypes_of(entry: ModuleEntry) -> tuple[str, ...]:
    return tuple(d for d in DTYPES if d in entry.dtypes)


def module_spec(entry: ModuleEntry, dtypes: tuple[str, ...]) -> Spec:
    def fn(torch: Any) -> Any:
        dtype = dtypes[int(random(0, len(dtypes)))]
        training = not entry.train_and_eval_differ or bool(random_bool())
        plans = pool(entry, dtype, int(random(0, SEEDS)), training).plans
        if not plans:
            return None
        return call(torch, entry, plans[int(random(0, len(plans)))], dtype, training)

    name = f"moduleinfo.{entry.name}"
    fn.__name__ = fn.__qualname__ = name
    return Spec(name=name, fn=fn, n=SAMPLE_DRAWS, backward=True, ops=(entry.target,),
                source="ModuleInfo")


def error_spec(entry: ModuleEntry, dtype: str) -> Spec:
    """The entry's error inputs, declared invalid: the candidate must reject them too."""
    def fn(torch: Any) -> Any:
        plans = error_pool(entry, dtype, int(random(0, SEEDS)))
        if not plans:
            return None
        return call(torch, entry, plans[int(random(0, len(plans)))], dtype, True)

    name = f"moduleinfo.{entry.name}.errors"
    fn.__name__ = fn.__qualname__ = name
    return Spec(name=name, fn=fn, n=ERROR_DRAWS, backward=False, raises=True,
                ops=(entry.target,), source="ModuleInfo")


def catalog() -> Catalog:
    """Every ModuleInfo spec, and the reasons for the entries that gave none."""
    data = module_adapter.database()
    return gather(data.skipped, data.entries, dtypes_of,
                  lambda entry, dtypes: [module_spec(entry, dtypes)]
                  + ([error_spec(entry, dtypes[0])] if entry.has_errors else []))


@dataclass(frozen=True)
class Coverage:
    """Which module classes a spec exercises: those with a usable sample in some mode (for
    the first dtype and seed 0, what a draw shrinks to), and why each other one has none."""

    total: int
    exercised: tuple[str, ...]
    left_out: dict[str, str]  # entry name -> reason

    def render(self) -> str:
        """Lines for ``alignbot specs --opinfo``: the count and each class left out."""
        lines = [f"ModuleInfo: {len(self.exercised)} of {self.total} module classes exercised"
                 + ("; left out:" if self.left_out else "")]
        lines += [f"  {name}: {reason}" for name, reason in self.left_out.items()]
        return "\n".join(lines) + "\n"


def coverage() -> Coverage:
    data = module_adapter.database()
    exercised, left_out = [], {}
    for skipped in data.skipped:
        left_out[skipped.name] = skipped.reason
    for entry in data.entries:
        dtypes = dtypes_of(entry)
        if not dtypes:
            left_out[entry.name] = "no CPU dtype the Program format carries"
            continue
        modes = (True, False) if entry.train_and_eval_differ else (True,)
        pools = [pool(entry, dtypes[0], 0, training) for training in modes]
        if any(p.plans for p in pools):
            exercised.append(entry.name)
            continue
        reasons = sum((p.left_out for p in pools), Counter[str]())
        left_out[entry.name] = ", ".join(r for r, _ in reasons.most_common(2)) or "no samples"
    return Coverage(data.total, tuple(exercised), left_out)
