"""bot/commands/parser.py: which lines of a comment are commands and what each one says
(pure: no database, no network)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, get_args

import pytest

from alignbot.bot.commands import (
    AlignCommand,
    Command,
    HelpCommand,
    Malformed,
    Name,
    OkToTestCommand,
    RemindCommand,
    ReproCommand,
    TrackCommand,
    UpstreamCommand,
    command_lines,
    new_command_lines,
    parse_duration,
    parse_line,
)

# -- parsing -------------------------------------------------------------------------------


def test_command_lines_skip_code_quotes_and_comments() -> None:
    body = "\n".join([
        "Thanks! /align is what I would run", "/align activations.softplus --n 5",
        "> /align quoted", "`/align` in inline code", "```", "/align in a fence", "```",
        "~~~~", "/help", "~~~~", "    /repro 0123456789ab", "<!--", "/ok-to-test", "-->",
        "  /alignbot   remind  snooze 3d  ", "/alignment is not a command", "/other-bot go",
        "/help", "/HELP",
    ])
    assert command_lines(body) == ["/align activations.softplus --n 5",
                                   "/alignbot remind snooze 3d", "/help", "/HELP"]


def test_an_edit_acts_only_on_new_lines() -> None:
    assert new_command_lines("/remind off\nplease\n/help", "/remind off") == ["/help"]
    assert new_command_lines("/remind  off", "/remind off") == []


@pytest.mark.parametrize(("line", "expected"), [
    ("/align", {"name": Name.ALIGN, "ops": ()}),
    ("/align activations.* torch.erf --n=50 --seed 7",
     {"ops": ("activations.*", "torch.erf"), "n": 50, "seed": 7}),
    ("/alignbot align --n 3", {"name": Name.ALIGN, "n": 3}),
    ("/alignbot", {"name": Name.HELP}),
    ("/repro A1B2C3D4E5F6", {"name": Name.REPRO, "fingerprint": "a1b2c3d4e5f6"}),
    ("/upstream a1b2c3d4e5f6 file", {"fingerprint": "a1b2c3d4e5f6", "file": True}),
    ("/remind snooze 1w2d", {"action": "snooze", "snooze": timedelta(days=9)}),
    ("/remind off", {"action": "off", "snooze": None}),
    ("/remind ON", {"action": "on", "snooze": None}),
    ("/ok-to-test", {"name": Name.OK_TO_TEST}),
    ("/track https://github.com/pytorch/pytorch/pull/123",
     {"name": Name.TRACK, "url": "https://github.com/pytorch/pytorch/pull/123"}),
    ("/alignbot track https://github.com/pytorch/pytorch/issues/45/",
     {"name": Name.TRACK, "url": "https://github.com/pytorch/pytorch/issues/45"}),
])
def test_commands_are_understood(line: str, expected: dict[str, Any]) -> None:
    parsed = parse_line(line)
    assert not isinstance(parsed, Malformed)
    for key, value in expected.items():
        assert getattr(parsed, key) == value


@pytest.mark.parametrize(("line", "record"), [
    ("/align", AlignCommand(line="/align")),
    ("/alignbot align op --n 2 --seed 3", AlignCommand(line="/alignbot align op --n 2 --seed 3",
                                                       ops=("op",), n=2, seed=3)),
    ("/repro a1b2c3d4e5f6", ReproCommand(line="/repro a1b2c3d4e5f6",
                                         fingerprint="a1b2c3d4e5f6")),
    ("/upstream a1b2c3d4e5f6", UpstreamCommand(line="/upstream a1b2c3d4e5f6",
                                               fingerprint="a1b2c3d4e5f6", file=False)),
    ("/track https://github.com/a/b/issues/2",
     TrackCommand(line="/track https://github.com/a/b/issues/2",
                  url="https://github.com/a/b/issues/2")),
    ("/remind snooze 3d", RemindCommand(line="/remind snooze 3d", action="snooze",
                                        snooze=timedelta(days=3))),
    ("/ok-to-test", OkToTestCommand(line="/ok-to-test")),
    ("/help me", HelpCommand(line="/help me")),
])
def test_a_command_parses_to_its_own_record(line: str, record: Command) -> None:
    assert parse_line(line) == record  # dataclass equality compares the type as well


def test_each_command_name_parses_to_its_own_record_type() -> None:
    lines = {Name.ALIGN: "/align", Name.REPRO: "/repro a1b2c3d4e5f6",
             Name.UPSTREAM: "/upstream a1b2c3d4e5f6 file",
             Name.TRACK: "/track https://github.com/a/b/pull/1", Name.REMIND: "/remind on",
             Name.OK_TO_TEST: "/ok-to-test", Name.HELP: "/help"}
    assert set(lines) == set(Name)
    kinds: dict[Name, set[type]] = {}
    for name, line in lines.items():
        for written in (line, f"/alignbot {name.value} {line.partition(' ')[2]}".strip()):
            parsed = parse_line(written)
            assert not isinstance(parsed, Malformed), written
            assert parsed.name is name
            kinds.setdefault(name, set()).add(type(parsed))
    assert all(len(types) == 1 for types in kinds.values())  # short form and long agree
    types = [next(iter(found)) for found in kinds.values()]
    assert len(set(types)) == len(Name) and set(types) == set(get_args(Command))


@pytest.mark.parametrize(("line", "problem"), [
    ("/alignbot frobnicate", "unknown_command"),
    ("/align --n 0", "bad_number"), ("/align --n", "bad_number"),
    ("/align --seed -1", "bad_number"), ("/align --fast", "unexpected_argument"),
    ("/align `rm -rf`", "bad_op"), ("/align " + " ".join(f"op{i}" for i in range(21)),
                                    "too_many_ops"),
    ("/repro", "missing_argument"), ("/repro xyz", "bad_fingerprint"),
    ("/upstream a1b2c3d4e5f6 send", "unexpected_argument"),
    ("/remind", "missing_argument"), ("/remind snooze forever", "bad_duration"),
    ("/remind later", "unexpected_argument"), ("/ok-to-test now", "unexpected_argument"),
    ("/track", "missing_argument"), ("/track https://github.com/a/b/pull/1 now",
                                     "unexpected_argument"),
    ("/track https://github.com/pytorch/pytorch/commit/abc", "bad_url"),
    ("/track http://github.com/pytorch/pytorch/pull/1", "bad_url"),
    ("/track https://example.com/pytorch/pytorch/pull/1", "bad_url"),
    ("/track https://github.com/pytorch/pytorch/pull/1#issuecomment-2", "bad_url"),
    ("/track https://github.com/pytorch/pytorch/issues/0", "bad_url"),
    ("/track pytorch/pytorch#1", "bad_url"),
])
def test_malformed_commands_say_what_is_wrong(line: str, problem: str) -> None:
    parsed = parse_line(line)
    assert isinstance(parsed, Malformed) and parsed.problem == problem


def test_durations() -> None:
    assert parse_duration("12h") == timedelta(hours=12)
    assert parse_duration("2w") == timedelta(weeks=2)
    assert parse_duration("0d") is None and parse_duration("400d") is None
    assert parse_duration("") is None and parse_duration("3 days") is None


# -- hidden commands -----------------------------------------------------------------------


@pytest.mark.parametrize("body", [
    "- ````\n  /help\n  ````", "- item\n\n      /help", "> ```\n> /help\n> ```",
    "a `x\n/help` b", "text <!--\n/help\n-->", "\\/help", "<div>\n/help\n</div>",
    "# /help", "- /help",
])
def test_commands_hidden_in_markdown_are_not_commands(body: str) -> None:
    assert command_lines(body) == []


def test_a_command_line_keeps_its_arguments_as_written() -> None:
    assert command_lines("Please:\n/align a\\* `b` <!-- hidden -->\n/help") == [
        "/align a\\* `b`", "/help"]
