"""Specs: functions that draw a program against a ``torch`` proxy, and the registry of them."""

from __future__ import annotations

import fnmatch
import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

SpecFn = Callable[[Any], Any]


@dataclass(frozen=True)
class Spec:
    """One spec. ``raises`` declares that every draw is an invalid input the reference must
    reject; ``ops`` names the PyTorch APIs it exercises (used by ``--ops`` and the bot)."""

    name: str
    fn: SpecFn = field(compare=False)
    n: int = 20
    rtol: float | None = None
    atol: float | None = None
    backward: bool = True
    raises: bool = False
    ops: tuple[str, ...] = ()
    source: str = "DSL"  # what the spec is written in: the DSL of checks.dsl (autotest)

    def matches(self, patterns: Iterable[str]) -> bool:
        names = {self.name, self.name.rsplit(".", 1)[-1], *self.ops}
        names |= {op.rsplit(".", 1)[-1] for op in self.ops}
        return any(fnmatch.fnmatchcase(n, p) for p in patterns for n in names)


_REGISTRY: dict[str, Spec] = {}


def autotest(n: int = 20, rtol: float | None = None, atol: float | None = None,
             backward: bool = True, raises: bool = False, ops: Iterable[str] = (),
             name: str | None = None) -> Callable[[SpecFn], SpecFn]:
    """Register ``fn(torch)`` as a spec drawn ``n`` times; tolerances override the dtype table."""
    if (rtol is None) != (atol is None):
        raise ValueError("autotest: give both rtol and atol, or neither")

    def register(fn: SpecFn) -> SpecFn:
        family = fn.__module__.rsplit(".", 1)[-1]
        spec = Spec(name=name or f"{family}.{fn.__name__}", fn=fn, n=n, rtol=rtol, atol=atol,
                    backward=backward, raises=raises, ops=tuple(ops))
        _REGISTRY[spec.name] = spec
        fn.spec = spec  # type: ignore[attr-defined]
        return fn

    return register


def load_library() -> None:
    """Import every module of ``checks.library`` so their specs register."""
    from . import library

    for info in pkgutil.iter_modules(library.__path__):
        importlib.import_module(f"{library.__name__}.{info.name}")


def library_specs() -> list[Spec]:
    """The built-in library's specs, by name."""
    load_library()
    prefix = f"{__package__}.library."
    return [spec for spec in all_specs() if spec.fn.__module__.startswith(prefix)]


def load_file(path: Path) -> list[Spec]:
    """Import a spec file from a repository (a path, not an installed module)."""
    module_name = f"alignbot_user_specs.{path.stem}"
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise ValueError(f"cannot load spec file {path}")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[module_name] = module
    loader_spec.loader.exec_module(module)
    return [spec for name, spec in sorted(_REGISTRY.items()) if spec.fn.__module__ == module_name]


def all_specs() -> list[Spec]:
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


class SpecFileError(Exception):
    """A spec file that cannot be loaded: its path and what went wrong."""


@dataclass(frozen=True)
class SpecSource:
    """Where a run's specs come from: the built-in library, spec files, or both. A worker
    process loads the same specs from it: a spec's function need not be importable by name."""

    library: bool = True
    files: tuple[Path, ...] = ()
    opinfo: bool = False  # PyTorch's OpInfo database (checks/opinfo)
    opinfo_draws: int | None = None  # at most this many draws per OpInfo spec (None: its own)

    def load(self) -> list[Spec]:
        """The source's specs, by name."""
        specs = self._dsl()
        if self.opinfo:
            from .opinfo import opinfo_specs

            cap = self.opinfo_draws
            made = [s if cap is None or s.n <= cap else replace(s, n=cap)
                    for s in opinfo_specs()]
            specs = sorted(specs + made, key=lambda spec: spec.name)
        return specs

    def _dsl(self) -> list[Spec]:
        """The library's specs (if asked) and the files', never others that this process
        happened to load before: a worker process loads exactly the same."""
        by_name = {spec.name: spec for spec in library_specs()} if self.library else {}
        for path in self.files:
            if not path.is_file():
                raise SpecFileError(f"{path}: no such file")
            try:
                by_name.update((spec.name, spec) for spec in load_file(path))
            except Exception as exc:
                raise SpecFileError(f"{path}: {type(exc).__name__}: {exc}") from exc
        return [by_name[name] for name in sorted(by_name)]
