"""The candidate worker: binds ``torch`` with a prelude, then replays Programs on request.

Started by the engine as ``PYTHON checks/runtime/worker.py PROGRESS_FILE``. Messages arrive on
stdin and leave on the original stdout; the candidate's own prints are sent to stderr so
they cannot corrupt the stream. Before each node the worker writes the node's index into
PROGRESS_FILE, so when the process dies (segfault, abort) or hangs, the engine still knows
which call did it.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import mmap
import os
import re
import struct
import sys
import traceback
import types
from typing import Any

# The line a worker whose interpreter lacks a module the runtime needs (NumPy) ends with:
# the engine turns it into one line that says what to install.
MISSING_MARK = "alignbot-worker-missing:"

try:
    try:
        from .region import replay_program
        from .replay import Hooks
        from .wire import WireError, read_message, write_message
    except ImportError:
        from region import replay_program  # type: ignore[no-redef]
        from replay import Hooks  # type: ignore[no-redef]
        from wire import WireError, read_message, write_message  # type: ignore[no-redef]
except ModuleNotFoundError as _missing:
    traceback.print_exc()  # for --verbose; the marked line is what the engine reads
    sys.stderr.write(f"{MISSING_MARK} {_missing.name}\n")
    raise SystemExit(1) from None


def _load_callable(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _start(message: dict[str, Any]) -> tuple[Any, Hooks, dict[str, Any]]:
    for entry in reversed(message.get("sys_path") or []):
        sys.path.insert(0, entry)  # the candidate's own folder, as for `python -c` run there
    # The prelude runs as a real module: code that imports the module of a function by its
    # __module__ (pickle, torch.compile's Dynamo) finds it in sys.modules.
    module = types.ModuleType("__alignbot_prelude__")
    sys.modules[module.__name__] = module
    namespace: dict[str, Any] = module.__dict__
    exec(compile(message["prelude"], "<prelude>", "exec"), namespace)
    if "torch" not in namespace:
        raise RuntimeError("the prelude did not bind the name 'torch'")
    overrides = dict(namespace.get("alignbot_overrides", {}))
    for name, spec in (message.get("overrides") or {}).items():
        overrides[name] = _load_callable(spec)
    hooks = Hooks(
        overrides=overrides,
        wrap=namespace.get("alignbot_wrap"),
        device=str(namespace.get("alignbot_device", "cpu")),
        program=namespace.get("alignbot_program"),
        wrap_also=_wrap_also(namespace.get("alignbot_wrap_also")),
    )
    # what it declares it cannot do (checks/capabilities.py judges the values)
    declared = {"capabilities": _plain(namespace.get("alignbot_capabilities")),
                "precision": _plain(namespace.get("alignbot_precision"))}
    return namespace["torch"], hooks, declared


def _plain(value: Any) -> Any:
    """``value`` if it is plain data the wire carries as it is, else its repr, bounded."""
    plain = (str, bool, int, float, type(None))
    if isinstance(value, plain) and not (isinstance(value, str) and len(value) > 200):
        return value
    if isinstance(value, dict) and len(value) <= 16 and all(
            isinstance(k, str) and len(k) <= 100 and isinstance(v, plain) and
            not isinstance(v, str) for k, v in value.items()):
        return dict(value)
    return repr(value)[:200]


def _wrap_also(value: Any) -> Any:
    """The prelude's ``alignbot_wrap_also``: a predicate on a call's name, or names and
    patterns (one string is one pattern); anything else is the prelude's mistake."""
    if value is None or callable(value):
        return value
    if isinstance(value, str):
        return frozenset({value})
    try:
        names = frozenset(value)
    except TypeError:
        names = None
    if names is None or not all(isinstance(name, str) for name in names):
        raise TypeError("alignbot_wrap_also must be a function of a call's name, or a set of "
                        f"names and patterns such as {{'torch.optim.*'}}, not {value!r:.80}")
    return names


MAX_PACKAGES = 16
PACKAGE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
PACKAGE_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}")


