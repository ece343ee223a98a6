"""The slash-command parser: which lines of a comment are commands, and what each one says.

Pure: no database, no network; the webhook handler runs it on every comment. A command is a
line that starts with ``/alignbot <command>`` or a short form (``/align``, ``/repro``, …) in a
top-level paragraph of the comment parsed as CommonMark; code (fenced, indented, inline),
quotes, list items, HTML blocks and comments hold none.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import ClassVar, Literal

from markdown_it import MarkdownIt
from markdown_it.token import Token

from ..seeds import SEED_BITS

PREFIX = "/alignbot"
MAX_OPS = 20
MAX_DRAWS = 1000  # the configuration's own bound on `draws`
MAX_SEED = 2**SEED_BITS - 1  # /align seed=N: the range of the App's own seeds
MAX_SNOOZE = timedelta(days=365)
MAX_BODY = 65_536  # GitHub's own limit on a comment's body
MAX_COMMANDS = 10  # command lines acted on per comment or review; the rest are ignored


class Name(StrEnum):
    ALIGN = "align"
    REPRO = "repro"
    UPSTREAM = "upstream"
    TRACK = "track"
    REMIND = "remind"
    OK_TO_TEST = "ok-to-test"
    HELP = "help"


SHORT_FORMS = {f"/{name.value}": name for name in Name}

RemindAction = Literal["snooze", "on", "off"]


class Problem(StrEnum):
    """Why a command line was not understood (the reply template words each one)."""

    UNKNOWN_COMMAND = "unknown_command"
    UNEXPECTED_ARGUMENT = "unexpected_argument"
    MISSING_ARGUMENT = "missing_argument"
    BAD_NUMBER = "bad_number"
    BAD_OP = "bad_op"
    TOO_MANY_OPS = "too_many_ops"
    BAD_FINGERPRINT = "bad_fingerprint"
    BAD_DURATION = "bad_duration"
    BAD_URL = "bad_url"


@dataclass(frozen=True)
class AlignCommand:
    """``/align [OPS…] [--n N] [--seed S]``: the specs to run (none: every mapped one) and
    the overrides of the draws and the seed."""

    name: ClassVar[Name] = Name.ALIGN
    line: str
    ops: tuple[str, ...] = ()
    n: int | None = None
    seed: int | None = None


@dataclass(frozen=True)
class ReproCommand:
    """``/repro FINGERPRINT``: the finding whose repro script is wanted."""

    name: ClassVar[Name] = Name.REPRO
    line: str
    fingerprint: str


@dataclass(frozen=True)
class UpstreamCommand:
    """``/upstream FINGERPRINT [file]``: the finding whose upstream draft is wanted, and
    whether to file it as an issue."""

    name: ClassVar[Name] = Name.UPSTREAM
    line: str
    fingerprint: str
    file: bool = False


@dataclass(frozen=True)
class TrackCommand:
    """``/track URL``: the issue or pull request to watch."""

    name: ClassVar[Name] = Name.TRACK
    line: str
    url: str  # canonical: ``https://github.com/OWNER/REPO/(pull|issues)/N``


@dataclass(frozen=True)
class RemindCommand:
    """``/remind snooze DURATION|on|off``: the new reminder setting; ``snooze`` is set
    exactly when ``action`` is ``"snooze"``."""

    name: ClassVar[Name] = Name.REMIND
    line: str
    action: RemindAction
    snooze: timedelta | None = None


@dataclass(frozen=True)
class OkToTestCommand:
    """``/ok-to-test``: no arguments."""

    name: ClassVar[Name] = Name.OK_TO_TEST
    line: str


@dataclass(frozen=True)
class HelpCommand:
    """``/help`` or a bare ``/alignbot``: arguments are ignored."""

    name: ClassVar[Name] = Name.HELP
    line: str


# One understood command line: each command its own record, with only its own arguments.
Command = (AlignCommand | ReproCommand | UpstreamCommand | TrackCommand | RemindCommand
           | OkToTestCommand | HelpCommand)


@dataclass(frozen=True)
class Malformed:
    """A command line that was not understood; ``name`` when the command itself was."""

    line: str
    name: Name | None
    problem: Problem
    value: str = ""
    low: int = 0
    high: int = 0


_MARKDOWN = MarkdownIt("commonmark").disable("text_join")  # escapes stay distinguishable
_OP = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.*?\[\]-]{0,199}$")
_FINGERPRINT = re.compile(r"^[0-9a-fA-F]{12}$")
_ITEM_URL = re.compile(r"^https://github\.com/([A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))/"
                       r"([A-Za-z0-9_.-]{1,100})/(pull|issues)/([1-9][0-9]{0,9})/?$")
_DURATION = re.compile(r"^(?:(\d{1,3})w)?(?:(\d{1,3})d)?(?:(\d{1,4})h)?$")


def command_lines(body: str) -> list[str]:
    """The command lines of a comment, whitespace-normalised, in order, each once.

    The body is parsed as CommonMark: a command is a line of a top-level paragraph that starts
    with ``/alignbot`` or a short form as plain text; code (fenced, indented, inline), quotes,
    list items, HTML blocks and comments never hold one, and ``\\/align`` is not one either.
    """
    found: list[str] = []
    tokens = _MARKDOWN.parse(body[:MAX_BODY])
    for opening, inline in itertools.pairwise(tokens):
        if opening.type != "paragraph_open" or opening.level != 0 or inline.type != "inline":
            continue
        for text in _paragraph_lines(inline.children or []):
            words = text.split()
            if words and (words[0].lower() == PREFIX or words[0].lower() in SHORT_FORMS):
                found.append(" ".join(words))
    return list(dict.fromkeys(found))


def _paragraph_lines(children: list[Token]) -> list[str]:
    """The lines of a paragraph that start with a plain-text ``/``, as written (markup kept,
    HTML comments dropped)."""
    lines: list[list[Token]] = [[]]
    for child in children:
        if child.type in ("softbreak", "hardbreak"):
            lines.append([])
        else:
            lines[-1].append(child)
    return [_source(line) for line in lines
            if line and line[0].type == "text" and line[0].content.startswith("/")]


def _source(tokens: list[Token]) -> str:
    """Inline tokens as they were written, near enough for a command's arguments."""
    parts: list[str] = []
    links: list[Token] = []
    for token in tokens:
        if token.type == "code_inline":
            parts.append(f"{token.markup}{token.content}{token.markup}")
        elif token.type == "html_inline":
            parts.append("" if token.content.startswith("<!--") else token.content)
        elif token.type == "text":
            parts.append(token.content)
        elif token.type == "link_open":
            links.append(token)
            parts.append("<" if token.markup == "autolink" else "[")
        elif token.type == "link_close" and links:
            link = links.pop()
            parts.append(">" if link.markup == "autolink" else f"]({link.attrGet('href')})")
        else:  # escapes and entities (as written), emphasis markers, images' alt text
            parts.append(token.markup or token.content)
    return "".join(parts)


