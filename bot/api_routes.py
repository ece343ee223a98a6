"""The GitHub REST routes the App calls, each with the App permission it needs: the one table
behind the manifest's ``default_permissions`` and the route label of the request metrics."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

# The label of a request that matches no route of the table (a new call nobody listed yet):
# the metrics stay bounded, and the manifest test fails until the route is listed.
OTHER = "other"
# The archive of a head, fetched from the host that ``GET …/tarball/{ref}`` redirects to.
DOWNLOAD = "download"
LEVELS = {"read": 1, "write": 2}
REPO = "/repos/{owner}/{repo}"


@dataclass(frozen=True)
class ApiRoute:
    """``template`` is GitHub's OpenAPI path; ``permission`` is ``name:level`` (``read`` or
    ``write``), or None for a route the App calls as itself (JWT). Where GitHub accepts
    either of two permissions (a comment on a pull request: issues or pull requests) the
    one the App asks for is named."""

    method: str
    template: str
    permission: str | None

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        """The template as a regex; ``{path}`` (a file's path) spans slashes."""
        regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.template))
        return re.compile("^" + regex.replace("(?P<path>[^/]+)", "(?P<path>.+)") + "$")


# Only routes the App's code calls (through PyGithub or the sweep's JSON client): a route
# listed here widens the manifest. tests/test_manifest.py runs the App against a GitHub that
# grants no more than this table asks for.
ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute("GET", "/app", None),
    ApiRoute("POST", "/app/installations/{installation_id}/access_tokens", None),
    ApiRoute("GET", f"{REPO}/installation", None),  # alignbot.bot.tenancy: who holds a repository
    ApiRoute("GET", REPO, "metadata:read"),
    ApiRoute("GET", f"{REPO}/collaborators/{{username}}/permission", "metadata:read"),
    ApiRoute("GET", "/search/issues", "metadata:read"),
    ApiRoute("GET", f"{REPO}/contents/{{path}}", "contents:read"),
    ApiRoute("GET", f"{REPO}/tarball/{{ref}}", "contents:read"),
    ApiRoute("GET", f"{REPO}/commits/{{ref}}", "contents:read"),
    ApiRoute("GET", f"{REPO}/compare/{{basehead}}", "contents:read"),  # a pull's merge base
    ApiRoute("GET", f"{REPO}/commits/{{ref}}/check-runs", "checks:read"),
    ApiRoute("POST", f"{REPO}/check-runs", "checks:write"),
    ApiRoute("PATCH", f"{REPO}/check-runs/{{check_run_id}}", "checks:write"),
    ApiRoute("GET", f"{REPO}/pulls/{{pull_number}}", "pull_requests:read"),
    ApiRoute("GET", f"{REPO}/pulls/{{pull_number}}/files", "pull_requests:read"),
    ApiRoute("GET", f"{REPO}/pulls/{{pull_number}}/reviews", "pull_requests:read"),
    ApiRoute("POST", f"{REPO}/issues", "issues:write"),
    ApiRoute("GET", f"{REPO}/issues/{{issue_number}}", "issues:read"),
    ApiRoute("GET", f"{REPO}/issues/{{issue_number}}/comments", "issues:read"),
    ApiRoute("POST", f"{REPO}/issues/{{issue_number}}/comments", "issues:write"),
    ApiRoute("POST", f"{REPO}/issues/{{issue_number}}/labels", "issues:write"),
    ApiRoute("GET", f"{REPO}/issues/comments/{{comment_id}}", "issues:read"),
    ApiRoute("PATCH", f"{REPO}/issues/comments/{{comment_id}}", "issues:write"),
    ApiRoute("POST", f"{REPO}/issues/comments/{{comment_id}}/reactions", "issues:write"),
)


def route_of(method: str, path: str, routes: tuple[ApiRoute, ...] = ROUTES) -> ApiRoute | None:
    """The route a request for ``path`` (relative to the API base, a query allowed) is."""
    bare = urlsplit(path).path.rstrip("/") or "/"
    for route in routes:
        if route.method == method and route.pattern.match(bare):
            return route
    return None


def template_of(method: str, path: str) -> str:
    """The route's template, ``DOWNLOAD`` for an archive download, or ``OTHER``."""
    if path == DOWNLOAD:
        return DOWNLOAD
    route = route_of(method, path)
    return OTHER if route is None else route.template


def permissions(routes: tuple[ApiRoute, ...] = ROUTES) -> dict[str, str]:
    """Each permission the routes need, at the highest level any of them needs."""
    needed: dict[str, str] = {}
    for route in routes:
        if route.permission is None:
            continue
        name, _, level = route.permission.partition(":")
        if LEVELS[level] > LEVELS.get(needed.get(name, ""), 0):
            needed[name] = level
    return dict(sorted(needed.items()))
