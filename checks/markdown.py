"""Make untrusted text safe inside Markdown: no mentions, no broken fences, no live HTML."""

from __future__ import annotations

import re
import textwrap
from typing import Any

ZWSP = "\u200b"
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
_HASHREF = re.compile(r"(?<![\w&])#(?=\d)")
_GH_REF = re.compile(r"(?<![\w-])(GH)-(?=\d)", re.I)
_INLINE_SPECIALS = re.compile(r"([\\`*_\[\]<>|~&])")
# bare URLs and www. hosts, which GitHub links even without any Markdown syntax
_AUTOLINK = re.compile(r"(?i)(https?:|ftp:|mailto:|xmpp:|www(?=\.))")
_LEADING_BLOCK = re.compile(r"^([#>+=-]|\d+(?=[.)]))")
# bidi controls, zero-width characters and other invisible format characters: they make text
# read differently from what it is (names that look alike, code that reads reordered)
_INVISIBLE = re.compile("[\u00ad\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e"
                        "\u2060-\u2064\u2066-\u206f\u3164\ufeff\ufff9-\ufffb]")
_LINE_BREAK = re.compile(r"\r\n?|[\u0085\u2028\u2029]")
_COMMENT = re.compile(r"<!-")
_BLOCK_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.M)


class Trusted(str):
    """Text that is already safe to put into Markdown as it is: the output of the filters
    below, or text the bot wrote itself. Operations on it return plain ``str`` again."""


def visible(text: str) -> str:
    """``text`` without bidi controls and zero-width characters; NUL becomes U+FFFD."""
    return _INVISIBLE.sub("", str(text)).replace("\0", "\ufffd")


def no_comment(text: str) -> str:
    """Break ``<!--`` so that no copy of a hidden marker (``<!-- alignbot:… -->``) survives."""
    return _COMMENT.sub("<" + ZWSP + "!-", text)


def defuse(text: str) -> str:
    """Stop ``@user``/``@org/team`` pings and ``#123``/``GH-123`` cross-references."""
    text = _MENTION.sub("@" + ZWSP, text)
    text = _GH_REF.sub(lambda m: m.group(1) + ZWSP + "-", text)
    return _HASHREF.sub("#" + ZWSP, text)


def text(value: Any) -> Trusted:
    """Untrusted text on one line of prose, whitespace kept: line breaks become spaces,
    Markdown and HTML specials are escaped, bare URLs are broken, mentions defused."""
    if isinstance(value, Trusted):
        return value
    line = _LINE_BREAK.sub(" ", visible(str(value))).replace("\n", " ")
    line = _INLINE_SPECIALS.sub(r"\\\1", no_comment(line))
    line = _AUTOLINK.sub(lambda m: m.group(1) + ZWSP, line)
    return Trusted(defuse(line))


def inline(value: Any, limit: int = 300) -> Trusted:
    """One line of plain text in Markdown: specials escaped, newlines folded, cut at ``limit``;
    a leading ``#``, ``>``, ``-``, ``1.``… cannot start a heading, quote or list."""
    if isinstance(value, Trusted):
        return value
    line = " ".join(visible(str(value)).split())
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    safe = text(line)
    if (lead := _LEADING_BLOCK.match(safe)) is not None:  # `1.` becomes `1\.`, `#` `\#`
        at = lead.end() if lead.group(1)[0].isdigit() else 0
        safe = Trusted(safe[:at] + "\\" + safe[at:])
    return safe


def code(value: Any) -> Trusted:
    """Inline code that holds any text: the backtick fence is longer than any run inside."""
    body = no_comment(" ".join(visible(str(value)).split()))
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body else ""
    return Trusted(f"{fence}{pad}{body}{pad}{fence}")


def block(value: Any, lang: str = "") -> Trusted:
    """A fenced block that ``text`` cannot close early; mentions do not fire inside code."""
    body = no_comment(_LINE_BREAK.sub("\n", visible(str(value))))
    longest = max((len(m) for m in _BLOCK_FENCE.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    info = re.sub(r"[^\w+-]", "", lang)
    return Trusted(f"{fence}{info}\n{body.rstrip()}\n{fence}")


def folded(value: Any, width: int = 100) -> str:
    """Text whose lines longer than ``width`` are broken at spaces, so a long message reads
    without a scroll bar in a code block. Still untrusted: a filter that makes text safe
    (:func:`block`) comes after it."""
    lines: list[str] = []
    for line in str(value).splitlines() or [""]:
        lines += textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False,
                               replace_whitespace=False) or [""]
    return "\n".join(lines)


def cell(value: Any) -> Trusted:
    """Text for a table cell: GitHub splits cells on every ``|``, even inside code spans.
    Text not yet made safe by another filter is treated as :func:`inline` text."""
    if not isinstance(value, Trusted):
        return inline(value)
    return Trusted(" ".join(value.split()).replace("|", "\\|"))


_MARKER = re.compile(r"<!-- alignbot:[A-Za-z0-9 :._/#+=-]{1,200} -->")
_LINK = re.compile(r"https://[A-Za-z0-9.-]+(?::\d{1,5})?(?:/[A-Za-z0-9._~%/?=&+#-]*)?")


def marker(value: Any) -> Trusted:
    """The bot's own hidden marker (``<!-- alignbot:… -->``), or nothing; anything else that
    looks like one is refused."""
    value = str(value)
    if value and (_MARKER.fullmatch(value) is None or "--" in value[4:-3]):
        raise ValueError(f"not an alignbot marker: {value[:60]!r}")
    return Trusted(value)


def link(value: Any) -> Trusted:
    """A link target the bot got from GitHub (an issue's ``html_url``): https, no spaces,
    parentheses or angle brackets, so it cannot break out of ``[text](…)``; else ``#``."""
    value = str(value)
    return Trusted(value if _LINK.fullmatch(value) else "#")


_LOGIN_MENTION = re.compile(r"@[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}"
                            r"(?:/[A-Za-z0-9][A-Za-z0-9_.-]{0,99})?")


def mentions(values: Any) -> Trusted:
    """Live ``@login`` / ``@org/team`` mentions, space-separated: the only pings the bot
    writes on purpose (a reminder to the people a pull request waits on). Anything that is not
    exactly one GitHub login or team is refused."""
    names = [str(value) for value in values]
    for name in names:
        if _LOGIN_MENTION.fullmatch(name) is None:
            raise ValueError(f"not a GitHub login or team: {name[:60]!r}")
    return Trusted(" ".join(names))


def static(value: Any) -> Trusted:
    """The output of a macro of templates/ (its text is the template's own, and whatever it
    prints went through :func:`finalize`). Only for ``{{ macro(...) | static }}``: a test
    keeps it off any other value."""
    return Trusted(str(value))


def finalize(value: Any) -> Trusted:
    """What a template that shows untrusted data may print: :class:`Trusted` text as it is,
    numbers, and any other string only as defused one-line :func:`text`."""
    if isinstance(value, Trusted):
        return value
    if isinstance(value, bool) or value is None:
        raise TypeError(f"a template printed {value!r}; write what it means instead")
    if isinstance(value, int | float):
        return Trusted(str(value))
    if isinstance(value, str):
        return text(value)
    raise TypeError(f"a template printed a {type(value).__name__}; print its fields, "
                    "each through a filter")
