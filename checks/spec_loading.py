"""Loading specs: the built-in library, spec files, PyTorch's OpInfo database (``--opinfo``)."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from .spec import Spec, all_specs


def load_library() -> None:
    """Import every module of ``alignbot.checks.library`` so their specs register."""
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
    return [spec for spec in all_specs() if spec.fn.__module__ == module_name]


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
                raise SpecFileError(f"{path}: {_not_a_file(path)}")
            try:
                by_name.update((spec.name, spec) for spec in load_file(path))
            except Exception as exc:
                raise SpecFileError(f"{path}: {type(exc).__name__}: {exc}") from exc
        return [by_name[name] for name in sorted(by_name)]


def _not_a_file(path: Path) -> str:
    """Why ``path`` is no spec file, and what is expected."""
    if path.is_dir():
        return ("is a directory; expected a Python file of @autotest specs (one --spec-file "
                "per file)")
    return "no such file" if not path.exists() else "not a regular file"
