"""The App's features never import one another: each imports only layers (storage, queue,
github, markers, config, policy, jobs, webhooks, …), so that a feature can be changed, split or
removed alone. Checked by parsing every module under bot/ with ``ast``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BOT = ROOT / "bot"

# A feature is a module or a package under bot/; everything else there is a layer (or, like
# serve.py and demo.py, the place where the features are put together).
FEATURES = {"alignment", "trust", "commands", "reminders", "status"}

# Feature → feature imports there were before this rule; the list must only ever shrink.
KNOWN: set[tuple[str, str]] = set()


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(path: Path, root: Path = ROOT) -> set[str]:
    """The ``bot`` modules that the module at ``path`` imports (relative imports resolved),
    wherever the import statement is (top level, a function, ``TYPE_CHECKING``)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            # ``from . import alignment`` and ``from bot import trust`` name modules too
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {module for module in found if module == "bot" or module.startswith("bot.")}


def feature_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FEATURES else None


def feature_imports() -> set[tuple[str, str, str]]:
    """(feature, the feature it imports, the importing module) for every such import."""
    found = set()
    for path in sorted(BOT.rglob("*.py")):
        source = feature_of(module_name(path))
        if source is None:
            continue
        for module in imported(path):
            target = feature_of(module)
            if target is not None and target != source:
                found.add((source, target, module_name(path)))
    return found


def test_every_feature_exists() -> None:
    for feature in FEATURES:
        assert (BOT / f"{feature}.py").is_file() or (BOT / feature / "__init__.py").is_file()


def test_features_do_not_import_each_other() -> None:
    unexpected = sorted(item for item in feature_imports() if item[:2] not in KNOWN)
    assert unexpected == [], "features import other features (move what they share into a "\
        "layer such as bot/policy.py or bot/jobs.py): " + ", ".join(
            f"{module} imports bot.{target}" for _, target, module in unexpected)


def test_known_exceptions_are_still_needed() -> None:
    """An exception that is gone must leave ``KNOWN`` (so that it cannot come back)."""
    assert {item[:2] for item in feature_imports()} >= KNOWN


@pytest.mark.parametrize(("source", "path", "expected"), [
    ("from ..alignment import JOB_KIND", "bot/commands/job.py",
     {"bot.alignment", "bot.alignment.JOB_KIND"}),
    ("from .. import trust", "bot/commands/__init__.py", {"bot", "bot.trust"}),
    ("from .alignment import x", "bot/commands/__init__.py",
     {"bot.commands.alignment", "bot.commands.alignment.x"}),
    ("from ...reminders import x", "bot/commands/handlers/remind.py",
     {"bot.reminders", "bot.reminders.x"}),
    ("import bot.scheduler", "bot/trust.py", {"bot.scheduler"}),
    ("def f():\n    from bot.trust import is_ok", "bot/alignment.py",
     {"bot.trust", "bot.trust.is_ok"}),
])
def test_imports_are_resolved(tmp_path: Path, source: str, path: str,
                              expected: set[str]) -> None:
    """The checker itself: relative imports at every depth, and imports in functions."""
    module = tmp_path / path
    module.parent.mkdir(parents=True, exist_ok=True)
    module.write_text(source + "\n")
    assert imported(module, tmp_path) == expected
