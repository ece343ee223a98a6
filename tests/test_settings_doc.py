"""bot/settings_doc.py: docs/operations.md's settings table is the settings model's."""

from __future__ import annotations

from pathlib import Path

import pytest

from alignbot.bot.settings import Settings, env_name
from alignbot.bot.settings_doc import BEGIN, END, UPDATE, main, table, with_table

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "operations.md"


def test_the_operations_page_holds_the_current_table() -> None:
    page = PAGE.read_text()
    assert with_table(page) == page, f"the settings table is out of date: run `{UPDATE}`"


def test_every_setting_has_a_row_with_its_meaning() -> None:
    rows = table().splitlines()[2:]
    assert len(rows) == len(Settings.model_fields)
    for name, field in Settings.model_fields.items():
        assert field.description, f"{name} has no description"
        assert any(row.startswith(f"| `{env_name(name)}` |") for row in rows), name
    by_name = {row.split("`")[1]: row for row in rows}
    # once documented nowhere: each row says what the value does, not only its unit
    for name, says in [("ALIGNBOT_JOB_TIMEOUT_SECONDS", "SANDBOX_WALL_SECONDS"),
                       ("ALIGNBOT_MAX_BODY_BYTES", "largest webhook body"),
                       ("ALIGNBOT_GITHUB_WRITE_INTERVAL", "between two writes to GitHub"),
                       ("ALIGNBOT_SANDBOX_WALL_SECONDS", "wall-clock time one sandboxed"),
                       ("ALIGNBOT_SANDBOX_MEMORY_BYTES", "memory of one sandbox")]:
        assert says in by_name[name], by_name[name]
    assert "| `ALIGNBOT_APP_ID` | required |" in by_name["ALIGNBOT_APP_ID"]
    assert "| `26214400` (25 MiB) |" in by_name["ALIGNBOT_MAX_BODY_BYTES"]
    assert "| unset |" in by_name["ALIGNBOT_SANDBOX_HIDE"]  # a list, empty by default


def test_write_replaces_the_table_between_the_markers(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"# Title\n\n{BEGIN}\nold table\n{END}\n\nAfter.\n")
    assert main(["--write", str(page)]) == 0
    assert page.read_text() == f"# Title\n\n{BEGIN}\n{table()}{END}\n\nAfter.\n"
    assert main([]) == 0 and capsys.readouterr().out == table()
    page.write_text("no markers\n")
    with pytest.raises(SystemExit) as caught:
        main(["--write", str(page)])
    assert caught.value.code == 2 and "lacks the markers" in capsys.readouterr().err
