"""The engine's command line for a sandboxed check: the flags a check asks for, in the order
the engine has always been given them, and the whole command around them."""

from __future__ import annotations

from pathlib import Path

import pytest

from alignbot.bot.config import load_config
from alignbot.bot.engine_command import check_args, engine_argv

CONFIG = "candidate:\n  preset: torch\nspecs: ['specs/**']\ndraws: 7\n"


def test_a_check_names_its_specs_seed_draws_and_the_checkouts_spec_files(
        tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "mine.py").write_text("")
    (tmp_path / "other.py").write_text("")
    config = load_config(CONFIG)
    assert check_args(config, ["relu*", "tanh"], tmp_path, 5) == [
        "--ops", "relu*,tanh", "--seed", "5", "--n", "7", "--library", "--opinfo",
        "--spec-file", "specs/mine.py"]
    assert check_args(config, ["relu*"], tmp_path, 5, 3)[4:6] == ["--n", "3"]


@pytest.mark.parametrize(("yml", "files", "expected"), [
    ("", [], []),  # the OpInfo specs the globs match run by default
    ("opinfo: false\n", [], ["--no-opinfo"]),
    # a spec file alone would select itself: the library and the OpInfo specs are named
    ('specs: ["align/*.py"]\n', ["align/a.py"],
     ["--library", "--opinfo", "--spec-file", "align/a.py"]),
    ('opinfo: false\nspecs: ["align/*.py"]\n', ["align/a.py"],
     ["--no-opinfo", "--library", "--spec-file", "align/a.py"]),
])
def test_the_opinfo_specs_run_unless_the_configuration_says_no(
        tmp_path: Path, yml: str, files: list[str], expected: list[str]) -> None:
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    config = load_config("candidate:\n  preset: torch\n" + yml)
    args = check_args(config, ["softplus*"], tmp_path, 0)
    assert args[:6] == ["--ops", "softplus*", "--seed", "0", "--n", "20"]
    assert args[6:] == expected


def test_shard_baseline_known_and_minimizing_come_after_the_checks_flags(
        tmp_path: Path) -> None:
    config = load_config(CONFIG)
    head = check_args(config, ["relu*"], tmp_path, 1, shard=(2, 3), known="known.yml")
    assert head[6:] == ["--shard", "2/3", "--known", "known.yml"]
    based = check_args(config, ["relu*"], tmp_path, 1, baseline="base.json", known="k.yml")
    assert based[6:] == ["--baseline", "base.json", "--known", "k.yml"]
    assert check_args(config, ["relu*"], tmp_path, 1, minimize=False)[6:] == ["--no-minimize"]


def test_the_sandbox_adds_the_interpreter_candidate_defaults_and_report(tmp_path: Path) -> None:
    config = load_config(CONFIG)
    argv = engine_argv(config, ["--ops", "relu*"], python=Path("/venv/bin/python"),
                       repo=tmp_path, report=Path("/work/out/report.json"))
    assert argv == ["/venv/bin/python", "-I", "-B", "-m", "alignbot.checks.cli", "check",
                    "--candidate", "torch", "--ops", "relu*", "--n", "7",
                    "--tracker", config.upstream.tracker, "--jobs", "1",
                    "--json", "/work/out/report.json", "--no-progress"]
    given = engine_argv(config, ["--n", "2", "--jobs", "3"], python=Path("python"),
                        repo=tmp_path, report=Path("r.json"))
    assert given.count("--n") == 1 and given.count("--jobs") == 1