def new_command_lines(body: str, previous: str | None) -> list[str]:
    """The command lines of an edited comment that its previous body did not have."""
    old = set(command_lines(previous or ""))
    return [line for line in command_lines(body) if line not in old]


def parse_line(line: str) -> Command | Malformed:
    """Understand one command line (from ``command_lines``)."""
    words = line.split()
    head = words[0].lower()
    if head == PREFIX:
        if len(words) == 1:
            return HelpCommand(line)
        try:
            name = Name(words[1].lower())
        except ValueError:
            return Malformed(line, None, Problem.UNKNOWN_COMMAND, words[1])
        args = words[2:]
    else:
        name, args = SHORT_FORMS[head], words[1:]
    parser = _PARSERS[name]
    return parser(line, args)


def _align(line: str, args: list[str]) -> Command | Malformed:
    ops: list[str] = []
    options: dict[str, int] = {}
    bounds = {"--n": (1, MAX_DRAWS), "--seed": (0, MAX_SEED)}
    words = iter(args)
    for word in words:
        flag, equals, value = word.partition("=")
        if flag in bounds:
            value = value if equals else next(words, "")
            low, high = bounds[flag]
            if not value.isdigit() or not low <= int(value) <= high:
                return Malformed(line, Name.ALIGN, Problem.BAD_NUMBER, f"{flag} {value}".strip(),
                                 low, high)
            options[flag] = int(value)
        elif word.startswith("-"):
            return Malformed(line, Name.ALIGN, Problem.UNEXPECTED_ARGUMENT, word)
        elif not _OP.match(word):
            return Malformed(line, Name.ALIGN, Problem.BAD_OP, word)
        else:
            ops.append(word)
    if len(ops) > MAX_OPS:
        return Malformed(line, Name.ALIGN, Problem.TOO_MANY_OPS, high=MAX_OPS)
    return AlignCommand(line, ops=tuple(dict.fromkeys(ops)), n=options.get("--n"),
                        seed=options.get("--seed"))


