"""Make untrusted text safe inside Markdown: no mentions, no broken fences, no live HTML."""

from __future__ import annotations

import re

ZWSP = "\u200b"
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
_HASHREF = re.compile(r"(?<![\w&])#(?=\d)")
_INLINE_SPECIALS = re.compile(r"([\\`*_\[\]<>|~])")


def defuse(text: str) -> str:
    """Stop ``@user``/``@org/team`` pings and ``#123`` cross-references."""
    text = _MENTION.sub("@" + ZWSP, text)
    return _HASHREF.sub("#" + ZWSP, text)


def inline(text: str, limit: int = 300) -> str:
    """One line of plain text in Markdown: specials escaped, newlines folded, cut at ``limit``."""
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return defuse(_INLINE_SPECIALS.sub(r"\\\1", text))


def code(text: str) -> str:
    """Inline code that holds any text: the backtick fence is longer than any run inside."""
    text = " ".join(str(text).split())
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def block(text: str, lang: str = "") -> str:
    """A fenced block that ``text`` cannot close early; mentions do not fire inside code."""
    longest = max((len(m) for m in re.findall(r"^\s*(`{3,}|~{3,})", text, re.M)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def cell(text: str) -> str:
    """Text for a table cell: GitHub splits cells on every ``|``, even inside code spans."""
    return " ".join(str(text).split()).replace("|", "\\|")
