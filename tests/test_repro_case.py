"""checks/repro_case.py: a repro's case, short enough to read, from any script."""

from __future__ import annotations

from alignbot.checks.repro_case import CASE_LINES, SCRIPT_CHARS, case_source

SCRIPT = '''"""alignbot repro"""
import torch


def case(torch):
    x = torch.ones(2)
    return {'out': torch.cos(x)}


def main():
    return case(torch)
'''


def test_the_case_is_the_function_as_written() -> None:
    assert case_source(SCRIPT) == (
        "def case(torch):\n    x = torch.ones(2)\n    return {'out': torch.cos(x)}")


def test_a_long_case_or_none_is_left_to_the_script() -> None:
    long = "def case(torch):\n" + "    x = 1\n" * CASE_LINES + "    return x\n"
    assert case_source(long) is None
    assert case_source("import torch\n") is None


def test_hostile_scripts_give_no_case_and_no_error() -> None:
    assert case_source("def case(:\n") is None
    assert case_source("x = " + "(" * 5_000 + ")" * 5_000) is None  # the parser's limit
    assert case_source("x = " + "-" * 50_000 + "1\ndef case(t):\n    return 1\n") is None
    assert case_source("\x00") is None
    assert case_source(SCRIPT + "#" * SCRIPT_CHARS) is None
