"""Request handling shared by every API family: routing, body checks, credentials,
permissions, pagination, and the repository, ref and issue a path names."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode

import jwt

from .errors import DOCS, ApiError, forbidden, invalid_request, not_found
from .model import Issue, Json, Repo, Token, User, UserToken
from .openapi import describe_violation, load_subset
from .routes import Call, Reply, Route, split_target
from .state import LEVELS, GitHubState
from .views import Views


class ApiBase:
    """What every family of handlers shares: dispatch, authentication, permissions,
    pagination, and the lookups of the objects a path names."""

    def __init__(self, state: GitHubState, *, validate_requests: bool) -> None:
        self.s = state
        self.v = Views(state)
        self.subset = load_subset() if validate_requests else None
        self.budgets: dict[tuple[str, str], tuple[int, int]] = {}
        self.routes = self.build_routes()

    def build_routes(self) -> list[Route]:
        """The route table (`Api` lists every family's routes)."""
        raise NotImplementedError

    # -- dispatch ---------------------------------------------------------------------------

    def handle(self, call: Call, raw: bytes) -> Reply:
        """Answer one routed request: authenticate, parse and check the body, run the handler."""
        self.authenticate(call)
        call.body = self.parse_body(raw, call.headers.get("content-type", ""))
        self.validate_body(call)
        return call.route.handler(call)

    def moved(self, method: str, target: str) -> tuple[Reply, str] | None:
        """GitHub's answer to a repository's old name (renamed or transferred): 301 for a
        read, 307 for anything else, to ``/repositories/{id}`` and the rest of the path; with
        the template of the route the old path names."""
        path, query = split_target(target)
        found = re.match(r"^/repos/([^/]+)/([^/]+)(/.*)?$", path)
        if found is None:
            return None
        old = f"{unquote(found[1])}/{unquote(found[2])}".lower()
        if old in self.s.repos or old not in self.s.moved:
            return None
        location = f"{self.s.url}/repositories/{self.s.moved[old]}{found[3] or ''}"
        if query:
            location += "?" + urlencode(query)
        status = 301 if method in ("GET", "HEAD") else 307
        message = "Moved Permanently" if status == 301 else "Temporary Redirect"
        reply = Reply(status, {"message": message, "url": location,
                               "documentation_url": f"{DOCS}/overview/"
                                                    "resources-in-the-rest-api#http-redirects"},
                      {"Location": location})
        template = next((r.template for r in self.routes
                         if r.method == method and r.pattern.match(path)), "")
        return reply, template

    def route(self, method: str, target: str, headers: dict[str, str]) -> Call:
        """The call for the first matching route (404 when none); ``/repositories/{id}``
        (where an old name redirects to) names the repository by id."""
        path, query = split_target(target)
        by_id = re.match(r"^/repositories/(\d+)(/.*)?$", path)
        if by_id is not None:
            repo = self.s.repo_by_id(int(by_id[1]))
            if repo is None:
                raise not_found()
            path = f"/repos/{repo.full_name}{by_id[2] or ''}"
        for route in self.routes:
            found = route.pattern.match(path)
            if route.method == method and found:
                params = {k: unquote(v) for k, v in found.groupdict().items() if v is not None}
                return Call(method, path, query, headers, params, route)
        raise not_found()

    def parse_body(self, raw: bytes, content_type: str = "") -> Any:
        """The JSON request body (400 `Problems parsing JSON` when it is not JSON); a form's
        fields (the web flow's token request) as an object."""
        if not raw.strip():
            return None
        if content_type.split(";")[0].strip() == "application/x-www-form-urlencoded":
            return dict(parse_qsl(raw.decode(errors="replace"), keep_blank_values=True))
        try:
            return json.loads(raw)
        except ValueError:
            raise ApiError(400, "Problems parsing JSON") from None

    def validate_body(self, call: Call) -> None:
        """Check the body against the operation's OpenAPI request schema, as GitHub does."""
        if self.subset is None:
            return
        schema = self.subset.request_schema(call.method, call.route.template)
        if schema is None:
            return
        errors = self.subset.errors(schema, {} if call.body is None else call.body)
        if errors:
            raise invalid_request(describe_violation(error) for error in errors)

    # -- authentication ---------------------------------------------------------------------

    def authenticate(self, call: Call) -> None:
        """Check credentials for the route's kind (401 `Bad credentials` and friends)."""
        scheme, _, credential = call.headers.get("authorization", "").partition(" ")
        credential = credential.strip()
        if call.route.auth == "jwt":
            self.verify_jwt(credential if scheme.lower() == "bearer" else "")
        elif call.route.auth == "token" and credential:
            if credential.startswith("ghu_"):
                call.user_token = self.verify_user_token(credential)
            else:
                call.token = self.verify_token(credential)
            call.anonymous = False

    def verify_jwt(self, token: str) -> None:
        """Accept only an RS256 JWT signed with the App's key, whose `iss` is the App id (or
        client id), not expired and expiring at most 10 minutes ahead; 60 s clock drift."""
        if not token:
            raise ApiError(401, "A JSON web token could not be decoded")
        try:
            claims = jwt.decode(
                token, self.s.private_key.public_key(), algorithms=["RS256"], leeway=60,
                options={"require": ["iat", "exp", "iss"]},
            )
        except jwt.ExpiredSignatureError:
            raise ApiError(401, "'Expiration time' claim ('exp') must be a numeric value "
                           "representing the future time at which the assertion expires") from None
        except jwt.InvalidTokenError:
            raise ApiError(401, "A JSON web token could not be decoded") from None
        if claims["exp"] > time.time() + 600 + 30:  # at most 10 minutes ahead (+ drift)
            raise ApiError(401, "'Expiration time' claim ('exp') is too far in the future")
        if str(claims["iss"]) not in (str(self.s.app_id), self.s.client_id):
            raise ApiError(401, "A JSON web token could not be decoded")

    def verify_token(self, credential: str) -> Token:
        """The live installation token `credential` is (401 `Bad credentials` otherwise)."""
        token = self.s.tokens.get(credential)
        if token is None or token.expired:
            raise ApiError(401, "Bad credentials")
        return token

    def verify_user_token(self, credential: str) -> UserToken:
        """The live user token `credential` is (401 `Bad credentials` otherwise)."""
        token = self.s.user_tokens.get(credential)
        if token is None or token.expired:
            raise ApiError(401, "Bad credentials")
        return token

    def user_sees(self, token: UserToken, repo: Repo) -> bool:
        """What a user token of the App reaches: a repository the user may read, held by one
        of the App's installations (a public one is read by anyone)."""
        readable = LEVELS[self.s.role_permission(repo, token.user)] >= LEVELS["read"]
        return not repo.private or (readable and repo.installation_id is not None)

    def actor(self, call: Call) -> User:
        """Who acts: the App's bot for an installation token (401 for anonymous writes)."""
        if call.token is None:
            raise ApiError(401, "Requires authentication")
        return self.s.bot

    def repo(self, call: Call) -> Repo:
        """The route's repository, if the caller may use it this way (404 / 403 otherwise)."""
        repo = self.s.repos.get(f"{call.params['owner']}/{call.params['repo']}".lower())
        if repo is None:
            raise not_found()
        write = call.method != "GET"
        if call.user_token is not None:  # the web flow's token reads, as its user may
            if not self.user_sees(call.user_token, repo):
                raise not_found()
            if write:
                raise forbidden()
            return repo
        if not self.covers(call.token, repo):
            if call.anonymous and write:
                raise ApiError(401, "Requires authentication")
            if repo.private:
                raise not_found()
            if write:
                raise forbidden()
            return repo
        self.check_permission(call, write)
        return repo

    def covers(self, token: Token | None, repo: Repo) -> bool:
        """Whether `token` belongs to the installation that holds `repo` (and is scoped to it)."""
        if token is None or repo.installation_id != token.installation_id:
            return False
        return token.repositories is None or repo.id in token.repositories

    def check_permission(self, call: Call, write: bool) -> None:
        """403 unless the token holds the route's permission at the needed level."""
        assert call.token is not None
        names, _, level = call.route.permission.partition(":")
        held = max(LEVELS.get(call.token.permissions.get(name, "none"), 0)
                   for name in names.split("|"))
        if held < LEVELS[level] or (write and held < LEVELS["write"]):
            raise forbidden()

    # -- pagination -------------------------------------------------------------------------

    def paginate(
        self, call: Call, items: list[Any], render: Callable[[Any], Json],
        wrap: Callable[[list[Json]], Json] | None = None,
    ) -> Reply:
        """One page of `items` (`per_page` ≤ 100, default 30) with GitHub's Link header."""
        per_page = min(max(call.int_param("per_page", 30), 1), 100)
        page = max(call.int_param("page", 1), 1)
        last = max(1, math.ceil(len(items) / per_page))
        chunk = [render(item) for item in items[(page - 1) * per_page : page * per_page]]
        reply = Reply(200, wrap(chunk) if wrap else chunk)
        if last > 1:
            reply.headers["Link"] = self.links(call, page, last)
        return reply

    def links(self, call: Call, page: int, last: int) -> str:
        """The Link header for `page` of `last`."""
        rels = [("prev", page - 1)] if page > 1 else []
        rels += [("next", page + 1), ("last", last)] if page < last else []
        rels += [("first", 1)] if page > 1 else []
        base = f"{self.s.url}{call.path}"
        return ", ".join(
            f'<{base}?{urlencode({**call.query, "page": n})}>; rel="{rel}"' for rel, n in rels
        )

    # -- what a path names -----------------------------------------------------------------

    def resolve(self, repo: Repo, ref: str | None) -> str:
        """The commit a ref names: sha (or 7+ prefix), branch, refs/heads/X, refs/pull/N/head."""
        ref = ref or repo.default_branch
        name = ref.removeprefix("refs/heads/")
        if name in repo.branches:
            return repo.branches[name]
        pulled = re.fullmatch(r"refs/pull/(\d+)/head", ref)
        if pulled and (repo.id, int(pulled[1])) in self.s.issues:
            pull = self.s.issues[(repo.id, int(pulled[1]))].pull
            if pull is not None:
                return pull.head_sha
        matches = [sha for sha in repo.trees if len(ref) >= 7 and sha.startswith(ref)]
        if len(matches) != 1:
            raise ApiError(404, f"No commit found for the ref {ref}",
                           f"{DOCS}/repos/contents#get-repository-content")
        return matches[0]

    def issue(self, call: Call, *, pull: bool = False) -> Issue:
        """The issue (or, with `pull`, pull request) named in the path (404 when unknown)."""
        repo = self.repo(call)
        number = call.params.get("pull_number") or call.params.get("issue_number") or "0"
        issue = self.s.issues.get((repo.id, int(number))) if number.isdigit() else None
        if issue is None or (pull and issue.pull is None):
            raise not_found()
        return issue
