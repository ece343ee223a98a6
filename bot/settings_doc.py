"""The settings table of docs/operations.md, rendered from the settings model's fields.

``python -m alignbot.bot.settings_doc`` prints the table;
``python -m alignbot.bot.settings_doc --write
docs/operations.md`` puts it between the page's two markers (``tests/test_settings_doc.py``
fails while the page holds another table)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from pydantic import SecretStr
from pydantic_core import PydanticUndefined

from alignbot.checks.api import page_command, replace_between

from .settings import MIB, Settings, env_name

UPDATE = "python -m alignbot.bot.settings_doc --write docs/operations.md"
BEGIN = f"<!-- settings table: begin ({UPDATE}) -->"
END = "<!-- settings table: end -->"
GIB = 1024 * MIB


def table() -> str:
    """One row per setting, in the model's order: the variable, its default, its meaning."""
    rows = ["| variable | default | meaning |", "| --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        meaning = (field.description or "").replace("|", "\\|")
        default = field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]
        rows.append(f"| `{env_name(name)}` | {_default(default, field.is_required())} "
                    f"| {meaning} |")
    return "\n".join(rows) + "\n"


def _default(value: Any, required: bool) -> str:
    if required or value is PydanticUndefined:
        return "required"
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if value is None or value == "" or value == []:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int) and value >= MIB and value % MIB == 0:
        size = f"{value // GIB} GiB" if value % GIB == 0 else f"{value // MIB} MiB"
        return f"`{value}` ({size})"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def with_table(page: str) -> str:
    """``page`` with the text between its markers replaced by the current table."""
    return replace_between(page, BEGIN, END, table())


def main(argv: Sequence[str] | None = None) -> int:
    return page_command("python -m alignbot.bot.settings_doc", "The App's settings as a Markdown "
                        "table.", table, with_table, argv)


if __name__ == "__main__":
    sys.exit(main())
