"""Repository path globs: ``glob_match`` and the validated glob fields of the configuration.

``**`` as a whole segment spans any number of folders; ``*``, ``?`` and ``[…]`` stay inside one
segment, so ``src/**/ops/*.py`` matches ``src/a/b/ops/x.py`` but not ``src/ops/sub/x.py``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Annotated

from pydantic import AfterValidator


@lru_cache(maxsize=1024)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """The glob as a regular expression (cached: the same few globs meet every path)."""
    segments = pattern.split("/")
    out = ""
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            out += ".*" if last else "(?:[^/]*/)*"
            continue
        out += _segment_regex(segment) + ("" if last else "/")
    return re.compile(out)


def _segment_regex(segment: str) -> str:
    out, i = "", 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out += "[^/]*"
        elif char == "?":
            out += "[^/]"
        elif char == "[" and (end := segment.find("]", i + 2)) != -1:
            body = segment[i + 1:end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            out += "[" + ("^/" if negate else "") + body.replace("\\", "\\\\") + "]"
            i = end
        else:
            out += re.escape(char)
        i += 1
    return out


def glob_match(path: str, pattern: str) -> bool:
    """Whether a repository path (``a/b/c.py``) matches a glob such as ``src/**/ops/*.py``."""
    return _glob_regex(pattern).fullmatch(path.lstrip("/")) is not None


def _path_glob(value: str) -> str:
    """A path glob relative to the repository root, written with ``/``; no ``..``."""
    if not value.strip():
        raise ValueError("a path glob cannot be empty")
    if value.startswith("/") or "\\" in value:
        raise ValueError(f"`{value}`: write paths relative to the repository root, with `/`")
    if ".." in value.split("/"):
        raise ValueError(f"`{value}`: `..` cannot appear in a repository path")
    return value


def _spec_glob(value: str) -> str:
    """One spec name or op pattern, as ``alignbot check --ops`` takes it."""
    if not value.strip() or "," in value or any(c.isspace() for c in value):
        raise ValueError(f"`{value}`: a spec glob is one name or op pattern such as "
                         "`activations.*` or `torch.nn.functional.gelu` (no commas or spaces)")
    return value


PathGlob = Annotated[str, AfterValidator(_path_glob)]
SpecGlob = Annotated[str, AfterValidator(_spec_glob)]
