"""The App's features never import one another: each imports only layers (storage, queue,
github, markers, config, policy, jobs, webhooks, …), so that a feature can be changed, split or
removed alone; and the App imports the engine through its face, ``checks.api``, alone. Checked
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
FACE = "checks.api"


def imported(path: Path, root: Path = ROOT, top: str = "bot") -> set[str]:
    """The modules of package ``top`` that the module at ``path`` imports (relative imports
    resolved), wherever the import statement is (top level, a function, ``TYPE_CHECKING``)."""
    found: set[str] = set()
    for target, names in statements(path, root):
        found.add(target)
        # ``from . import alignment`` and ``from bot import trust`` name modules too
        found.update(f"{target}.{name}" for name in names)
    return {module for module in found if module == top or module.startswith(top + ".")}


def feature_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FEATURES else None


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
    bot/ that does not go through ``checks.api`` (``checks.api.X`` is a name of the face)."""
    return {(module_name(path, ROOT), module) for path in sorted(BOT.rglob("*.py"))
            for module in imported(path, top="checks")
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
    """Every name of ``checks.api`` is imported somewhere in bot/: the face is the list of
    what the App relies on, so a name the App stopped using leaves it."""
    import checks.api

    used = {name for path in sorted(BOT.rglob("*.py"))
            for target, names in statements(path, ROOT) if target == FACE for name in names}
    assert used == set(checks.api.__all__)


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


@pytest.mark.parametrize(("source", "expected"), [
    ("from checks.api import Kind", {"checks.api", "checks.api.Kind"}),
    ("import checks.report", {"checks.report"}),
    ("from checks import causes", {"checks", "checks.causes"}),
    ("def f():\n    from checks.known import KNOWN_PATH",
     {"checks.known", "checks.known.KNOWN_PATH"}),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from checks.triage import Verdict",
     {"checks.triage", "checks.triage.Verdict"}),
    ("from .checks import x", set()),
])
def test_engine_imports_are_found(tmp_path: Path, source: str, expected: set[str]) -> None:
    """The checker of the face: engine imports in functions and under ``TYPE_CHECKING`` too;
    a relative import is the App's own module, not the engine."""
    module = tmp_path / "bot" / "feature.py"
    module.parent.mkdir(parents=True)
    module.write_text(source + "\n")
    assert imported(module, tmp_path, top="checks") == expected