def imported_packages(prelude: str) -> list[str]:
    """The top-level packages the prelude's own import statements name, in order, without
    the standard library's: what is being checked (``torchax``, ``openvino``, ``paddle``)."""
    try:
        tree = ast.parse(prelude)
    except SyntaxError:
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found = [node.module]
        else:
            continue
        for name in found:
            top = name.split(".")[0]
            if top not in names and top not in sys.stdlib_module_names:
                names.append(top)
    return names


def package_versions(prelude: str) -> list[list[str]]:
    """``[[name, version], …]`` of :func:`imported_packages`, read from the imported module
    (``__version__``), else from the installed distribution; at most ``MAX_PACKAGES``,
    names and versions that look like nothing else (the prelude is the candidate's code)."""
    found: list[list[str]] = []
    distributions: dict[str, list[str]] = {}
    for name in imported_packages(prelude):
        if not PACKAGE_NAME.fullmatch(name):
            continue
        version = _version_of(name, distributions)
        if version is not None:
            found.append([name, version])
        if len(found) >= MAX_PACKAGES:
            break
    return found


def _version_of(name: str, distributions: dict[str, list[str]]) -> str | None:
    """The module's ``__version__``, else its installed distribution's version
    (``distributions``: importlib.metadata's map of top-level names, read once), whichever
    first looks like a version (OpenVINO's own, ``2026.4.1-22982-…-releases/2026/4``, holds
    a ``/``; its distribution says ``2026.4.1``); else None."""
    module = sys.modules.get(name)
    try:
        own = getattr(module, "__version__", None) if module is not None else None
    except Exception:
        own = None
    own = str.strip(own) if isinstance(own, str) else None  # no str subclass's own methods
    if own is not None and PACKAGE_VERSION.fullmatch(own):
        return own
    try:
        from importlib import metadata

        if not distributions:
            distributions.update(metadata.packages_distributions())
        installed = str.strip(metadata.version((distributions.get(name) or [name])[0]))
        if PACKAGE_VERSION.fullmatch(installed):
            return installed
    except Exception:
        pass
    return None


def _hide_runtime() -> None:
    """The runtime's modules (``values``, ``wire``, …) must not shadow the candidate's own."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    for name in ("values", "wire", "replay", "region", "literals", "program_types"):
        module = sys.modules.pop(name, None)
        if module is not None:
            _rename(module, f"_alignbot_{name}")


def _rename(module: types.ModuleType, name: str) -> None:
    """Register a runtime module under its hidden name, and name its functions and classes
    after it: a compiler tracing them (Dynamo, through ``alignbot_program``) imports the
    module of each function by its ``__module__``."""
    old, module.__name__ = module.__name__, name
    sys.modules[name] = module
    for value in list(vars(module).values()):
        if getattr(value, "__module__", None) == old:
            with contextlib.suppress(AttributeError, TypeError):
                value.__module__ = name


def main() -> int:
    _hide_runtime()
    progress_path = sys.argv[1]
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    stdin = sys.stdin.buffer
    with open(progress_path, "r+b") as handle:
        progress = mmap.mmap(handle.fileno(), 8)

    def mark(index: int) -> None:
        struct.pack_into("<q", progress, 0, index)

    torch: Any = None
    hooks = Hooks()
    while True:
        try:
            message = read_message(stdin)
        except WireError:
            return 0
        cmd = message.get("cmd")
        if cmd == "exit":
            return 0
        if cmd == "start":
            try:
                torch, hooks, declared = _start(message)
            except BaseException as exc:  # the prelude is user code: report anything
                write_message(out, {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                                    "traceback": traceback.format_exc(limit=6),
                                    "missing": exc.name if isinstance(
                                        exc, ModuleNotFoundError) else None})
                continue
            write_message(out, {"ok": True, "version": str(getattr(torch, "__version__", "?")),
                                "module": getattr(torch, "__name__", "?"),
                                "packages": package_versions(str(message["prelude"])),
                                "declared": declared})
        elif cmd == "run":
            mark(-1)
            observations = replay_program(torch, message["program"], hooks, progress=mark)
            write_message(out, {"ok": True, "observations": observations})
        else:
            write_message(out, {"ok": False, "error": f"unknown command {cmd!r}"})


if __name__ == "__main__":
    sys.exit(main())
