"""Every command shown in README.md and docs/*.md is run, or checked where it cannot run here.

Each fenced block must name its language; a ``sh`` block's lines are commands. Each command
is taken by the handler of its program (after ``VAR=value`` assignments and ``cd DIR &&``):
``alignbot`` commands parse with the real parser and the cheap ones run for real (the slow
checks are marked ``slow``), ``make`` targets run as ``make -n``, scripts run with ``--help``.
What cannot run here (Docker, a real GitHub App, the network) is in ``NOT_RUN`` with the
reason, and still checked: the files it names exist, its flags parse. A command of a program
no handler knows fails the test, so a new documented command must be taken care of."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from alignbot.bot.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)
ASSIGNMENT = re.compile(r"[A-Z_][A-Z0-9_]*=\S*")


def commands() -> list[tuple[str, str]]:
    """(where, command) for every line of every ``sh`` block: continued lines joined,
    comments dropped."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for block in FENCE.finditer(text):
            if block.group(1).strip() != "sh":
                continue
            line_no = text[:block.start()].count("\n") + 2
            for line in block.group(2).replace("\\\n", " ").splitlines():
                command = re.sub(r"\s+#.*$", "", line).strip()
                if command:
                    found.append((f"{page.relative_to(ROOT)}:{line_no}", command))
    return found


def words(command: str) -> list[str]:
    """The command's words without leading assignments and ``cd DIR &&``."""
    parts = shlex.split(re.sub(r" \[[^\]]*\]", "", command))  # [--optional VALUE] left out
    while parts and (ASSIGNMENT.fullmatch(parts[0]) or (parts[:1] == ["cd"] and
                                                        parts[2:3] == ["&&"])):
        parts = parts[3:] if parts[0] == "cd" else parts[1:]  # cd DIR &&
    return parts


