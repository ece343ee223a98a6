"""checks/options.py: the numeric options' ranges, one check for the CLI and the plugin."""

from __future__ import annotations

import pytest

from alignbot.checks import pytest_plugin
from alignbot.checks.cli import FLAGS
from alignbot.checks.options import RANGES, OptionError, check_numbers


@pytest.mark.parametrize(("key", "value", "line"), [
    ("timeout", 0.0, "--timeout 0: expected a number of seconds above 0"),
    ("timeout", -5.0, "--timeout -5: expected a number of seconds above 0"),
    ("timeout", float("inf"), "--timeout inf: expected a number of seconds above 0"),
    ("draws", 0, "--n 0: expected a whole number of draws, 1 or more"),
    ("jobs", -2, "--jobs -2: expected a whole number of worker processes, 1 or more"),
    ("shrink_calls", 0, "--shrink-calls 0: expected a whole number of oracle calls, 1 or more"),
    ("shrink_seconds", 0.0, "--shrink-seconds 0: expected a number of seconds above 0"),
    ("atol", -1e-3, "--atol -0.001: expected a tolerance of 0 or more"),
])
def test_a_value_out_of_range_is_one_line(key: str, value: float, line: str) -> None:
    with pytest.raises(OptionError) as raised:
        check_numbers({key: value}, FLAGS)
    assert str(raised.value) == line


def test_values_in_range_and_options_not_given_pass() -> None:
    check_numbers({"timeout": 0.5, "draws": None, "jobs": 1, "shrink_calls": 1,
                   "shrink_seconds": 1e-3, "rtol": 0.0, "atol": None}, FLAGS)


def test_the_cli_and_the_plugin_name_every_option_they_check() -> None:
    assert set(FLAGS) == set(RANGES)
    assert set(pytest_plugin.FLAGS) <= set(RANGES)
    with pytest.raises(OptionError, match=r"^--alignbot-timeout 0: expected a number of "):
        check_numbers({"timeout": 0.0}, pytest_plugin.FLAGS)
