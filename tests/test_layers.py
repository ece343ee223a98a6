"""The App's features never import one another: each imports only layers (storage, queue,
github, markers, config, policy, jobs, webhooks, …), so that a feature can be changed, split or
removed alone; and the App imports the engine through its face, ``alignbot.checks.api``, alone.
Checked
by parsing every module under bot/ with ``ast`` (``tests/imports.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from imports import module_name, statements

ROOT = Path(__file__).resolve().parent.parent
BOT = ROOT / "bot"

# A feature is a module or a package under bot/; everything else there is a layer (or, like
# serve.py and demo.py, the place where the features are put together).
FEATURES = {"alignment", "trust", "commands", "reminders", "status"}

# Feature → feature imports there were before this rule; the list must only ever shrink.
KNOWN: set[tuple[str, str]] = set()

# The one engine module the App imports: what the App relies on, in one list.
FACE = "alignbot.checks.api"


def imported(path: Path, root: Path = ROOT, top: str = "alignbot.bot") -> set[str]:
    """The modules of package ``top`` that the module at ``path`` imports (relative imports
    resolved), wherever the import statement is (top level, a function, ``TYPE_CHECKING``)."""
    found: set[str] = set()
    for target, names in statements(path, root):
        found.add(target)
        # ``from . import alignment`` and ``from alignbot.bot import trust`` name modules too
        found.update(f"{target}.{name}" for name in names)
    return {module for module in found if module == top or module.startswith(top + ".")}


def feature_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[2] in FEATURES else None


def feature_imports() -> set[tuple[str, str, str]]:
    """(feature, the feature it imports, the importing module) for every such import."""
    found = set()
    for path in sorted(BOT.rglob("*.py")):
        source = feature_of(module_name(path, ROOT))
        if source is None:
            continue
        for module in imported(path):
            target = feature_of(module)
            if target is not None and target != source:
                found.add((source, target, module_name(path, ROOT)))
    return found


def engine_imports() -> set[tuple[str, str]]:
    """(the importing module, the ``checks`` module) for every import of the engine under
    bot/ that does not go through ``alignbot.checks.api`` (``alignbot.checks.api.X`` is a name of
    the face)."""
    return {(module_name(path, ROOT), module) for path in sorted(BOT.rglob("*.py"))
            for module in imported(path, top="alignbot.checks")
            if module != FACE and not module.startswith(FACE + ".")}


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


def test_the_app_imports_the_engine_only_through_its_face() -> None:
    unexpected = sorted(engine_imports())
    assert unexpected == [], f"the App imports the engine only through {FACE} (re-export "\
        "there what it needs): " + ", ".join(f"{module} imports {target}"
                                             for module, target in unexpected)


def test_the_face_holds_what_the_app_uses_and_no_more() -> None:
    """Every name of ``alignbot.checks.api`` is imported somewhere in bot/: the face is the list of
    what the App relies on, so a name the App stopped using leaves it."""
    import alignbot.checks.api

    used = {name for path in sorted(BOT.rglob("*.py"))
            for target, names in statements(path, ROOT) if target == FACE for name in names}
    assert used == set(alignbot.checks.api.__all__)


@pytest.mark.parametrize(("source", "path", "expected"), [
    ("from ..alignment import JOB_KIND", "bot/commands/job.py",
     {"alignbot.bot.alignment", "alignbot.bot.alignment.JOB_KIND"}),
    ("from .. import trust", "bot/commands/__init__.py", {"alignbot.bot", "alignbot.bot.trust"}),
    ("from .alignment import x", "bot/commands/__init__.py",
     {"alignbot.bot.commands.alignment", "alignbot.bot.commands.alignment.x"}),
    ("from ...reminders import x", "bot/commands/handlers/remind.py",
     {"alignbot.bot.reminders", "alignbot.bot.reminders.x"}),
    ("import alignbot.bot.scheduler", "bot/trust.py", {"alignbot.bot.scheduler"}),
    ("def f():\n    from alignbot.bot.trust import is_ok", "bot/alignment.py",
     {"alignbot.bot.trust", "alignbot.bot.trust.is_ok"}),
])
def test_imports_are_resolved(tmp_path: Path, source: str, path: str,
                              expected: set[str]) -> None:
    """The checker itself: relative imports at every depth, and imports in functions."""
    module = tmp_path / path
    module.parent.mkdir(parents=True, exist_ok=True)
    module.write_text(source + "\n")
    assert imported(module, tmp_path) == expected


@pytest.mark.parametrize(("source", "expected"), [
    ("from alignbot.checks.api import Kind", {"alignbot.checks.api", "alignbot.checks.api.Kind"}),
    ("import alignbot.checks.report", {"alignbot.checks.report"}),
    ("from alignbot.checks import causes", {"alignbot.checks", "alignbot.checks.causes"}),
    ("def f():\n    from alignbot.checks.known import KNOWN_PATH",
     {"alignbot.checks.known", "alignbot.checks.known.KNOWN_PATH"}),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
     "    from alignbot.checks.triage import Verdict",
     {"alignbot.checks.triage", "alignbot.checks.triage.Verdict"}),
    ("from .checks import x", set()),
])
def test_engine_imports_are_found(tmp_path: Path, source: str, expected: set[str]) -> None:
    """The checker of the face: engine imports in functions and under ``TYPE_CHECKING`` too;
    a relative import is the App's own module, not the engine."""
    module = tmp_path / "bot" / "feature.py"
    module.parent.mkdir(parents=True)
    module.write_text(source + "\n")
    assert imported(module, tmp_path, top="alignbot.checks") == expected