def _finding_args(name: Name, line: str, args: list[str], extra: tuple[str, ...]
                  ) -> tuple[str, bool] | Malformed:
    """The fingerprint (lowercased) and whether one of ``extra`` follows it."""
    if not args:
        return Malformed(line, name, Problem.MISSING_ARGUMENT, "FINGERPRINT")
    if not _FINGERPRINT.match(args[0]):
        return Malformed(line, name, Problem.BAD_FINGERPRINT, args[0])
    rest = args[1:]
    if len(rest) > 1 or (rest and rest[0].lower() not in extra):
        return Malformed(line, name, Problem.UNEXPECTED_ARGUMENT, " ".join(rest))
    return args[0].lower(), bool(rest)


def _repro(line: str, args: list[str]) -> Command | Malformed:
    found = _finding_args(Name.REPRO, line, args, ())
    return found if isinstance(found, Malformed) else ReproCommand(line, found[0])


def _upstream(line: str, args: list[str]) -> Command | Malformed:
    found = _finding_args(Name.UPSTREAM, line, args, ("file",))
    return found if isinstance(found, Malformed) else UpstreamCommand(line, *found)


@dataclass(frozen=True)
class ItemUrl:
    """A GitHub issue or pull request named by its URL."""

    url: str  # canonical: ``https://github.com/OWNER/REPO/(pull|issues)/N``
    repo: str  # ``OWNER/REPO``
    number: int
    kind: str  # "pr" | "issue"


def parse_item_url(text: str) -> ItemUrl | None:
    """``https://github.com/OWNER/REPO/pull/N`` or ``…/issues/N``, or None."""
    match = _ITEM_URL.match(text)
    if match is None or match[2] in (".", ".."):
        return None
    owner, name, path, number = match.groups()
    if int(number) > 2**31 - 1:  # ``upstream_items.number`` is an Integer
        return None
    return ItemUrl(f"https://github.com/{owner}/{name}/{path}/{int(number)}", f"{owner}/{name}",
                   int(number), "pr" if path == "pull" else "issue")


def _track(line: str, args: list[str]) -> Command | Malformed:
    if not args:
        return Malformed(line, Name.TRACK, Problem.MISSING_ARGUMENT, "URL")
    if len(args) > 1:
        return Malformed(line, Name.TRACK, Problem.UNEXPECTED_ARGUMENT, " ".join(args[1:]))
    item = parse_item_url(args[0])
    if item is None:
        return Malformed(line, Name.TRACK, Problem.BAD_URL, args[0])
    return TrackCommand(line, item.url)


def parse_duration(text: str) -> timedelta | None:
    """``3d``, ``2w``, ``12h``, ``1w2d``: a duration from one hour to a year, or None."""
    match = _DURATION.match(text.lower())
    if not text or match is None:
        return None
    weeks, days, hours = (int(part or 0) for part in match.groups())
    duration = timedelta(weeks=weeks, days=days, hours=hours)
    return duration if timedelta(hours=1) <= duration <= MAX_SNOOZE else None


def _remind(line: str, args: list[str]) -> Command | Malformed:
    if not args:
        return Malformed(line, Name.REMIND, Problem.MISSING_ARGUMENT, "snooze DURATION, off or on")
    action, rest = _REMIND_ACTIONS.get(args[0].lower()), args[1:]
    if action is None:
        return Malformed(line, Name.REMIND, Problem.UNEXPECTED_ARGUMENT, args[0])
    duration: timedelta | None = None
    if action == "snooze":
        if not rest:
            return Malformed(line, Name.REMIND, Problem.MISSING_ARGUMENT, "DURATION")
        duration = parse_duration(rest[0])
        if duration is None:
            return Malformed(line, Name.REMIND, Problem.BAD_DURATION, rest[0])
        rest = rest[1:]
    if rest:
        return Malformed(line, Name.REMIND, Problem.UNEXPECTED_ARGUMENT, " ".join(rest))
    return RemindCommand(line, action, duration)


_REMIND_ACTIONS: dict[str, RemindAction] = {"snooze": "snooze", "on": "on", "off": "off"}


def _ok_to_test(line: str, args: list[str]) -> Command | Malformed:
    if args:
        return Malformed(line, Name.OK_TO_TEST, Problem.UNEXPECTED_ARGUMENT, " ".join(args))
    return OkToTestCommand(line)


def _help(line: str, args: list[str]) -> Command | Malformed:
    return HelpCommand(line)  # ``/help me`` is still a request for help


_PARSERS: dict[Name, Callable[[str, list[str]], Command | Malformed]] = {
    Name.ALIGN: _align, Name.REPRO: _repro, Name.UPSTREAM: _upstream, Name.TRACK: _track,
    Name.REMIND: _remind, Name.OK_TO_TEST: _ok_to_test, Name.HELP: _help,
}
