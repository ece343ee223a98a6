"""CODEOWNERS: the file read from the repository, its rules parsed as GitHub does (the last
matching rule wins), and the owners of a pull request's paths."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from github import GithubException

CODEOWNERS_PATHS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")


def codeowners_text(get: Callable[[str], Any], repo: str) -> str:
    """The first CODEOWNERS file GitHub has in ``repo`` (``get``: a contents API read), or
    ``""``."""
    for path in CODEOWNERS_PATHS:
        try:
            content = get(f"/repos/{repo}/contents/{path}")
        except GithubException as exc:
            if exc.status == 404:
                continue
            raise
        if isinstance(content, dict) and content.get("encoding") == "base64":
            return base64.b64decode(content.get("content") or "").decode("utf-8", "replace")
    return ""


@dataclass(frozen=True)
class OwnerRule:
    pattern: re.Pattern[str]
    owners: tuple[str, ...]


def parse_codeowners(text: str) -> list[OwnerRule]:
    """GitHub's CODEOWNERS rules, in file order (the last matching rule wins). Email owners
    are dropped: they cannot be mentioned."""
    rules = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("\\#") else raw
        parts = line.split()
        if not parts:
            continue
        owners = tuple(o[1:] for o in parts[1:] if o.startswith("@"))
        rules.append(OwnerRule(_codeowners_regex(parts[0]), owners))
    return rules


def _codeowners_regex(pattern: str) -> re.Pattern[str]:
    """gitignore-style: a leading or inner ``/`` anchors at the root, otherwise the pattern
    matches at any depth; a match on a folder covers everything under it, except after a
    final ``/*`` (one level only)."""
    anchored = pattern.startswith("/") or "/" in pattern.strip("/")
    body = pattern.strip("/")
    parts = []
    for segment in body.split("/"):
        if segment == "**":
            parts.append(".*")
            continue
        piece = ""
        for char in segment:
            piece += "[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char)
        parts.append(piece)
    regex = "/".join(parts)
    suffix = "" if body.endswith("/*") or (body == "*" and anchored) else "(?:/.*)?"
    return re.compile(("" if anchored else "(?:.*/)?") + regex + suffix)


def owners_of(rules: list[OwnerRule], paths: list[str]) -> list[str]:
    found: list[str] = []
    for path in paths:
        for rule in reversed(rules):
            if rule.pattern.fullmatch(path):
                found.extend(o for o in rule.owners if o not in found)
                break
    return found

