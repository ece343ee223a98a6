"""No two classes of checks/ and bot/ share a name: a name says which thing it is, so that a
reader (or an import) never takes one budget, kind or outcome for another. Checked by parsing
every module with ``ast``."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# bot/engine_report.py models each object of the report with the engine's own name for it
# (checks/report_types.py, checks/capabilities.py), so that the two read side by side.
MIRRORS = ("bot/engine_report.py", {"checks/report_types.py", "checks/capabilities.py"})
# Duplicates meant as the same thing, each with the modules that define it.
ALLOWED = {
    # bot/alignment.py states alignbot.bot.sharding.Sharding as a Protocol: features import no
    # feature
    "Sharding": {"bot/alignment.py", "bot/sharding.py"},
}


def classes(root: Path = ROOT) -> dict[str, list[str]]:
    """Every public class name of checks/ and bot/ (nested ones included) → the modules that
    define it. A private class (``_Strict``) is never imported, so its module scopes it."""
    found: dict[str, list[str]] = defaultdict(list)
    for package in ("checks", "bot"):
        for path in sorted((root / package).rglob("*.py")):
            where = path.relative_to(root).as_posix()
            for node in ast.walk(ast.parse(path.read_text(), where)):
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    found[node.name].append(where)
    return found


def allowed(name: str, where: list[str]) -> bool:
    model, engine = MIRRORS
    if len(where) == 2 and model in where and set(where) - {model} <= engine:
        return True
    return set(where) == ALLOWED.get(name)


def duplicates(found: dict[str, list[str]]) -> list[str]:
    return [f"{name}: {', '.join(where)}" for name, where in sorted(found.items())
            if len(where) > 1 and not allowed(name, where)]


def test_no_two_classes_share_a_name() -> None:
    assert duplicates(classes()) == []


def test_a_shared_name_is_found_and_the_allowed_ones_are_not(tmp_path: Path) -> None:
    for where, text in {
            "checks/oracle.py": "class Budget: ...\nclass _Private: ...\n",
            "bot/reminders/api.py": "class Budget: ...\nclass _Private: ...\n",
            "checks/report_types.py": "class Shrink: ...\n",
            "bot/engine_report.py": "class Shrink: ...\nclass Kind: ...\n",
            "checks/vocab.py": "def f():\n    class Kind: ...\n",
            "bot/alignment.py": "class Sharding: ...\n",
            "bot/sharding.py": "class Sharding: ...\n"}.items():
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / where).write_text(text)
    assert duplicates(classes(tmp_path)) == [
        "Budget: checks/oracle.py, bot/reminders/api.py",
        "Kind: checks/vocab.py, bot/engine_report.py"]
