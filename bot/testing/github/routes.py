"""A request as handlers see it (`Call`), their answer (`Reply`) and the route table's rows."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from .model import Json, Token, UserToken


@dataclass
class Reply:
    """A response: JSON `body`, or raw bytes in `raw` with their content type."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    content_type: str = "application/json; charset=utf-8"
    drop: bool = False  # no answer: the connection is reset instead

    def payload(self) -> bytes:
        """The bytes to send."""
        if self.raw is not None:
            return self.raw
        return b"" if self.body is None else json.dumps(self.body).encode()


@dataclass
class Call:
    """One API request as a handler sees it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    params: dict[str, str]
    route: Route
    body: Any = None
    token: Token | None = None
    user_token: UserToken | None = None  # a user access token (the web flow's): acts as them
    anonymous: bool = True

    @property
    def json(self) -> Json:
        """The body as an object (empty when there was none)."""
        return self.body if isinstance(self.body, dict) else {}

    def int_param(self, name: str, default: int) -> int:
        """An integer query parameter, or `default` when absent or malformed."""
        try:
            return int(self.query.get(name, default))
        except ValueError:
            return default


@dataclass(frozen=True)
class Route:
    """`template` is the OpenAPI path; `auth` is jwt, token (anonymous reads allowed) or none.

    `permission` is "name:level"; "a|b:level" accepts either permission.
    """

    method: str
    template: str
    handler: Callable[[Call], Reply]
    auth: str = "token"
    permission: str = "metadata:read"
    ref_optional: bool = False

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        """The template as a regex; `{path}` spans slashes and may be left out (`/contents`
        lists the root), as may a last `{ref}` when `ref_optional` (the default branch)."""
        regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.template))
        regex = regex.replace("/(?P<path>[^/]+)", "(?:/(?P<path>.*))?")
        if self.ref_optional:
            regex = regex.removesuffix("/(?P<ref>[^/]+)") + "(?:/(?P<ref>[^/]+))?"
        return re.compile("^" + regex + "$")


def split_target(target: str) -> tuple[str, dict[str, str]]:
    """Path and query parameters of a request target."""
    parts = urlsplit(target)
    return parts.path.rstrip("/") or "/", dict(parse_qsl(parts.query, keep_blank_values=True))


def pick(items: Iterable[Any], key: Callable[[Any], Any], descending: bool) -> list[Any]:
    """`items` sorted by `key`."""
    return sorted(items, key=key, reverse=descending)