def run(argv: list[str], cwd: Path = ROOT, timeout: float = 120
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


# The documented `alignbot check` commands run for real, here with one draw each, as drawn:
# cheap enough for the suite, and the arguments the page shows still all parse and run.
CHEAP_CHECK = ["--n", "1", "--no-minimize", "--jobs", "1", "--no-progress"]

# Commands that cannot run here, and why; each is still checked by its handler.
NOT_RUN = {
    "git clone": "needs the network and a remote",
    "python3.11 -m venv": "makes the environment this suite runs in (make test does it)",
    "pip install": "needs the network; the extras and pins it names are checked in pyproject",
    "docker": "needs Docker; the Dockerfile and compose.yaml it names are checked to exist",
    "alignbot serve": "needs a registered GitHub App; tests/test_startup.py and test_serve.py "
                      "run serve against the GitHub test server",
    "alignbot demo": "takes a minute; tests/test_demo.py runs it",
    "alignbot repro": "needs a report holding that fingerprint; tests/test_cli.py runs repro "
                      "on a check's report",
    "alignbot upstream": "needs a report holding that fingerprint; tests/test_cli.py runs it",
    "alignbot check --candidate paddle": "needs Paddle in alignbot's own interpreter",
    "alignbot check --candidate torchax": "needs .venv-torchax; tests/test_torchax.py runs it",
    "alignbot check --prelude 'import paddle": "needs Paddle at /opt/paddle; "
                                               "tests/test_preludes.py runs Paddle's prelude",
    "alignbot check --prelude 'import torch, mylib": "mylib stands for the reader's library",
    "alignbot check --prelude \"$": "the prelude stands for the reader's own",
    "alignbot check --candidate torch --opinfo": "every OpInfo spec takes minutes; "
                                                 "tests/test_opinfo.py runs them",
    "alignbot check --prelude-file examples/preludes/framework.py": "needs .venv-paddle; "
                                                  "tests/test_preludes.py runs it",
    "alignbot check --candidate torch-compile": "compiles each call: tests/test_engine.py runs "
                                                "the preset",
    "pytest": "tests/test_pytest_plugin.py runs the plugin in pytest processes",
    "scripts/stack.sh": "starts PostgreSQL and the App's processes until Ctrl-C",
    "make demo": "", "make test": "", "make candidates": "",  # dry run only (make -n)
}


def not_run(command: str) -> str | None:
    bare = " ".join(shlex.join(words(command)).split()) if words(command) else command
    for start, reason in NOT_RUN.items():
        if (bare.startswith(start) or command.startswith(start)
                or words(command)[:1] == [start]) and reason:
            return reason
    return None


def check_alignbot(argv: list[str], command: str, checks: bool = False) -> None:
    """Parse it; run it unless NOT_RUN names it (a check only with ``checks``)."""
    if ">" in argv:  # the redirection and what follows it
        argv = argv[:argv.index(">")]
    if "&&" in argv:
        argv = argv[:argv.index("&&")]
    args = build_parser().parse_args(argv[1:])  # every flag and value parses
    assert args.command
    if not_run(command) is not None:
        return
    cwd = ROOT / "examples" / "fastops" if command.startswith("cd examples/fastops") else ROOT
    extra = CHEAP_CHECK if args.command == "check" else []
    if args.command == "check" and not checks:
        return  # run by test_every_check_command (slow)
    proc = run([str(BIN / "alignbot"), *argv[1:], *extra], cwd=cwd, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    if args.command in ("config-schema", "app-manifest"):
        json.loads(proc.stdout)


def check_make(argv: list[str], command: str) -> None:
    proc = run(["make", "-n", *argv[1:]])
    assert proc.returncode == 0, proc.stderr  # the target exists


def check_python(argv: list[str], command: str) -> None:
    if argv[1:3] == ["-m", "venv"]:
        assert not_run(command)
        return
    script = argv[1] if argv[1] != "-m" else None
    if script == "repro.py":  # the repro that `alignbot repro` printed (not run: see there)
        return
    target = [str(ROOT / script)] if script else argv[1:3]
    proc = run([sys.executable, *target, "--help"])
    assert proc.returncode == 0 and "usage" in proc.stdout, proc.stderr


def check_pip(argv: list[str], command: str) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set(project["optional-dependencies"])
    for word in argv[2:]:
        named = re.fullmatch(r"(?:\.|alignbot)\[(\w+)\]", word)
        if named:
            assert named.group(1) in extras, word
        if word.startswith("torch=="):
            assert word in project["optional-dependencies"]["torch"][0], word


def check_docker(argv: list[str], command: str) -> None:
    assert (ROOT / "Dockerfile").is_file()
    if "compose" in argv:
        compose = (ROOT / "compose.yaml").read_text()
        assert "\n  worker:" in compose and "ALIGNBOT_PRIVATE_KEY_PATH" in compose


def check_script(argv: list[str], command: str) -> None:
    assert (ROOT / argv[0]).is_file()
    # what stack.sh passes its args to
    proc = run([sys.executable, "-m", "alignbot.bot.stack", "--help"])
    assert proc.returncode == 0 and "--workers" in proc.stdout and "--port" in proc.stdout


def check_pytest(argv: list[str], command: str) -> None:
    proc = run([str(BIN / "pytest"), "--help"])
    for word in argv[1:]:
        if word.startswith("--alignbot"):
            assert word.split("=")[0] in proc.stdout, word


def check_git(argv: list[str], command: str) -> None:
    assert argv[1] == "clone" and not_run(command)


HANDLERS: dict[str, Callable[[list[str], str], None]] = {
    "alignbot": check_alignbot, "make": check_make, "python": check_python,
    "python3.11": check_python, ".venv/bin/python": check_python, "pip": check_pip,
    "docker": check_docker, "scripts/stack.sh": check_script, "pytest": check_pytest,
    "git": check_git,
    # `. .venv/bin/activate` and `cd DIR` after the command that made DIR: nothing to run
    ".": lambda argv, command: None, "cd": lambda argv, command: None,
}


def _split(command: str) -> list[str]:
    """A line's commands: ``a && b`` is two (``cd DIR && x`` stays one)."""
    parts = [p.strip() for p in command.split(" && ")]
    if parts[0].startswith("cd "):
        parts = [f"{parts[0]} && {parts[1]}", *parts[2:]]
    return parts


ALL = [(where, part) for where, line in commands() for part in _split(line)]


@pytest.mark.parametrize(("where", "command"), ALL, ids=[f"{w} {c[:40]}" for w, c in ALL])
def test_every_documented_command(where: str, command: str) -> None:
    argv = words(command.replace("<this repository>", "URL"))
    handler = HANDLERS.get(argv[0])
    assert handler is not None, (f"{where}: no handler knows `{argv[0]}`: run it here, or list "
                                 "it in NOT_RUN with the reason")
    handler(argv, command)


@pytest.mark.slow
def test_every_check_command() -> None:
    """The documented checks that can run here, with one draw each."""
    ran = 0
    for _, command in ALL:
        argv = words(command)
        if argv[:2] == ["alignbot", "check"] and not_run(command) is None:
            check_alignbot(argv, command, checks=True)
            ran += 1
    assert ran >= 3


def test_every_block_names_its_language() -> None:
    untagged = [f"{page.relative_to(ROOT)}:{page.read_text()[:m.start()].count(chr(10)) + 1}"
                for page in PAGES for m in FENCE.finditer(page.read_text())
                if not m.group(1).strip()]
    assert untagged == [], "tag each block: ```sh for commands (run here), else ```text"


def test_what_is_not_run_is_still_shown() -> None:
    """An entry of NOT_RUN that no page shows any more must go."""
    shown = [command for _, command in ALL]
    for start in NOT_RUN:
        assert any(c.startswith(start) or " ".join(words(c)).startswith(start)
                   for c in shown), start
