"""A stateful stand-in for the GitHub REST API that alignbot's tests drive over real HTTP."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import io
import itertools
import json
import math
import re
import secrets
import socket
import string
import struct
import tarfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import jsonschema
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

Json = dict[str, Any]
Predicate = Callable[["Issue"], bool]

SUBSET = Path(__file__).parent / "fixtures" / "github" / "openapi-subset.json"
DOCS = "https://docs.github.com/rest"
COMMENT_LIMIT = 65536
OUTPUT_LIMIT = 65535
DOWNLOAD_LIFETIME = timedelta(minutes=5)
# The contents API answers JSON for files up to 1 MB; larger ones (up to 100 MB) only with the
# raw or object media types, and not at all beyond 100 MB.
CONTENT_JSON_LIMIT, CONTENT_RAW_LIMIT = 1024 * 1024, 100 * 1024 * 1024
RAW_MEDIA = ("application/vnd.github.raw", "application/vnd.github.v3.raw")
OBJECT_MEDIA = ("application/vnd.github.object", "application/vnd.github.v3.object")
TOO_LARGE_MESSAGE = (
    "This API returns blobs up to 1 MB in size. The requested blob is too large to fetch via "
    "this API, but you can use the raw media type or the Git Data API to request blobs up to "
    "100 MB in size."
)
SERVER_ERRORS = {500: "Server Error", 502: "Server Error", 503: "Service Unavailable",
                 504: "We couldn't respond to your request in time. Sorry about that."}
CORE_LIMIT, SEARCH_LIMIT, ANONYMOUS_LIMIT = 5000, 30, 60
ROLE_PERMISSION = {
    "admin": "admin",
    "maintain": "write",
    "write": "write",
    "triage": "read",
    "read": "read",
    "none": "none",
}
LEVELS = {"none": 0, "read": 1, "write": 2, "admin": 3}
REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")
DEFAULT_PERMISSIONS = {
    "checks": "write",
    "contents": "read",
    "issues": "write",
    "metadata": "read",
    "pull_requests": "write",
}
DEFAULT_EVENTS = ("check_run", "issue_comment", "pull_request", "pull_request_review")
SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID {rid}."
)
REPO_URLS = {
    "forks": "forks",
    "keys": "keys{/key_id}",
    "collaborators": "collaborators{/collaborator}",
    "teams": "teams",
    "hooks": "hooks",
    "issue_events": "issues/events{/number}",
    "events": "events",
    "assignees": "assignees{/user}",
    "branches": "branches{/branch}",
    "tags": "tags",
    "blobs": "git/blobs{/sha}",
    "git_tags": "git/tags{/sha}",
    "git_refs": "git/refs{/sha}",
    "trees": "git/trees{/sha}",
    "statuses": "statuses/{sha}",
    "languages": "languages",
    "stargazers": "stargazers",
    "contributors": "contributors",
    "subscribers": "subscribers",
    "subscription": "subscription",
    "commits": "commits{/sha}",
    "git_commits": "git/commits{/sha}",
    "comments": "comments{/number}",
    "issue_comment": "issues/comments{/number}",
    "contents": "contents/{+path}",
    "compare": "compare/{base}...{head}",
    "merges": "merges",
    "archive": "{archive_format}{/ref}",
    "downloads": "downloads",
    "issues": "issues{/number}",
    "pulls": "pulls{/number}",
    "milestones": "milestones{/number}",
    "notifications": "notifications{?since,all,participating}",
    "labels": "labels{/name}",
    "releases": "releases{/id}",
    "deployments": "deployments",
}


def utcnow() -> datetime:
    """The current time, to the second, as GitHub reports it."""
    return datetime.now(UTC).replace(microsecond=0)


def iso(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC with a `Z`, GitHub's timestamp format."""
    return None if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_id(kind: str, number: int) -> str:
    """An opaque GraphQL node id, unique per kind and number."""
    return kind + base64.urlsafe_b64encode(f"{number:012d}".encode()).decode().rstrip("=")


def blob_sha(data: bytes) -> str:
    """The git blob id of `data`, as the contents API reports it."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def random_token(prefix: str, length: int = 36) -> str:
    """A random credential in GitHub's format (`ghs_` + 36 alphanumerics)."""
    alphabet = string.ascii_letters + string.digits
    return prefix + "".join(secrets.choice(alphabet) for _ in range(length))


def wrap_base64(data: bytes) -> str:
    """Base64 cut in 60-character lines with a final newline, as the contents API sends it."""
    text = base64.b64encode(data).decode()
    return "".join(text[i : i + 60] + "\n" for i in range(0, len(text), 60))


def count_patch(patch: str | None) -> tuple[int, int]:
    """Added and deleted line counts of a unified-diff hunk text."""
    lines = (patch or "").splitlines()
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    deleted = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return added, deleted


def as_bytes(data: bytes | str) -> bytes:
    """File content given as text or bytes, as bytes."""
    return data.encode() if isinstance(data, str) else data


def parse_time(text: str) -> datetime:
    """A date or date-time from a search qualifier, as an aware UTC datetime."""
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class ApiError(Exception):
    """An error response in GitHub's shape, raised by a handler and sent by the dispatcher."""

    def __init__(
        self,
        status: int,
        message: str,
        doc: str = DOCS,
        *,
        errors: list[Json] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body: Json = {"message": message, "documentation_url": doc, "status": str(status)}
        if errors is not None:
            self.body["errors"] = errors
        self.headers = dict(headers or {})


def not_found(doc: str = DOCS) -> ApiError:
    """GitHub's 404, also its answer for a private resource the caller may not see."""
    return ApiError(404, "Not Found", doc)


def forbidden() -> ApiError:
    """What an installation token gets for a write it has no permission for."""
    return ApiError(403, "Resource not accessible by integration")


def validation_failed(resource: str, field_name: str, code: str, message: str = "") -> ApiError:
    """GitHub's 422 `Validation Failed` with one entry in `errors`."""
    error: Json = {"resource": resource, "code": code, "field": field_name}
    if message:
        error["message"] = message
    return ApiError(422, "Validation Failed", errors=[error])


def server_error(status: int = 502, body: Any = None) -> Callable[[], Reply]:
    """A maker of GitHub's 5xx answer (`body` replaces the default one)."""
    payload = body if body is not None else {
        "message": SERVER_ERRORS.get(status, "Server Error"), "status": str(status)}
    return lambda: Reply(status, payload)


def invalid_request(lines: Iterable[str]) -> ApiError:
    """GitHub's 422 for a body that breaks the operation's JSON schema."""
    return ApiError(422, "Invalid request.\n\n" + "\n".join(lines))


# ---------------------------------------------------------------------------------------------
# The OpenAPI subset, as JSON Schema


def to_json_schema(node: Any) -> Any:
    """OpenAPI 3.0 schema to JSON Schema: `nullable: true` becomes `anyOf` with `null`."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        key: to_json_schema(value) for key, value in node.items()
        if not (key == "nullable" and isinstance(value, bool))
    }
    return {"anyOf": [{"type": "null"}, out]} if node.get("nullable") is True else out


def format_checker() -> jsonschema.FormatChecker:
    """Checks for the two formats GitHub's responses lean on: `date-time` and `uri`."""
    checker = jsonschema.FormatChecker(formats=())

    @checker.checks("date-time")
    def is_datetime(value: object) -> bool:
        pattern = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"
        return not isinstance(value, str) or re.fullmatch(pattern, value) is not None

    @checker.checks("uri")
    def is_uri(value: object) -> bool:
        parts = urlsplit(value) if isinstance(value, str) else None
        return parts is None or bool(parts.scheme and parts.netloc)

    return checker


@dataclass(frozen=True)
class Erratum:
    """A known mistake in GitHub's description, corrected when the subset is loaded.

    `rename` swaps a keyword (old, new) at `pointer`; `nullable` marks the schema there
    nullable. Applying fails once upstream has fixed the mistake, so the list stays true.
    """

    pointer: str
    reason: str
    rename: tuple[str, str] | None = None
    nullable: bool = False

    def target(self, document: Json) -> Json:
        """The schema object the JSON pointer names."""
        node: Any = document
        for part in self.pointer.strip("/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def apply(self, document: Json) -> None:
        """Correct `document` in place."""
        node = self.target(document)
        if self.rename:
            old, new = self.rename
            node[new] = node.pop(old)
        if self.nullable:
            if node.get("nullable"):
                raise ValueError(f"{self.pointer} is already nullable upstream")
            node["nullable"] = True


SPEC_ERRATA = (
    Erratum(
        "/paths/~1app~1installations/get/responses/200/content/application~1json/schema/items"
        "/properties/account",
        "inlined as allOf[simple-user, enterprise], which no account satisfies; the "
        "`installation` component says anyOf",
        rename=("allOf", "anyOf"),
    ),
    Erratum(
        "/components/schemas/pull-request/properties/head/properties/repo",
        "GitHub sends `head.repo: null` when the fork was deleted",
        nullable=True,
    ),
    Erratum(
        "/components/schemas/pull-request-simple/properties/head/properties/repo",
        "GitHub sends `head.repo: null` when the fork was deleted",
        nullable=True,
    ),
    Erratum(
        "/components/schemas/issue-search-result-item/properties/body",
        "GitHub sends `body: null` for an issue or pull request without a description, as the "
        "`issue` schema allows",
        nullable=True,
    ),
)


class OpenApiSubset:
    """GitHub's OpenAPI description (the subset in fixtures/github) turned into validators.

    The server checks request bodies with it (GitHub answers a schema violation with 422
    `Invalid request.`); the tests check every response body with it.
    """

    def __init__(self, path: Path = SUBSET) -> None:
        self.document: Json = json.loads(path.read_text())
        for erratum in SPEC_ERRATA:
            erratum.apply(self.document)
        self._components = to_json_schema(self.document["components"])
        self._checker = format_checker()
        self._validators: dict[str, jsonschema.Draft4Validator] = {}

    def operation(self, method: str, template: str) -> Json | None:
        """The operation object for `method template`, or None when the subset lacks it."""
        item = self.document["paths"].get(template, {})
        return item.get(method.lower())

    def validator(self, schema: Json) -> jsonschema.Draft4Validator:
        """A validator for `schema` whose `$ref`s resolve inside the subset's components."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self._validators:
            root = {"allOf": [to_json_schema(schema)], "components": self._components}
            self._validators[key] = jsonschema.Draft4Validator(root, format_checker=self._checker)
        return self._validators[key]

    def request_schema(self, method: str, template: str) -> Json | None:
        """The JSON request-body schema of an operation, if it has one."""
        operation = self.operation(method, template) or {}
        content = operation.get("requestBody", {}).get("content", {})
        return content.get("application/json", {}).get("schema")

    def response_schema(self, method: str, template: str, status: int) -> Json | None:
        """The JSON schema GitHub documents for this operation and status, if any."""
        operation = self.operation(method, template) or {}
        response = operation.get("responses", {}).get(str(status))
        if response and "$ref" in response:
            response = self.document["components"]["responses"][response["$ref"].split("/")[-1]]
        content = (response or {}).get("content", {})
        media = content.get("application/json") or content.get("application/scim+json") or {}
        return media.get("schema")

    def errors(self, schema: Json, instance: Any) -> list[jsonschema.ValidationError]:
        """Every violation of `schema` by `instance`, shallowest first."""
        found = self.validator(schema).iter_errors(instance)
        return sorted(found, key=lambda error: len(error.absolute_path))

    def webhook_schema(self, name: str) -> Json:
        """The payload schema of one webhook (a key of `x-webhooks`, e.g. `pull-request-opened`)."""
        post = self.document["x-webhooks"][name]["post"]
        return post["requestBody"]["content"]["application/json"]["schema"]


@functools.cache
def load_subset() -> OpenApiSubset:
    """The OpenAPI subset, parsed once per process."""
    return OpenApiSubset()


def describe_violation(error: jsonschema.ValidationError) -> str:
    """One line of a GitHub `Invalid request.` message for a schema violation."""
    value = error.instance
    if error.validator == "maxLength":
        return f"Only {error.validator_value} characters are allowed; {len(value)} were supplied."
    if error.validator == "maxItems":
        allowed = error.validator_value
        return f"No more than {allowed} items are allowed; {len(value)} were supplied."
    if error.validator == "required":
        name = error.message.split(" is a required")[0].strip("'")
        return f'"{name}" wasn\'t supplied.'
    where = "/".join(str(part) for part in error.absolute_path) or "body"
    return f"For 'properties/{where}', {error.message}."


# ---------------------------------------------------------------------------------------------
# State


@dataclass
class User:
    """A GitHub account: a person, an organisation, or an App's bot."""

    login: str
    id: int
    type: str = "User"


@dataclass
class Installation:
    """An installation of the App on one account."""

    id: int
    account: User
    created_at: datetime
    repository_selection: str = "selected"


@dataclass
class Commit:
    """A commit: enough to render it and to walk to its parents."""

    sha: str
    message: str
    author: User
    parents: list[str]
    date: datetime


@dataclass
class Repo:
    """A repository with its file trees (by commit sha), branches and collaborator roles."""

    id: int
    owner: User
    name: str
    installation_id: int | None
    default_branch: str
    private: bool
    created_at: datetime
    fork: bool = False
    trees: dict[str, dict[str, bytes]] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        """`owner/name`."""
        return f"{self.owner.login}/{self.name}"


@dataclass
class Review:
    """A submitted pull-request review."""

    id: int
    user: User
    state: str
    body: str
    commit_id: str
    submitted_at: datetime


@dataclass
class Pull:
    """What a pull request adds to its issue: refs, files, commits, reviews."""

    id: int
    head_sha: str
    base_sha: str
    head_ref: str
    base_ref: str
    head_repo: Repo | None
    draft: bool
    files: list[Json]
    commits: list[str]
    reviews: list[Review] = field(default_factory=list)
    requested_users: list[User] = field(default_factory=list)
    requested_teams: list[str] = field(default_factory=list)
    merged_at: datetime | None = None


@dataclass
class Reaction:
    """One reaction on an issue comment."""

    id: int
    user: User
    content: str
    created_at: datetime


@dataclass
class Issue:
    """An issue, or a pull request when `pull` is set: both share numbers and comments."""

    repo: Repo
    number: int
    id: int
    title: str
    body: str | None
    user: User
    created_at: datetime
    updated_at: datetime
    state: str = "open"
    closed_at: datetime | None = None
    labels: list[str] = field(default_factory=list)
    assignees: list[User] = field(default_factory=list)
    author_association: str = "NONE"
    via_app: bool = False
    pull: Pull | None = None


@dataclass
class Comment:
    """An issue (or pull-request conversation) comment."""

    id: int
    repo: Repo
    issue_number: int
    body: str
    user: User
    created_at: datetime
    updated_at: datetime
    author_association: str = "NONE"
    via_app: bool = False
    reactions: list[Reaction] = field(default_factory=list)


@dataclass
class CheckRun:
    """A check run; `updates` keeps every request body (the create, then each PATCH) as sent."""

    id: int
    repo: Repo
    name: str
    head_sha: str
    suite_id: int
    status: str = "queued"
    conclusion: str | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    details_url: str | None = None
    external_id: str | None = None
    output: Json = field(default_factory=dict)
    annotations: list[Json] = field(default_factory=list)
    actions: list[Json] = field(default_factory=list)
    updates: list[Json] = field(default_factory=list)


@dataclass
class Token:
    """An installation access token, possibly narrowed to some repositories and permissions."""

    value: str
    installation_id: int
    expires_at: datetime
    permissions: dict[str, str]
    repositories: set[int] | None = None

    @property
    def expired(self) -> bool:
        """Whether GitHub would now answer `Bad credentials` for it."""
        return self.expires_at <= datetime.now(UTC)


@dataclass
class Exchange:
    """One request and its answer, kept so tests can check bodies against the OpenAPI schemas."""

    method: str
    path: str
    template: str | None
    status: int
    request: Any
    response: Any
    raw: bool = False  # a raw media-type body (not JSON), e.g. a file's bytes


class GitHubState:
    """Everything the fake GitHub knows. Tests seed it and read it back with these methods.

    Owner and repository names are case-insensitive, as on GitHub. Issues and pull requests
    share one number space per repository. A comment, review or push bumps the issue's
    `updated_at`, as GitHub does (a reminder comment makes a pull request look fresh).
    """

    def __init__(
        self,
        *,
        app_id: int = 12345,
        app_slug: str = "alignbot",
        app_name: str | None = None,
        app_owner: str = "alignbot-dev",
        permissions: Mapping[str, str] | None = None,
        events: Iterable[str] = DEFAULT_EVENTS,
        token_lifetime: timedelta = timedelta(hours=1),
        html_url: str = "https://github.com",
    ) -> None:
        self.lock = threading.RLock()
        self._ids = itertools.count(1001)
        self.app_id = app_id
        self.app_slug = app_slug
        self.app_name = app_name or app_slug
        self.client_id = random_token("Iv23li", 14)
        self.private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.private_key_pem = self.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        ).decode()
        self.permissions = dict(permissions or DEFAULT_PERMISSIONS)
        self.events = list(events)
        self.token_lifetime = token_lifetime
        self.html_base = html_url.rstrip("/")
        self.created_at = utcnow() - timedelta(days=30)
        self.users: dict[str, User] = {}
        self.app_owner = self.user(app_owner, "Organization")
        self.bot = self.user(f"{app_slug}[bot]", "Bot")
        self.installations: dict[int, Installation] = {}
        self.repos: dict[str, Repo] = {}
        self.issues: dict[tuple[int, int], Issue] = {}
        self.comments: dict[int, Comment] = {}
        self.check_runs: dict[int, CheckRun] = {}
        self.tokens: dict[str, Token] = {}
        self.downloads: dict[str, tuple[int, str, datetime]] = {}
        self.requests: list[tuple[str, str, int]] = []
        self.exchanges: list[Exchange] = []
        self.errors: list[str] = []
        self._url: str | None = None

    @property
    def url(self) -> str:
        """Base URL of the running server (`http://127.0.0.1:PORT`): give it to PyGithub."""
        if self._url is None:
            raise RuntimeError("the GitHub test server is not started")
        return self._url

    def next_id(self) -> int:
        """A fresh id, unique across every kind of object."""
        return next(self._ids)

    # -- seeding ----------------------------------------------------------------------------

    def user(self, login: str, type_: str = "User") -> User:
        """The account `login`, created on first use."""
        with self.lock:
            if login.lower() not in self.users:
                self.users[login.lower()] = User(login, self.next_id(), type_)
            return self.users[login.lower()]

    def add_installation(
        self,
        installation_id: int,
        account: str,
        account_type: str = "Organization",
        repository_selection: str = "selected",
    ) -> Installation:
        """Install the App on `account` (repositories join it through `add_repo`)."""
        with self.lock:
            owner = self.user(account, account_type)
            installation = Installation(installation_id, owner, utcnow(), repository_selection)
            self.installations[installation_id] = installation
            return installation

    def add_repo(
        self,
        owner: str,
        name: str,
        installation_id: int | None = None,
        files_by_ref: Mapping[str, Mapping[str, bytes | str]] | None = None,
        default_branch: str = "main",
        *,
        branches: Mapping[str, str] | None = None,
        private: bool = False,
        owner_type: str = "Organization",
    ) -> Repo:
        """A repository whose commits are the keys of `files_by_ref` (sha -> path -> content).

        Each commit's parent is the one before it; the default branch points at the last one
        unless `branches` says otherwise. An unknown `installation_id` is installed on `owner`.
        """
        with self.lock:
            if installation_id is not None and installation_id not in self.installations:
                self.add_installation(installation_id, owner, owner_type)
            repo = Repo(
                self.next_id(), self.user(owner, owner_type), name, installation_id,
                default_branch, private, utcnow() - timedelta(days=7),
            )
            self.repos[repo.full_name.lower()] = repo
            for sha, files in (files_by_ref or {}).items():
                self._add_commit(repo, sha, files, repo.owner, f"Commit {sha[:7]}")
            if repo.commits:
                repo.branches[default_branch] = list(repo.commits)[-1]
            repo.branches.update(branches or {})
            return repo

    def _add_commit(
        self, repo: Repo, sha: str, files: Mapping[str, bytes | str], author: User, message: str
    ) -> None:
        parents = [list(repo.commits)[-1]] if repo.commits else []
        repo.trees[sha] = {path: as_bytes(data) for path, data in files.items()}
        repo.commits[sha] = Commit(sha, message, author, parents, utcnow())

    def add_pull(
        self,
        owner: str,
        repo: str,
        number: int,
        head_sha: str,
        base_sha: str,
        title: str = "Update ops",
        user: str = "contributor",
        files: Iterable[Mapping[str, Any]] = (),
        *,
        body: str | None = None,
        draft: bool = False,
        head_repo: str | None = "",
        head_ref: str | None = None,
        base_ref: str | None = None,
        head_tree: Mapping[str, bytes | str] | None = None,
        author_association: str = "CONTRIBUTOR",
        labels: Iterable[str] = (),
        state: str = "open",
        created_at: datetime | None = None,
        updated_at: datetime | None = None,
    ) -> Issue:
        """A pull request. `head_repo`: "" (default) for a branch of this repository,
        "owner/name" for a fork (created, not installed), None for a deleted fork.

        The head commit is readable from this repository (as `refs/pull/N/head` makes it on
        GitHub) with `head_tree` as its files, or the base commit's files when omitted.
        """
        with self.lock:
            base = self.repo(owner, repo)
            if (base.id, number) in self.issues:
                raise ValueError(f"#{number} already exists in {base.full_name}")
            author = self.user(user)
            fork = self._head_repo(base, head_repo)
            self._add_head_commit(base, fork, head_sha, base_sha, head_tree, author)
            pull = Pull(
                self.next_id(), head_sha, base_sha, head_ref or f"pr-{number}",
                base_ref or base.default_branch, fork, draft, [], [head_sha],
            )
            if fork is base:
                base.branches[pull.head_ref] = head_sha
            pull.files = [self._file_entry(base, head_sha, entry) for entry in files]
            created = created_at or utcnow()
            issue = Issue(
                base, number, self.next_id(), title, body, author, created, updated_at or created,
                state, labels=list(labels), author_association=author_association, pull=pull,
            )
            if state == "closed":
                issue.closed_at = issue.updated_at
            self.issues[(base.id, number)] = issue
            return issue

    def _head_repo(self, base: Repo, head_repo: str | None) -> Repo | None:
        if head_repo is None:
            return None
        if head_repo in ("", base.full_name):
            return base
        if head_repo.lower() in self.repos:
            return self.repos[head_repo.lower()]
        fork_owner, fork_name = head_repo.split("/")
        fork = self.add_repo(fork_owner, fork_name, owner_type="User")
        fork.fork = True
        return fork

    def _add_head_commit(
        self,
        base: Repo,
        fork: Repo | None,
        head_sha: str,
        parent: str,
        tree: Mapping[str, bytes | str] | None,
        author: User,
    ) -> None:
        files = tree if tree is not None else base.trees.get(parent, {})
        for repo in {id(r): r for r in (base, fork) if r is not None}.values():
            repo.trees[head_sha] = {path: as_bytes(data) for path, data in files.items()}
            repo.commits[head_sha] = Commit(head_sha, "Update", author, [parent], utcnow())

    def _file_entry(self, repo: Repo, sha: str, entry: Mapping[str, Any]) -> Json:
        data = repo.trees.get(sha, {}).get(entry["filename"])
        added, deleted = count_patch(entry.get("patch"))
        out: Json = {
            "sha": blob_sha(data) if data is not None else blob_sha(entry["filename"].encode()),
            "filename": entry["filename"],
            "status": entry.get("status", "modified"),
            "additions": entry.get("additions", added),
            "deletions": entry.get("deletions", deleted),
        }
        out["changes"] = entry.get("changes", out["additions"] + out["deletions"])
        out.update({k: v for k, v in entry.items() if k in ("patch", "previous_filename")})
        return out

    def push(
        self,
        owner: str,
        repo: str,
        number: int,
        new_head_sha: str,
        files: Iterable[Mapping[str, Any]] | None = None,
        *,
        tree: Mapping[str, bytes | str] | None = None,
        message: str = "Update",
        updated_at: datetime | None = None,
    ) -> Issue:
        """A new head commit on a pull request (what a `synchronize` event reports).

        `files` replaces the pull request's changed files when given; `tree` is the new
        commit's files (default: the previous head's).
        """
        with self.lock:
            issue = self.pull(owner, repo, number)
            pull = issue.pull
            assert pull is not None
            previous = issue.repo.trees.get(pull.head_sha, {})
            self._add_head_commit(
                issue.repo, pull.head_repo, new_head_sha, pull.head_sha,
                tree if tree is not None else previous, issue.user,
            )
            issue.repo.commits[new_head_sha].message = message
            pull.head_sha = new_head_sha
            pull.commits.append(new_head_sha)
            if pull.head_repo is issue.repo:
                issue.repo.branches[pull.head_ref] = new_head_sha
            if files is not None:
                pull.files = [self._file_entry(issue.repo, new_head_sha, f) for f in files]
            issue.updated_at = updated_at or utcnow()
            return issue

    def update_pull(self, owner: str, repo: str, number: int, **changes: Any) -> Issue:
        """Change a pull request: title, body, draft, state ("open"/"closed"), merged (bool),
        labels, updated_at."""
        with self.lock:
            issue = self.pull(owner, repo, number)
            pull = issue.pull
            assert pull is not None
            for key in ("title", "body", "labels"):
                if key in changes:
                    setattr(issue, key, changes[key])
            pull.draft = changes.get("draft", pull.draft)
            if changes.get("merged"):
                changes.setdefault("state", "closed")
                pull.merged_at = utcnow()
            if "state" in changes:
                issue.state = changes["state"]
                issue.closed_at = utcnow() if issue.state == "closed" else None
            issue.updated_at = changes.get("updated_at", utcnow())
            return issue

    def set_permission(self, owner: str, repo: str, user: str, role: str) -> None:
        """Give `user` a role on the repository: admin, maintain, write, triage, read or none."""
        if role not in ROLE_PERMISSION:
            raise ValueError(f"unknown role {role!r}")
        with self.lock:
            self.repo(owner, repo).roles[self.user(user).login.lower()] = role

    def add_comment(
        self,
        owner: str,
        repo: str,
        number: int,
        body: str,
        user: str,
        *,
        created_at: datetime | None = None,
        author_association: str | None = None,
    ) -> Comment:
        """A comment by a person (comments made through the API are the bot's)."""
        with self.lock:
            issue = self.issue(owner, repo, number)
            author = self.user(user)
            moment = created_at or utcnow()
            association = author_association or self.association(issue.repo, author)
            comment = Comment(
                self.next_id(), issue.repo, number, body, author, moment, moment, association
            )
            self.comments[comment.id] = comment
            issue.updated_at = max(issue.updated_at, moment)
            return comment

    def add_review(
        self,
        owner: str,
        repo: str,
        number: int,
        user: str,
        state: str = "APPROVED",
        body: str = "",
        *,
        commit_id: str | None = None,
        submitted_at: datetime | None = None,
    ) -> Review:
        """A submitted review: APPROVED, CHANGES_REQUESTED, COMMENTED or DISMISSED."""
        with self.lock:
            issue = self.pull(owner, repo, number)
            assert issue.pull is not None
            moment = submitted_at or utcnow()
            review = Review(
                self.next_id(), self.user(user), state, body,
                commit_id or issue.pull.head_sha, moment,
            )
            issue.pull.reviews.append(review)
            issue.updated_at = max(issue.updated_at, moment)
            return review

    def request_reviewers(
        self, owner: str, repo: str, number: int, users: Iterable[str] = (),
        teams: Iterable[str] = (),
    ) -> None:
        """Ask people and teams (by slug) for a review."""
        with self.lock:
            pull = self.pull(owner, repo, number).pull
            assert pull is not None
            pull.requested_users.extend(self.user(login) for login in users)
            pull.requested_teams.extend(teams)

    def expire_tokens(self, installation_id: int | None = None) -> int:
        """Make issued installation tokens expired now; returns how many changed."""
        with self.lock:
            past = datetime.now(UTC) - timedelta(seconds=1)
            chosen = [
                token for token in self.tokens.values()
                if installation_id in (None, token.installation_id) and not token.expired
            ]
            for token in chosen:
                token.expires_at = past
            return len(chosen)

    # -- lookups and inspection -------------------------------------------------------------

    def repo(self, owner: str, name: str) -> Repo:
        """The repository `owner/name` (KeyError when unknown)."""
        return self.repos[f"{owner}/{name}".lower()]

    def issue(self, owner: str, repo: str, number: int) -> Issue:
        """Issue or pull request `number` (KeyError when unknown)."""
        return self.issues[(self.repo(owner, repo).id, number)]

    def pull(self, owner: str, repo: str, number: int) -> Issue:
        """Pull request `number`, as its issue (`.pull` holds the pull-request part)."""
        issue = self.issue(owner, repo, number)
        if issue.pull is None:
            raise KeyError(f"#{number} is an issue, not a pull request")
        return issue

    def comments_on(self, owner: str, repo: str, number: int) -> list[Comment]:
        """Comments on an issue or pull request, oldest first."""
        with self.lock:
            target = self.repo(owner, repo)
            found = self.comments.values()
            return [c for c in found if c.repo is target and c.issue_number == number]

    def check_runs_for(self, owner: str, repo: str, head_sha: str | None = None) -> list[CheckRun]:
        """Check runs of a repository (optionally of one commit), oldest first."""
        with self.lock:
            target = self.repo(owner, repo)
            return [
                run for run in self.check_runs.values()
                if run.repo is target and head_sha in (None, run.head_sha)
            ]

    def created_issues(self, owner: str, repo: str) -> list[Issue]:
        """Issues (not pull requests) of a repository, e.g. those the App opened."""
        with self.lock:
            target = self.repo(owner, repo)
            return [i for i in self.issues.values() if i.repo is target and i.pull is None]

    def count(self, method: str | None = None, pattern: str = "") -> int:
        """How many requests were made (optionally: this method, path matching the regex)."""
        with self.lock:
            return sum(
                1 for verb, path, _ in self.requests
                if method in (None, verb) and re.search(pattern, path)
            )

    def clear_log(self) -> None:
        """Forget the request log and the recorded exchanges."""
        with self.lock:
            self.requests.clear()
            self.exchanges.clear()

    def role(self, repo: Repo, user: User) -> str:
        """A user's role on a repository: set ones, owner is admin, else read or none."""
        if user.login.lower() in repo.roles:
            return repo.roles[user.login.lower()]
        if user is repo.owner:
            return "admin"
        return "none" if repo.private else "read"

    def association(self, repo: Repo, user: User) -> str:
        """`author_association` derived from the user's role, as GitHub shows it."""
        if user is repo.owner:
            return "OWNER"
        if user.login.lower() in repo.roles and LEVELS[self.role_permission(repo, user)] >= 2:
            return "MEMBER" if repo.owner.type == "Organization" else "COLLABORATOR"
        return "NONE"

    def role_permission(self, repo: Repo, user: User) -> str:
        """The legacy `permission` value (admin, write, read, none) of a user's role."""
        return ROLE_PERMISSION[self.role(repo, user)]


# ---------------------------------------------------------------------------------------------
# JSON rendering


class Views:
    """Renders state as GitHub's JSON, every API URL pointing back at this server."""

    def __init__(self, state: GitHubState) -> None:
        self.s = state

    @property
    def api(self) -> str:
        """The API base URL."""
        return self.s.url

    def html(self, *parts: str | int) -> str:
        """A github.com-style page URL (not served; nothing follows it)."""
        return "/".join([self.s.html_base, *(str(p) for p in parts)])

    def repo_api(self, repo: Repo) -> str:
        """API URL of a repository."""
        return f"{self.api}/repos/{repo.full_name}"

    def user(self, user: User) -> Json:
        """A simple-user object."""
        api = f"{self.api}/users/{quote(user.login)}"
        is_bot = user.type == "Bot"
        html = self.html("apps", user.login.removesuffix("[bot]")) if is_bot else self.html(
            user.login
        )
        return {
            "login": user.login,
            "id": user.id,
            "node_id": node_id("U_" if not is_bot else "BOT_", user.id),
            "avatar_url": f"https://avatars.githubusercontent.com/u/{user.id}?v=4",
            "gravatar_id": "",
            "url": api,
            "html_url": html,
            "followers_url": f"{api}/followers",
            "following_url": f"{api}/following{{/other_user}}",
            "gists_url": f"{api}/gists{{/gist_id}}",
            "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{api}/subscriptions",
            "organizations_url": f"{api}/orgs",
            "repos_url": f"{api}/repos",
            "events_url": f"{api}/events{{/privacy}}",
            "received_events_url": f"{api}/received_events",
            "type": user.type,
            "user_view_type": "public",
            "site_admin": False,
        }

    def public_user(self, user: User) -> Json:
        """A public-user object (GET /users/{login})."""
        moment = iso(self.s.created_at)
        extra = {
            "name": None, "company": None, "blog": "", "location": None, "email": None,
            "hireable": None, "bio": None, "twitter_username": None, "public_repos": 0,
            "public_gists": 0, "followers": 0, "following": 0, "created_at": moment,
            "updated_at": moment,
        }
        return {**self.user(user), **extra}

    def app(self) -> Json:
        """The App (integration) object."""
        moment = iso(self.s.created_at)
        return {
            "id": self.s.app_id,
            "slug": self.s.app_slug,
            "client_id": self.s.client_id,
            "node_id": node_id("A_", self.s.app_id),
            "owner": self.user(self.s.app_owner),
            "name": self.s.app_name,
            "description": "Differential PyTorch-alignment checks",
            "external_url": self.html("apps", self.s.app_slug),
            "html_url": self.html("apps", self.s.app_slug),
            "created_at": moment,
            "updated_at": moment,
            "permissions": dict(self.s.permissions),
            "events": list(self.s.events),
            "installations_count": len(self.s.installations),
        }

    def installation(self, inst: Installation) -> Json:
        """An installation object."""
        moment = iso(inst.created_at)
        return {
            "id": inst.id,
            "account": self.user(inst.account),
            "repository_selection": inst.repository_selection,
            "access_tokens_url": f"{self.api}/app/installations/{inst.id}/access_tokens",
            "repositories_url": f"{self.api}/installation/repositories",
            "html_url": self.html("organizations", inst.account.login, "settings", "installations",
                                  inst.id),
            "app_id": self.s.app_id,
            "app_slug": self.s.app_slug,
            "target_id": inst.account.id,
            "target_type": inst.account.type,
            "permissions": dict(self.s.permissions),
            "events": list(self.s.events),
            "created_at": moment,
            "updated_at": moment,
            "single_file_name": None,
            "has_multiple_single_files": False,
            "single_file_paths": [],
            "suspended_by": None,
            "suspended_at": None,
        }

    def repo(self, repo: Repo) -> Json:
        """A full repository object (a superset of every repository shape)."""
        api, html = self.repo_api(repo), self.html(repo.full_name)
        moment = iso(repo.created_at)
        open_count = sum(
            1 for i in self.s.issues.values() if i.repo is repo and i.state == "open"
        )
        size = sum(len(d) for files in repo.trees.values() for d in files.values()) // 1024
        return {
            "id": repo.id, "node_id": node_id("R_", repo.id), "name": repo.name,
            "full_name": repo.full_name, "private": repo.private, "owner": self.user(repo.owner),
            "html_url": html, "description": None, "fork": repo.fork, "url": api,
            **{f"{key}_url": f"{api}/{tail}" for key, tail in REPO_URLS.items()},
            "created_at": moment, "updated_at": moment, "pushed_at": moment,
            "git_url": f"git://github.com/{repo.full_name}.git",
            "ssh_url": f"git@github.com:{repo.full_name}.git", "clone_url": f"{html}.git",
            "svn_url": html, "homepage": None, "size": size, "stargazers_count": 0,
            "watchers_count": 0, "language": "Python", "has_issues": True,
            "has_projects": True, "has_downloads": True, "has_wiki": True, "has_pages": False,
            "has_discussions": False, "forks_count": 0, "mirror_url": None, "archived": False,
            "disabled": False, "open_issues_count": open_count, "license": None,
            "allow_forking": True, "is_template": False, "web_commit_signoff_required": False,
            "topics": [], "visibility": "private" if repo.private else "public", "forks": 0,
            "open_issues": open_count, "watchers": 0, "default_branch": repo.default_branch,
            "network_count": 0, "subscribers_count": 0,
        }

    def label(self, repo: Repo, name: str) -> Json:
        """A label object."""
        number = int(hashlib.sha1(f"{repo.id}/{name}".encode()).hexdigest()[:8], 16)
        return {
            "id": number, "node_id": node_id("LA_", number),
            "url": f"{self.repo_api(repo)}/labels/{quote(name)}", "name": name,
            "description": None, "color": "ededed", "default": False,
        }

    def team(self, repo: Repo, slug: str) -> Json:
        """A team (of the repository's owner) object."""
        number = int(hashlib.sha1(f"{repo.owner.login}/{slug}".encode()).hexdigest()[:8], 16)
        api = f"{self.api}/organizations/{repo.owner.id}/team/{number}"
        return {
            "id": number, "node_id": node_id("T_", number), "url": api,
            "html_url": self.html("orgs", repo.owner.login, "teams", slug), "name": slug,
            "slug": slug, "description": None, "privacy": "closed",
            "notification_setting": "notifications_enabled", "permission": "pull",
            "members_url": f"{api}/members{{/member}}", "repositories_url": f"{api}/repos",
            "parent": None, "type": "organization", "organization_id": repo.owner.id,
        }

    def reactions(self, url: str, found: list[Reaction]) -> Json:
        """A reaction rollup."""
        counts = {content: sum(1 for r in found if r.content == content) for content in REACTIONS}
        return {"url": url, "total_count": len(found), **counts}

    def reaction(self, reaction: Reaction) -> Json:
        """A reaction object."""
        return {
            "id": reaction.id, "node_id": node_id("REA_", reaction.id),
            "user": self.user(reaction.user), "content": reaction.content,
            "created_at": iso(reaction.created_at),
        }

    def issue_html(self, issue: Issue) -> str:
        """Page URL of an issue or pull request."""
        return self.html(issue.repo.full_name, "pull" if issue.pull else "issues", issue.number)

    def issue(self, issue: Issue) -> Json:
        """An issue object (pull requests too, with their `pull_request` key)."""
        api = f"{self.repo_api(issue.repo)}/issues/{issue.number}"
        comments = [c for c in self.s.comments.values()
                    if c.repo is issue.repo and c.issue_number == issue.number]
        data: Json = {
            "url": api, "repository_url": self.repo_api(issue.repo),
            "labels_url": f"{api}/labels{{/name}}", "comments_url": f"{api}/comments",
            "events_url": f"{api}/events", "html_url": self.issue_html(issue), "id": issue.id,
            "node_id": node_id("I_", issue.id), "number": issue.number, "title": issue.title,
            "user": self.user(issue.user),
            "labels": [self.label(issue.repo, name) for name in issue.labels],
            "state": issue.state, "locked": False,
            "assignee": self.user(issue.assignees[0]) if issue.assignees else None,
            "assignees": [self.user(u) for u in issue.assignees], "milestone": None,
            "comments": len(comments), "created_at": iso(issue.created_at),
            "updated_at": iso(issue.updated_at), "closed_at": iso(issue.closed_at),
            "author_association": issue.author_association, "active_lock_reason": None,
            "body": issue.body, "reactions": self.reactions(f"{api}/reactions", []),
            "timeline_url": f"{api}/timeline",
            "performed_via_github_app": self.app() if issue.via_app else None,
            "state_reason": "completed" if issue.state == "closed" else None,
        }
        if issue.pull is not None:
            data["draft"] = issue.pull.draft
            data["pull_request"] = self.pull_links(issue)
        return data

    def pull_links(self, issue: Issue) -> Json:
        """The `pull_request` key of an issue that is a pull request."""
        assert issue.pull is not None
        html = self.issue_html(issue)
        return {
            "url": f"{self.repo_api(issue.repo)}/pulls/{issue.number}", "html_url": html,
            "diff_url": f"{html}.diff", "patch_url": f"{html}.patch",
            "merged_at": iso(issue.pull.merged_at),
        }

    def search_item(self, issue: Issue) -> Json:
        """An issue-search-result item."""
        return {**self.issue(issue), "score": 1.0}

    def pull_end(self, issue: Issue, head: bool) -> Json:
        """The `head` or `base` of a pull request (`repo` is null for a deleted fork)."""
        pull = issue.pull
        assert pull is not None
        repo = pull.head_repo if head else issue.repo
        ref, sha = (pull.head_ref, pull.head_sha) if head else (pull.base_ref, pull.base_sha)
        owner = repo.owner if repo else issue.user
        return {
            "label": f"{owner.login}:{ref}", "ref": ref, "sha": sha, "user": self.user(owner),
            "repo": self.repo(repo) if repo else None,
        }

    def pull(self, issue: Issue, *, simple: bool = False) -> Json:
        """A pull-request object; `simple` gives the shorter list-endpoint shape."""
        pull = issue.pull
        assert pull is not None
        api, html = self.repo_api(issue.repo), self.issue_html(issue)
        number = issue.number
        links = {
            "self": f"{api}/pulls/{number}", "html": html, "issue": f"{api}/issues/{number}",
            "comments": f"{api}/issues/{number}/comments",
            "review_comments": f"{api}/pulls/{number}/comments",
            "review_comment": f"{api}/pulls/comments{{/number}}",
            "commits": f"{api}/pulls/{number}/commits",
            "statuses": f"{api}/statuses/{pull.head_sha}",
        }
        as_issue = self.issue(issue)
        data: Json = {
            "url": links["self"], "id": pull.id, "node_id": node_id("PR_", pull.id),
            "html_url": html, "diff_url": f"{html}.diff", "patch_url": f"{html}.patch",
            "issue_url": links["issue"], "commits_url": links["commits"],
            "review_comments_url": links["review_comments"],
            "review_comment_url": links["review_comment"], "comments_url": links["comments"],
            "statuses_url": links["statuses"], "number": number, "state": issue.state,
            "locked": False, "title": issue.title, "user": as_issue["user"],
            "body": issue.body, "labels": as_issue["labels"], "milestone": None,
            "active_lock_reason": None, "created_at": as_issue["created_at"],
            "updated_at": as_issue["updated_at"], "closed_at": as_issue["closed_at"],
            "merged_at": iso(pull.merged_at), "merge_commit_sha": None,
            "assignee": as_issue["assignee"], "assignees": as_issue["assignees"],
            "requested_reviewers": [self.user(u) for u in pull.requested_users],
            "requested_teams": [self.team(issue.repo, t) for t in pull.requested_teams],
            "head": self.pull_end(issue, True), "base": self.pull_end(issue, False),
            "_links": {key: {"href": href} for key, href in links.items()},
            "author_association": issue.author_association, "auto_merge": None,
            "draft": pull.draft,
        }
        if not simple:
            data.update(self.pull_details(issue, as_issue["comments"]))
        return data

    def pull_details(self, issue: Issue, comments: int) -> Json:
        """The fields only the single-pull-request endpoint has."""
        pull = issue.pull
        assert pull is not None
        is_open = issue.state == "open"
        return {
            "merged": pull.merged_at is not None,
            "mergeable": True if is_open else None,
            "rebaseable": True if is_open else None,
            "mergeable_state": ("draft" if pull.draft else "clean") if is_open else "unknown",
            "merged_by": None, "comments": comments, "review_comments": 0,
            "maintainer_can_modify": False, "commits": len(pull.commits),
            "additions": sum(f["additions"] for f in pull.files),
            "deletions": sum(f["deletions"] for f in pull.files),
            "changed_files": len(pull.files),
        }

    def file(self, issue: Issue, entry: Json) -> Json:
        """A diff-entry object (one changed file of a pull request)."""
        pull = issue.pull
        assert pull is not None
        path = quote(entry["filename"])
        return {
            **entry,
            "blob_url": self.html(issue.repo.full_name, "blob", pull.head_sha, path),
            "raw_url": self.html(issue.repo.full_name, "raw", pull.head_sha, path),
            "contents_url": f"{self.repo_api(issue.repo)}/contents/{path}?ref={pull.head_sha}",
        }

    def review(self, issue: Issue, review: Review) -> Json:
        """A pull-request review object."""
        html = f"{self.issue_html(issue)}#pullrequestreview-{review.id}"
        pull_url = f"{self.repo_api(issue.repo)}/pulls/{issue.number}"
        return {
            "id": review.id, "node_id": node_id("PRR_", review.id),
            "user": self.user(review.user), "body": review.body, "state": review.state,
            "html_url": html, "pull_request_url": pull_url,
            "author_association": self.s.association(issue.repo, review.user),
            "_links": {"html": {"href": html}, "pull_request": {"href": pull_url}},
            "submitted_at": iso(review.submitted_at), "commit_id": review.commit_id,
        }

    def comment(self, comment: Comment) -> Json:
        """An issue-comment object."""
        issue = self.s.issues[(comment.repo.id, comment.issue_number)]
        url = f"{self.repo_api(comment.repo)}/issues/comments/{comment.id}"
        return {
            "url": url, "html_url": f"{self.issue_html(issue)}#issuecomment-{comment.id}",
            "issue_url": f"{self.repo_api(comment.repo)}/issues/{comment.issue_number}",
            "id": comment.id, "node_id": node_id("IC_", comment.id),
            "user": self.user(comment.user), "created_at": iso(comment.created_at),
            "updated_at": iso(comment.updated_at),
            "author_association": comment.author_association, "body": comment.body,
            "reactions": self.reactions(f"{url}/reactions", comment.reactions),
            "performed_via_github_app": self.app() if comment.via_app else None,
        }

    def commit(self, repo: Repo, commit: Commit) -> Json:
        """A commit object (without `files` and `stats`, which this fake does not model)."""
        api, sha = self.repo_api(repo), commit.sha
        tree = hashlib.sha1(f"tree {sha}".encode()).hexdigest()
        person = {
            "name": commit.author.login, "date": iso(commit.date),
            "email": f"{commit.author.id}+{commit.author.login}@users.noreply.github.com",
        }
        verification = {
            "verified": False, "reason": "unsigned", "signature": None, "payload": None,
            "verified_at": None,
        }
        return {
            "url": f"{api}/commits/{sha}", "sha": sha, "node_id": node_id("C_", repo.id),
            "html_url": self.html(repo.full_name, "commit", sha),
            "comments_url": f"{api}/commits/{sha}/comments",
            "commit": {
                "url": f"{api}/git/commits/{sha}", "author": person, "committer": person,
                "message": commit.message, "tree": {"sha": tree, "url": f"{api}/git/trees/{tree}"},
                "comment_count": 0, "verification": verification,
            },
            "author": self.user(commit.author), "committer": self.user(commit.author),
            "parents": [
                {"sha": p, "url": f"{api}/commits/{p}",
                 "html_url": self.html(repo.full_name, "commit", p)}
                for p in commit.parents
            ],
        }

    def content(self, repo: Repo, ref: str, sha: str, path: str, data: bytes | None) -> Json:
        """A contents entry: a file (with its base64 `content`) or, when `data` is None, a dir."""
        api = self.repo_api(repo)
        item_sha = blob_sha(data) if data is not None else hashlib.sha1(path.encode()).hexdigest()
        kind = "file" if data is not None else "dir"
        self_url = f"{api}/contents/{quote(path)}?ref={quote(ref, safe='')}"
        git_url = f"{api}/git/{'blobs' if data is not None else 'trees'}/{item_sha}"
        html_url = self.html(repo.full_name, "blob" if data is not None else "tree", ref, path)
        raw = f"{self.api}/_raw/{repo.full_name}/{sha}/{quote(path)}"
        entry: Json = {
            "type": kind, "size": len(data or b""), "name": path.rsplit("/", 1)[-1],
            "path": path, "sha": item_sha, "url": self_url, "git_url": git_url,
            "html_url": html_url, "download_url": raw if data is not None else None,
            "_links": {"self": self_url, "git": git_url, "html": html_url},
        }
        if data is not None:
            entry.update({"content": wrap_base64(data), "encoding": "base64"})
        return entry

    def check_run(self, run: CheckRun) -> Json:
        """A check-run object."""
        api = f"{self.repo_api(run.repo)}/check-runs/{run.id}"
        html = self.html(run.repo.full_name, "runs", run.id)
        output = {key: run.output.get(key) for key in ("title", "summary", "text")}
        output.update(annotations_count=len(run.annotations), annotations_url=f"{api}/annotations")
        return {
            "id": run.id, "name": run.name, "node_id": node_id("CR_", run.id),
            "head_sha": run.head_sha, "external_id": run.external_id or "", "url": api,
            "html_url": html, "details_url": run.details_url or html, "status": run.status,
            "conclusion": run.conclusion, "started_at": iso(run.started_at),
            "completed_at": iso(run.completed_at), "output": output,
            "check_suite": {"id": run.suite_id}, "app": self.app(),
            "pull_requests": self.run_pulls(run),
        }

    def run_pulls(self, run: CheckRun) -> list[Json]:
        """Open pull requests of the same repository whose head is the run's commit.

        As on GitHub, pull requests from forks are not listed here.
        """
        found = [
            issue for issue in self.s.issues.values()
            if issue.repo is run.repo and issue.pull and issue.state == "open"
            and issue.pull.head_sha == run.head_sha and issue.pull.head_repo is run.repo
        ]
        return [self.pull_minimal(issue) for issue in found]

    def pull_minimal(self, issue: Issue) -> Json:
        """A pull-request-minimal object."""
        pull = issue.pull
        assert pull is not None
        repo = {"id": issue.repo.id, "url": self.repo_api(issue.repo), "name": issue.repo.name}
        return {
            "id": pull.id, "number": issue.number,
            "url": f"{self.repo_api(issue.repo)}/pulls/{issue.number}",
            "head": {"ref": pull.head_ref, "sha": pull.head_sha, "repo": repo},
            "base": {"ref": pull.base_ref, "sha": pull.base_sha, "repo": repo},
        }

    def annotation(self, run: CheckRun, item: Json) -> Json:
        """A check-annotation object."""
        keys = ("path", "start_line", "end_line", "start_column", "end_column",
                "annotation_level", "title", "message", "raw_details")
        blob = self.html(run.repo.full_name, "blob", run.head_sha, item["path"])
        return {**{key: item.get(key) for key in keys}, "blob_href": blob}

    def permission(self, repo: Repo, user: User) -> Json:
        """A repository-collaborator-permission object."""
        role = self.s.role(repo, user)
        level = LEVELS[ROLE_PERMISSION[role]]
        flags = {
            "admin": level >= 3, "maintain": role in ("admin", "maintain"), "push": level >= 2,
            "triage": level >= 1 and role != "read", "pull": level >= 1,
        }
        collaborator = {**self.user(user), "permissions": flags, "role_name": role}
        return {"permission": ROLE_PERMISSION[role], "role_name": role, "user": collaborator}

    def rate(self, limit: int, used: int, reset: int, resource: str) -> Json:
        """A rate-limit entry."""
        remaining = max(0, limit - used)
        return {"limit": limit, "remaining": remaining, "reset": reset, "used": used,
                "resource": resource}


# ---------------------------------------------------------------------------------------------
# Requests, replies, routes


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


class Api:
    """The REST operations: authentication, routing, pagination and each handler."""

    def __init__(self, state: GitHubState, *, validate_requests: bool) -> None:
        self.s = state
        self.v = Views(state)
        self.subset = load_subset() if validate_requests else None
        self.budgets: dict[tuple[str, str], tuple[int, int]] = {}
        self.routes = self.build_routes()

    def build_routes(self) -> list[Route]:
        """The route table (OpenAPI templates, plus the archive and raw download hosts)."""
        repo = "/repos/{owner}/{repo}"
        return [
            Route("GET", "/app", self.get_app, "jwt"),
            Route("GET", "/app/installations", self.list_installations, "jwt"),
            Route("GET", "/app/installations/{installation_id}", self.get_installation, "jwt"),
            Route("POST", "/app/installations/{installation_id}/access_tokens",
                  self.create_token, "jwt"),
            Route("GET", f"{repo}/installation", self.get_repo_installation, "jwt"),
            Route("GET", "/installation/repositories", self.list_installation_repos),
            Route("GET", "/rate_limit", self.get_rate_limit, "none"),
            Route("GET", "/users/{username}", self.get_user),
            Route("GET", repo, self.get_repo),
            Route("GET", f"{repo}/contents/{{path}}", self.get_content, permission="contents:read"),
            Route("GET", f"{repo}/tarball/{{ref}}", self.tarball, permission="contents:read",
                  ref_optional=True),
            Route("GET", "/_codeload/{owner}/{repo}/legacy.tar.gz/{ref}", self.codeload, "none"),
            Route("GET", "/_raw/{owner}/{repo}/{ref}/{path}", self.raw, "none"),
            Route("GET", f"{repo}/commits/{{ref}}", self.get_commit, permission="contents:read"),
            Route("GET", f"{repo}/commits/{{ref}}/check-runs", self.list_check_runs_for_ref,
                  permission="checks:read"),
            Route("GET", f"{repo}/pulls", self.list_pulls, permission="pull_requests:read"),
            Route("GET", f"{repo}/pulls/{{pull_number}}", self.get_pull,
                  permission="pull_requests:read"),
            Route("GET", f"{repo}/pulls/{{pull_number}}/files", self.list_pull_files,
                  permission="pull_requests:read"),
            Route("GET", f"{repo}/pulls/{{pull_number}}/reviews", self.list_reviews,
                  permission="pull_requests:read"),
            Route("GET", f"{repo}/pulls/{{pull_number}}/commits", self.list_pull_commits,
                  permission="pull_requests:read"),
            Route("GET", f"{repo}/pulls/{{pull_number}}/requested_reviewers",
                  self.list_requested_reviewers, permission="pull_requests:read"),
            Route("POST", f"{repo}/issues", self.create_issue, permission="issues:write"),
            Route("GET", f"{repo}/issues/{{issue_number}}", self.get_issue,
                  permission="issues|pull_requests:read"),
            Route("GET", f"{repo}/issues/{{issue_number}}/comments", self.list_comments,
                  permission="issues|pull_requests:read"),
            Route("POST", f"{repo}/issues/{{issue_number}}/comments", self.create_comment,
                  permission="issues|pull_requests:write"),
            Route("GET", f"{repo}/issues/comments/{{comment_id}}", self.get_comment,
                  permission="issues|pull_requests:read"),
            Route("PATCH", f"{repo}/issues/comments/{{comment_id}}", self.update_comment,
                  permission="issues|pull_requests:write"),
            Route("POST", f"{repo}/issues/comments/{{comment_id}}/reactions",
                  self.create_reaction, permission="issues|pull_requests:write"),
            Route("POST", f"{repo}/check-runs", self.create_check_run, permission="checks:write"),
            Route("GET", f"{repo}/check-runs/{{check_run_id}}", self.get_check_run,
                  permission="checks:read"),
            Route("PATCH", f"{repo}/check-runs/{{check_run_id}}", self.update_check_run,
                  permission="checks:write"),
            Route("GET", f"{repo}/check-runs/{{check_run_id}}/annotations",
                  self.list_annotations, permission="checks:read"),
            Route("GET", f"{repo}/collaborators/{{username}}/permission", self.get_permission),
            Route("GET", "/search/issues", self.search_issues),
        ]

    # -- dispatch ---------------------------------------------------------------------------

    def handle(self, call: Call, raw: bytes) -> Reply:
        """Answer one routed request: authenticate, parse and check the body, run the handler."""
        self.authenticate(call)
        call.body = self.parse_body(raw)
        self.validate_body(call)
        return call.route.handler(call)

    def route(self, method: str, target: str, headers: dict[str, str]) -> Call:
        """The call for the first matching route (404 when none)."""
        path, query = split_target(target)
        for route in self.routes:
            found = route.pattern.match(path)
            if route.method == method and found:
                params = {k: unquote(v) for k, v in found.groupdict().items() if v is not None}
                return Call(method, path, query, headers, params, route)
        raise not_found()

    def parse_body(self, raw: bytes) -> Any:
        """The JSON request body (400 `Problems parsing JSON` when it is not JSON)."""
        if not raw.strip():
            return None
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

    # -- rate-limit accounting --------------------------------------------------------------

    def rate_headers(
        self, headers: Mapping[str, str], resource: str, spend: bool = True
    ) -> dict[str, str]:
        """X-RateLimit-* for the caller, spending one request from its budget."""
        identity = headers.get("authorization", "anonymous").split(" ")[-1]
        limit, window = (SEARCH_LIMIT, 60) if resource == "search" else (CORE_LIMIT, 3600)
        if identity == "anonymous" and resource == "core":
            limit = ANONYMOUS_LIMIT
        now = int(time.time())
        used, reset = self.budgets.get((identity, resource), (0, now + window))
        used, reset = (0, now + window) if now >= reset else (used, reset)
        used += 1 if spend else 0
        self.budgets[(identity, resource)] = (used, reset)
        return {
            "X-RateLimit-Limit": str(limit), "X-RateLimit-Remaining": str(max(0, limit - used)),
            "X-RateLimit-Used": str(used), "X-RateLimit-Reset": str(reset),
            "X-RateLimit-Resource": resource,
        }

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

    # -- the App ----------------------------------------------------------------------------

    def get_app(self, call: Call) -> Reply:
        """GET /app."""
        return Reply(200, self.v.app())

    def list_installations(self, call: Call) -> Reply:
        """GET /app/installations."""
        found = sorted(self.s.installations.values(), key=lambda inst: inst.id)
        return self.paginate(call, found, self.v.installation)

    def installation(self, call: Call) -> Installation:
        """The installation named in the path (404 when unknown)."""
        try:
            return self.s.installations[int(call.params["installation_id"])]
        except (KeyError, ValueError):
            raise not_found() from None

    def get_installation(self, call: Call) -> Reply:
        """GET /app/installations/{installation_id}."""
        return Reply(200, self.v.installation(self.installation(call)))

    def get_repo_installation(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/installation."""
        repo = self.s.repos.get(f"{call.params['owner']}/{call.params['repo']}".lower())
        if repo is None or repo.installation_id is None:
            raise not_found()
        return Reply(200, self.v.installation(self.s.installations[repo.installation_id]))

    def create_token(self, call: Call) -> Reply:
        """POST /app/installations/{installation_id}/access_tokens."""
        inst = self.installation(call)
        body = call.json
        token = Token(
            random_token("ghs_"), inst.id, utcnow() + self.s.token_lifetime,
            self.token_permissions(body.get("permissions") or {}),
            self.token_repositories(inst, body),
        )
        self.s.tokens[token.value] = token
        out: Json = {
            "token": token.value, "expires_at": iso(token.expires_at),
            "permissions": token.permissions, "repository_selection": inst.repository_selection,
        }
        if token.repositories is not None:
            chosen = sorted(token.repositories)
            out["repositories"] = [self.v.repo(r) for r in self.s.repos.values() if r.id in chosen]
        return Reply(201, out)

    def token_permissions(self, asked: Mapping[str, str]) -> dict[str, str]:
        """The App's permissions, narrowed to those asked for (422 when asking for more)."""
        granted = dict(self.s.permissions)
        if not asked:
            return granted
        for name, level in asked.items():
            if LEVELS.get(level, 9) > LEVELS.get(granted.get(name, "none"), 0):
                raise ApiError(422, "The permissions requested are not granted to this "
                               "installation.")
        return {**dict(asked), "metadata": "read"}

    def token_repositories(self, inst: Installation, body: Json) -> set[int] | None:
        """The repository ids a token is narrowed to, or None for all of the installation's."""
        names = {str(n).lower() for n in body.get("repositories") or []}
        ids = set(body.get("repository_ids") or [])
        if not names and not ids:
            return None
        held = [r for r in self.s.repos.values() if r.installation_id == inst.id]
        if not names <= {r.name.lower() for r in held} or not ids <= {r.id for r in held}:
            raise ApiError(422, "There is at least one repository that does not exist or is "
                           "not accessible to the parent installation.")
        return {r.id for r in held if r.name.lower() in names or r.id in ids}

    def list_installation_repos(self, call: Call) -> Reply:
        """GET /installation/repositories."""
        token = call.token
        if token is None:
            raise ApiError(401, "Requires authentication")
        held = [r for r in self.s.repos.values() if self.covers(token, r)]
        inst = self.s.installations[token.installation_id]

        def wrap(page: list[Json]) -> Json:
            return {"total_count": len(held), "repository_selection": inst.repository_selection,
                    "repositories": page}

        return self.paginate(call, sorted(held, key=lambda r: r.id), self.v.repo, wrap)

    def get_rate_limit(self, call: Call) -> Reply:
        """GET /rate_limit (free, as on GitHub)."""
        identity = call.headers.get("authorization", "anonymous").split(" ")[-1]
        now = int(time.time())
        core = self.budgets.get((identity, "core"), (0, now + 3600))
        search = self.budgets.get((identity, "search"), (0, now + 60))
        resources = {
            "core": self.v.rate(CORE_LIMIT, core[0], core[1], "core"),
            "search": self.v.rate(SEARCH_LIMIT, search[0], search[1], "search"),
        }
        return Reply(200, {"resources": resources, "rate": resources["core"]})

    def get_user(self, call: Call) -> Reply:
        """GET /users/{username}."""
        user = self.s.users.get(call.params["username"].lower())
        if user is None:
            raise not_found()
        return Reply(200, self.v.public_user(user))

    # -- repositories and content -----------------------------------------------------------

    def get_repo(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}."""
        return Reply(200, self.v.repo(self.repo(call)))

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

    def get_content(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/contents/{path}: a file, or a directory listing."""
        repo = self.repo(call)
        ref = call.query.get("ref") or repo.default_branch
        sha = self.resolve(repo, ref)
        tree, path = repo.trees[sha], call.params.get("path", "").strip("/")
        if path in tree:
            return self.file_content(call, repo, ref, sha, path, tree[path])
        listing = self.listing(repo, ref, sha, path)
        if not listing:
            raise not_found(f"{DOCS}/repos/contents#get-repository-content")
        return Reply(200, listing)

    def file_content(
        self, call: Call, repo: Repo, ref: str, sha: str, path: str, data: bytes
    ) -> Reply:
        """One file as GitHub serves it by media type: the raw bytes (up to 100 MB), the object
        form (no content beyond 1 MB: `encoding` "none"), or JSON, which is refused with 403
        `too_large` beyond 1 MB."""
        accept = call.headers.get("accept", "").lower()
        if len(data) > CONTENT_RAW_LIMIT or (
                len(data) > CONTENT_JSON_LIMIT and not accept.startswith(RAW_MEDIA + OBJECT_MEDIA)):
            raise ApiError(403, TOO_LARGE_MESSAGE,
                           f"{DOCS}/repos/contents#get-repository-content",
                           errors=[{"resource": "Blob", "field": "data", "code": "too_large"}])
        if accept.startswith(RAW_MEDIA):
            return Reply(200, raw=data, content_type="application/vnd.github.raw; charset=utf-8",
                         headers={"X-GitHub-Media-Type": "github.raw; format=raw"})
        entry = self.v.content(repo, ref, sha, path, data)
        if len(data) > CONTENT_JSON_LIMIT:
            entry.update(content="", encoding="none")
        return Reply(200, entry)

    def listing(self, repo: Repo, ref: str, sha: str, folder: str) -> list[Json]:
        """Entries directly inside `folder` ("" for the root) at commit `sha`."""
        prefix = f"{folder}/" if folder else ""
        children: dict[str, bytes | None] = {}
        for path, data in repo.trees[sha].items():
            if path.startswith(prefix):
                head, slash, _ = path[len(prefix):].partition("/")
                children[prefix + head] = None if slash else data
        return [self.v.content(repo, ref, sha, p, d) for p, d in sorted(children.items())]

    def tarball(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/tarball/{ref}: 302 to a short-lived download URL."""
        repo = self.repo(call)
        sha = self.resolve(repo, call.params.get("ref"))
        ticket = random_token("", 32)
        self.s.downloads[ticket] = (repo.id, sha, utcnow() + DOWNLOAD_LIFETIME)
        location = f"{self.s.url}/_codeload/{repo.full_name}/legacy.tar.gz/{sha}?token={ticket}"
        return Reply(302, None, {"Location": location})

    def download_repo(self, call: Call) -> Repo:
        """The repository of a download URL, if the ticket or a token allows it (404 if not)."""
        repo = self.s.repos.get(f"{call.params['owner']}/{call.params['repo']}".lower())
        if repo is None:
            raise not_found()
        ticket = self.s.downloads.get(call.query.get("token", ""))
        if not repo.private or (ticket and ticket[0] == repo.id and ticket[2] > utcnow()):
            return repo
        credential = call.headers.get("authorization", "").partition(" ")[2].strip()
        token = self.s.tokens.get(credential)
        if token is None or token.expired or not self.covers(token, repo):
            raise not_found()
        return repo

    def codeload(self, call: Call) -> Reply:
        """The archive host: a gzipped tar whose top folder is `{owner}-{repo}-{sha7}/`."""
        repo = self.download_repo(call)
        sha = self.resolve(repo, call.params["ref"])
        prefix = f"{repo.owner.login}-{repo.name}-{sha[:7]}"
        data = build_tarball(prefix, repo.trees[sha], sha, repo.commits[sha].date)
        disposition = f"attachment; filename={prefix}.tar.gz"
        return Reply(200, raw=data, content_type="application/x-gzip",
                     headers={"Content-Disposition": disposition})

    def raw(self, call: Call) -> Reply:
        """The raw-file host that `download_url` points at."""
        repo = self.download_repo(call)
        tree = repo.trees.get(self.resolve(repo, call.params["ref"]), {})
        if call.params["path"] not in tree:
            raise not_found()
        return Reply(200, raw=tree[call.params["path"]], content_type="text/plain; charset=utf-8")

    def get_commit(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/commits/{ref}."""
        repo = self.repo(call)
        try:
            sha = self.resolve(repo, call.params["ref"])
        except ApiError:
            raise ApiError(422, f"No commit found for SHA: {call.params['ref']}") from None
        return Reply(200, self.v.commit(repo, repo.commits[sha]))

    # -- pull requests ----------------------------------------------------------------------

    def issue(self, call: Call, *, pull: bool = False) -> Issue:
        """The issue (or, with `pull`, pull request) named in the path (404 when unknown)."""
        repo = self.repo(call)
        number = call.params.get("pull_number") or call.params.get("issue_number") or "0"
        issue = self.s.issues.get((repo.id, int(number))) if number.isdigit() else None
        if issue is None or (pull and issue.pull is None):
            raise not_found()
        return issue

    def list_pulls(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/pulls (state, head, base, sort, direction)."""
        repo = self.repo(call)
        state = call.query.get("state", "open")
        found = [
            i for i in self.s.issues.values()
            if i.repo is repo and i.pull and state in ("all", i.state)
            and self.pull_matches(call, i)
        ]
        sort = call.query.get("sort", "created")
        descending = call.query.get("direction", "desc" if sort == "created" else "asc") == "desc"
        keys: dict[str, Callable[[Issue], Any]] = {
            "created": lambda i: (i.created_at, i.number),
            "updated": lambda i: (i.updated_at, i.number),
        }
        ordered = pick(found, keys.get(sort, keys["created"]), descending)
        return self.paginate(call, ordered, lambda i: self.v.pull(i, simple=True))

    def pull_matches(self, call: Call, issue: Issue) -> bool:
        """The `head` ("user:ref") and `base` filters of the pulls list."""
        pull = issue.pull
        assert pull is not None
        head, base = call.query.get("head"), call.query.get("base")
        owner = pull.head_repo.owner.login if pull.head_repo else issue.user.login
        return (head in (None, f"{owner}:{pull.head_ref}")) and base in (None, pull.base_ref)

    def get_pull(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/pulls/{pull_number}."""
        return Reply(200, self.v.pull(self.issue(call, pull=True)))

    def list_pull_files(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/pulls/{pull_number}/files (GitHub stops at 3000)."""
        issue = self.issue(call, pull=True)
        assert issue.pull is not None
        return self.paginate(call, issue.pull.files[:3000], lambda f: self.v.file(issue, f))

    def list_reviews(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews."""
        issue = self.issue(call, pull=True)
        assert issue.pull is not None
        return self.paginate(call, issue.pull.reviews, lambda r: self.v.review(issue, r))

    def list_pull_commits(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/pulls/{pull_number}/commits (oldest first, at most 250)."""
        issue = self.issue(call, pull=True)
        assert issue.pull is not None
        shas = issue.pull.commits[-250:]
        return self.paginate(call, shas, lambda sha: self.v.commit(issue.repo,
                                                                     issue.repo.commits[sha]))

    def list_requested_reviewers(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers."""
        issue = self.issue(call, pull=True)
        assert issue.pull is not None
        return Reply(200, {
            "users": [self.v.user(u) for u in issue.pull.requested_users],
            "teams": [self.v.team(issue.repo, t) for t in issue.pull.requested_teams],
        })

    # -- issues and comments ----------------------------------------------------------------

    def create_issue(self, call: Call) -> Reply:
        """POST /repos/{owner}/{repo}/issues."""
        repo = self.repo(call)
        body = call.json
        if len(body.get("body") or "") > COMMENT_LIMIT:
            raise validation_failed("Issue", "body", "custom",
                                    f"body is too long (maximum is {COMMENT_LIMIT} characters)")
        taken = [number for (repo_id, number) in self.s.issues if repo_id == repo.id]
        moment = utcnow()
        issue = Issue(
            repo, max(taken, default=0) + 1, self.s.next_id(), str(body["title"]),
            body.get("body"), self.actor(call), moment, moment,
            labels=[str(x) for x in body.get("labels") or []],
            assignees=[self.s.user(x) for x in body.get("assignees") or []], via_app=True,
        )
        self.s.issues[(repo.id, issue.number)] = issue
        data = self.v.issue(issue)
        return Reply(201, data, {"Location": data["url"]})

    def get_issue(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/issues/{issue_number}."""
        return Reply(200, self.v.issue(self.issue(call)))

    def list_comments(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/issues/{issue_number}/comments (`since` supported)."""
        issue = self.issue(call)
        since = call.query.get("since")
        found = [
            c for c in self.s.comments.values()
            if c.repo is issue.repo and c.issue_number == issue.number
            and (since is None or c.updated_at >= parse_time(since))
        ]
        return self.paginate(call, found, self.v.comment)

    def check_comment_body(self, text: str, creating: bool) -> None:
        """422 for a body over 65536 characters, in the shape each endpoint uses."""
        if len(text) <= COMMENT_LIMIT:
            return
        if creating:
            raise validation_failed("IssueComment", "data", "unprocessable",
                                    f"Body is too long (maximum is {COMMENT_LIMIT} characters)")
        raise validation_failed("IssueComment", "body", "custom",
                                f"body is too long (maximum is {COMMENT_LIMIT} characters)")

    def create_comment(self, call: Call) -> Reply:
        """POST /repos/{owner}/{repo}/issues/{issue_number}/comments."""
        issue = self.issue(call)
        self.check_comment_body(call.json["body"], creating=True)
        moment = utcnow()
        comment = Comment(
            self.s.next_id(), issue.repo, issue.number, call.json["body"], self.actor(call),
            moment, moment, "NONE", via_app=True,
        )
        self.s.comments[comment.id] = comment
        issue.updated_at = moment
        data = self.v.comment(comment)
        return Reply(201, data, {"Location": data["url"]})

    def comment(self, call: Call) -> Comment:
        """The comment named in the path, if it belongs to the path's repository."""
        repo = self.repo(call)
        comment_id = call.params["comment_id"]
        comment = self.s.comments.get(int(comment_id)) if comment_id.isdigit() else None
        if comment is None or comment.repo is not repo:
            raise not_found()
        return comment

    def get_comment(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/issues/comments/{comment_id}."""
        return Reply(200, self.v.comment(self.comment(call)))

    def update_comment(self, call: Call) -> Reply:
        """PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}."""
        comment = self.comment(call)
        self.actor(call)
        self.check_comment_body(call.json["body"], creating=False)
        comment.body = call.json["body"]
        comment.updated_at = utcnow()
        self.s.issues[(comment.repo.id, comment.issue_number)].updated_at = comment.updated_at
        return Reply(200, self.v.comment(comment))

    def create_reaction(self, call: Call) -> Reply:
        """POST .../issues/comments/{comment_id}/reactions: 201 new, 200 if already there."""
        comment = self.comment(call)
        user, content = self.actor(call), call.json["content"]
        for reaction in comment.reactions:
            if reaction.user is user and reaction.content == content:
                return Reply(200, self.v.reaction(reaction))
        reaction = Reaction(self.s.next_id(), user, content, utcnow())
        comment.reactions.append(reaction)
        return Reply(201, self.v.reaction(reaction))

    # -- check runs -------------------------------------------------------------------------

    def check_output(self, output: Json | None) -> None:
        """GitHub measures output.summary and output.text in bytes too (65535 at most)."""
        for key in ("summary", "text"):
            text = (output or {}).get(key) or ""
            if len(text.encode()) > OUTPUT_LIMIT:
                raise validation_failed("CheckRun", key, "custom",
                                        f"{key} exceeds a maximum bytesize of {OUTPUT_LIMIT}")

    def apply_run(self, run: CheckRun, body: Json) -> None:
        """Apply a create or update body to a run; annotations are appended, not replaced."""
        for key in ("name", "details_url", "external_id", "status", "conclusion", "actions"):
            if key in body:
                setattr(run, key, body[key])
        if "started_at" in body:
            run.started_at = parse_time(body["started_at"])
        output = body.get("output")
        if output:
            run.output.update({k: output[k] for k in ("title", "summary", "text") if k in output})
            run.annotations.extend(output.get("annotations") or [])
        if "conclusion" in body:
            run.status = "completed"
        if run.status == "completed":
            stamp = body.get("completed_at")
            run.completed_at = parse_time(stamp) if stamp else (run.completed_at or utcnow())
        elif run.status == "in_progress" and run.started_at is None:
            run.started_at = utcnow()
        run.updates.append(body)

    def check_completed(self, run: CheckRun, body: Json) -> None:
        """A completed run needs a conclusion."""
        if body.get("status") == "completed" and not (body.get("conclusion") or run.conclusion):
            raise invalid_request(['"conclusion" wasn\'t supplied.'])

    def create_check_run(self, call: Call) -> Reply:
        """POST /repos/{owner}/{repo}/check-runs."""
        repo = self.repo(call)
        body = call.json
        if body["head_sha"] not in repo.commits:
            raise ApiError(422, f"No commit found for SHA: {body['head_sha']}")
        self.check_output(body.get("output"))
        same = [r for r in self.s.check_runs.values() if r.repo is repo
                and r.head_sha == body["head_sha"]]
        suite = same[0].suite_id if same else self.s.next_id()
        run = CheckRun(self.s.next_id(), repo, body["name"], body["head_sha"], suite,
                       started_at=utcnow())
        self.check_completed(run, body)
        self.apply_run(run, body)
        self.s.check_runs[run.id] = run
        data = self.v.check_run(run)
        return Reply(201, data, {"Location": data["url"]})

    def check_run(self, call: Call) -> CheckRun:
        """The check run named in the path (404 when unknown or in another repository)."""
        repo = self.repo(call)
        run_id = call.params["check_run_id"]
        run = self.s.check_runs.get(int(run_id)) if run_id.isdigit() else None
        if run is None or run.repo is not repo:
            raise not_found()
        return run

    def get_check_run(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/check-runs/{check_run_id}."""
        return Reply(200, self.v.check_run(self.check_run(call)))

    def update_check_run(self, call: Call) -> Reply:
        """PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}."""
        run = self.check_run(call)
        self.check_output(call.json.get("output"))
        self.check_completed(run, call.json)
        self.apply_run(run, call.json)
        return Reply(200, self.v.check_run(run))

    def list_annotations(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/check-runs/{check_run_id}/annotations."""
        run = self.check_run(call)
        return self.paginate(call, run.annotations, lambda a: self.v.annotation(run, a))

    def list_check_runs_for_ref(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/commits/{ref}/check-runs (check_name, status, filter)."""
        repo = self.repo(call)
        sha = self.resolve(repo, call.params["ref"])
        runs = [r for r in self.s.check_runs.values() if r.repo is repo and r.head_sha == sha]
        name, status = call.query.get("check_name"), call.query.get("status")
        runs = [r for r in runs if name in (None, r.name) and status in (None, r.status)]
        if call.query.get("filter", "latest") == "latest":
            runs = list({r.name: r for r in runs}.values())
        runs.sort(key=lambda r: r.id, reverse=True)

        def wrap(page: list[Json]) -> Json:
            return {"total_count": len(runs), "check_runs": page}

        return self.paginate(call, runs, self.v.check_run, wrap)

    # -- collaborators and search -----------------------------------------------------------

    def get_permission(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/collaborators/{username}/permission."""
        repo = self.repo(call)
        user = self.s.users.get(call.params["username"].lower())
        if user is None:
            raise not_found()
        return Reply(200, self.v.permission(repo, user))

    def search_issues(self, call: Call) -> Reply:
        """GET /search/issues (repo:, is:/type:, state:, draft:, author:, label:, created:,
        updated:, and plain words matched against titles and bodies)."""
        repos, tests = self.search_terms(call, call.query.get("q", ""))
        found = [
            i for i in self.s.issues.values()
            if (not repos or i.repo in repos) and self.visible(call, i.repo)
            and all(test(i) for test in tests)
        ]
        sort = call.query.get("sort", "created")
        descending = call.query.get("order", "desc") == "desc"
        key = (lambda i: (i.updated_at, i.id)) if sort == "updated" else (
            lambda i: (i.created_at, i.id))
        ordered = pick(found, key, descending)[:1000]

        def wrap(page: list[Json]) -> Json:
            return {"total_count": len(ordered), "incomplete_results": False,
                    "search_type": "lexical", "items": page}

        return self.paginate(call, ordered, self.v.search_item, wrap)

    def visible(self, call: Call, repo: Repo) -> bool:
        """Whether search may show items of `repo` to this caller."""
        return not repo.private or self.covers(call.token, repo)

    def search_terms(self, call: Call, query: str) -> tuple[list[Repo], list[Predicate]]:
        """The repositories named by `repo:` and one predicate per other term of `q`."""
        repos: list[Repo] = []
        tests: list[Predicate] = []
        for negated, key, value in re.findall(r'(-?)(?:(\w+):)?("[^"]*"|\S+)', query):
            value = value.strip('"')
            if key == "repo":
                repos.append(self.search_repo(call, value))
                continue
            test = qualifier(key, value) if key else word_test(value)
            tests.append((lambda t: lambda i: not t(i))(test) if negated else test)
        return repos, tests

    def search_repo(self, call: Call, name: str) -> Repo:
        """A repository a `repo:` qualifier names, if the caller may search it (422 if not)."""
        repo = self.s.repos.get(name.lower())
        if repo is None or not self.visible(call, repo):
            raise validation_failed("Search", "q", "invalid",
                                    "The listed users and repositories cannot be searched either "
                                    "because the resources do not exist or you do not have "
                                    "permission to view them.")
        return repo


def word_test(word: str) -> Predicate:
    """A plain search word: found in the title or body, ignoring case."""
    return lambda i: word.lower() in f"{i.title}\n{i.body or ''}".lower()


IS_TESTS: dict[str, Predicate] = {
    "pr": lambda i: i.pull is not None,
    "issue": lambda i: i.pull is None,
    "open": lambda i: i.state == "open",
    "closed": lambda i: i.state == "closed",
    "merged": lambda i: i.pull is not None and i.pull.merged_at is not None,
    "unmerged": lambda i: i.pull is not None and i.pull.merged_at is None and i.state == "closed",
    "draft": lambda i: i.pull is not None and i.pull.draft,
}


def qualifier(key: str, value: str) -> Predicate:
    """The predicate of one `key:value` search qualifier (422 for ones this fake lacks)."""
    if key in ("is", "type", "state") and value in IS_TESTS:
        return IS_TESTS[value]
    if key == "draft" and value in ("true", "false"):
        return lambda i: i.pull is not None and i.pull.draft == (value == "true")
    if key == "author":
        return lambda i: i.user.login.lower() == value.lower()
    if key == "label":
        return lambda i: value in i.labels
    if key in ("created", "updated"):
        return date_test(key, value)
    raise validation_failed("Search", "q", "invalid",
                            f"The test server does not support the qualifier {key}:{value}")


def date_test(key: str, value: str) -> Predicate:
    """`created:`/`updated:` with >, >=, <, <= or a `from..to` range."""
    def moment(issue: Issue) -> datetime:
        return issue.created_at if key == "created" else issue.updated_at

    if ".." in value:
        low, high = (parse_time(part) for part in value.split(".."))
        return lambda i: low <= moment(i) <= high + timedelta(days=1)
    found = re.fullmatch(r"(>=|<=|>|<)?(.+)", value)
    assert found is not None
    op, when = found[1] or ">=", parse_time(found[2])
    compare: dict[str, Callable[[datetime], bool]] = {
        ">": lambda m: m > when, ">=": lambda m: m >= when,
        "<": lambda m: m < when, "<=": lambda m: m <= when,
    }
    return lambda i: compare[op](moment(i))


class Webhooks:
    """Webhook payloads built from the current state, shaped like GitHub's deliveries.

    Names are `event.action` (`pull_request.opened`, `issue_comment.created`, `ping`), as the
    fixtures in fixtures/github/webhooks are named.
    """

    def __init__(self, state: GitHubState, views: Views) -> None:
        self.s = state
        self.v = views

    def build(self, name: str, owner: str | None = None, repo: str | None = None,
              **refs: Any) -> Json:
        """The payload of `name` for `owner/repo`; `refs` name the objects and the sender."""
        event, _, action = name.partition(".")
        builder = getattr(self, event, None)
        if builder is None:
            raise ValueError(f"no webhook builder for {event!r}")
        target = self.s.repo(owner, repo) if owner and repo else None
        payload: Json = builder(target, action, **refs)
        return {"action": action, **payload} if action else payload

    def common(self, repo: Repo, sender: str | None) -> Json:
        """repository, organization, installation and sender."""
        out: Json = {"repository": self.v.repo(repo)}
        if repo.owner.type == "Organization":
            out["organization"] = self.organization(repo.owner)
        if repo.installation_id is not None:
            out["installation"] = {"id": repo.installation_id,
                                   "node_id": node_id("MDIz", repo.installation_id)}
        out["sender"] = self.v.user(self.s.user(sender) if sender else repo.owner)
        return out

    def organization(self, org: User) -> Json:
        """An organization-simple object."""
        api = f"{self.v.api}/orgs/{org.login}"
        return {
            "login": org.login, "id": org.id, "node_id": node_id("O_", org.id), "url": api,
            "repos_url": f"{api}/repos", "events_url": f"{api}/events", "hooks_url": f"{api}/hooks",
            "issues_url": f"{api}/issues", "members_url": f"{api}/members{{/member}}",
            "public_members_url": f"{api}/public_members{{/member}}",
            "avatar_url": self.v.user(org)["avatar_url"], "description": None,
        }

    def pull_request(self, repo: Repo, action: str, *, number: int, sender: str | None = None,
                     changes: Json | None = None) -> Json:
        """pull_request.*: `before`/`after` for synchronize, `changes` for edited."""
        issue = self.s.issues[(repo.id, number)]
        pull = issue.pull
        assert pull is not None
        out: Json = {"number": number, "pull_request": self.v.pull(issue)}
        if action == "synchronize":
            before = pull.commits[-2] if len(pull.commits) > 1 else pull.base_sha
            out.update(before=before, after=pull.head_sha)
        if action == "edited":
            out = {"changes": changes or {"title": {"from": issue.title}}, **out}
        return {**out, **self.common(repo, sender or issue.user.login)}

    def pull_request_review(self, repo: Repo, action: str, *, number: int, review_id: int,
                            sender: str | None = None) -> Json:
        """pull_request_review.*."""
        issue = self.s.issues[(repo.id, number)]
        assert issue.pull is not None
        review = next(r for r in issue.pull.reviews if r.id == review_id)
        return {"review": self.v.review(issue, review), "pull_request": self.v.pull(issue),
                **self.common(repo, sender or review.user.login)}

    def issue_comment(self, repo: Repo, action: str, *, comment_id: int,
                      sender: str | None = None, changes: Json | None = None) -> Json:
        """issue_comment.*: `changes` (the old body) for edited."""
        comment = self.s.comments[comment_id]
        issue = self.s.issues[(repo.id, comment.issue_number)]
        out: Json = {"issue": self.v.issue(issue), "comment": self.v.comment(comment)}
        if action == "edited":
            out = {"changes": changes or {"body": {"from": comment.body}}, **out}
        return {**out, **self.common(repo, sender or comment.user.login)}

    def check_run(self, repo: Repo, action: str, *, check_run_id: int,
                  sender: str | None = None) -> Json:
        """check_run.* (rerequested: someone pressed "Re-run")."""
        run = self.s.check_runs[check_run_id]
        data = self.v.check_run(run)
        data["check_suite"] = self.check_suite(run)
        return {"check_run": data, **self.common(repo, sender)}

    def check_suite(self, run: CheckRun) -> Json:
        """The check suite as check_run webhooks embed it."""
        api = self.v.repo_api(run.repo)
        branch = next((b for b, sha in run.repo.branches.items() if sha == run.head_sha), None)
        return {
            "id": run.suite_id, "node_id": node_id("CS_", run.suite_id), "head_branch": branch,
            "head_sha": run.head_sha, "status": run.status, "conclusion": run.conclusion,
            "url": f"{api}/check-suites/{run.suite_id}", "before": None, "after": run.head_sha,
            "pull_requests": self.v.run_pulls(run), "app": self.v.app(),
            "created_at": iso(run.started_at),
            "updated_at": iso(run.completed_at or run.started_at),
        }

    def installation(self, repo: Repo | None, action: str, *, installation_id: int,
                     sender: str | None = None) -> Json:
        """installation.* (created lists the repositories it was given)."""
        inst = self.s.installations[installation_id]
        held = [r for r in self.s.repos.values() if r.installation_id == installation_id]
        return {"installation": self.v.installation(inst),
                "repositories": [self.repo_ref(r) for r in held], "requester": None,
                "sender": self.v.user(self.s.user(sender) if sender else inst.account)}

    def installation_repositories(self, repo: Repo | None, action: str, *,
                                  installation_id: int, repositories: Iterable[str] = (),
                                  sender: str | None = None) -> Json:
        """installation_repositories.added/removed for `repositories` ("owner/name")."""
        inst = self.s.installations[installation_id]
        chosen = [self.repo_ref(self.s.repos[name.lower()]) for name in repositories]
        added, removed = (chosen, []) if action == "added" else ([], chosen)
        return {"installation": self.v.installation(inst),
                "repository_selection": inst.repository_selection,
                "repositories_added": added, "repositories_removed": removed, "requester": None,
                "sender": self.v.user(self.s.user(sender) if sender else inst.account)}

    def repo_ref(self, repo: Repo) -> Json:
        """The short repository entries of installation events."""
        return {"id": repo.id, "node_id": node_id("R_", repo.id), "name": repo.name,
                "full_name": repo.full_name, "private": repo.private}

    def ping(self, repo: Repo | None, action: str, *, hook_id: int = 1,
             url: str = "https://alignbot.example/webhook") -> Json:
        """ping, as an App's webhook receives it when the App is set up."""
        moment = iso(self.s.created_at)
        hook = {
            "type": "App", "id": hook_id, "name": "web", "active": True,
            "events": list(self.s.events), "app_id": self.s.app_id, "created_at": moment,
            "updated_at": moment,
            "config": {"content_type": "json", "insecure_ssl": "0", "url": url},
            "deliveries_url": f"{self.v.api}/app/hook/deliveries",
        }
        return {"zen": "Keep it logically awesome.", "hook_id": hook_id, "hook": hook}


def signed_delivery(event: str, payload: Json, secret: str) -> tuple[dict[str, str], bytes]:
    """Headers and body of a webhook delivery signed with `secret`, as GitHub sends them."""
    body = json.dumps(payload).encode()
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    legacy = hmac.new(secret.encode(), body, hashlib.sha1).hexdigest()
    headers = {
        "Content-Type": "application/json", "User-Agent": "GitHub-Hookshot/test",
        "X-GitHub-Event": event.partition(".")[0], "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-GitHub-Hook-ID": "1", "X-GitHub-Hook-Installation-Target-Type": "integration",
        "X-Hub-Signature-256": f"sha256={digest}", "X-Hub-Signature": f"sha1={legacy}",
    }
    return headers, body


class Link(bytes):
    """A symbolic link in a tree: its bytes are the target, as git stores a link's blob."""


def build_tarball(prefix: str, files: Mapping[str, bytes], sha: str, date: datetime) -> bytes:
    """A .tar.gz like GitHub's: pax header with the commit id, then `prefix/` and the files
    (a `Link` value becomes a symbolic link entry)."""
    buffer = io.BytesIO()
    folders = {"/".join(p.split("/")[:n]) for p in files for n in range(1, p.count("/") + 1)}
    mtime = date.timestamp()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT,
                      pax_headers={"comment": sha}) as tar:
        for folder in ["", *sorted(folders)]:
            info = tarfile.TarInfo(f"{prefix}/{folder}".rstrip("/") + "/")
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o775, mtime
            tar.addfile(info)
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(f"{prefix}/{path}")
            info.mode, info.mtime = 0o664, mtime
            if isinstance(data, Link):
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, data.decode(), 0o777
                tar.addfile(info)
                continue
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------
# Faults and the HTTP server


@dataclass
class Fault:
    """A canned failure for the next `remaining` requests whose path matches `pattern`, or (with
    `until`, a `time.monotonic()` deadline) for every matching request until then."""

    pattern: re.Pattern[str]
    method: str | None
    remaining: int | None
    make: Callable[[], Reply]
    until: float | None = None

    def active(self, method: str, path: str) -> bool:
        """Whether this fault answers `method path` now."""
        if self.remaining is not None and self.remaining <= 0:
            return False
        if self.until is not None and time.monotonic() >= self.until:
            return False
        return self.method in (None, method) and bool(self.pattern.search(path))


class _HttpServer(ThreadingHTTPServer):
    """The listening socket; each connection gets a thread (and keep-alive)."""

    daemon_threads = True
    github: GitHubServer


class _Handler(BaseHTTPRequestHandler):
    """Reads a request, asks the GitHubServer, writes the reply."""

    protocol_version = "HTTP/1.1"
    server: _HttpServer
    timeout = 60
    # Headers and body go out in separate writes; without this, Nagle's algorithm and the
    # client's delayed ACK stall every keep-alive response by ~40 ms.
    disable_nagle_algorithm = True

    def serve(self) -> None:
        """Answer any method."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {key.lower(): value for key, value in self.headers.items()}
        reply = self.server.github.dispatch(self.command, self.path, headers, raw)
        if reply.drop:  # a connection reset: RST instead of an answer
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        payload = reply.payload()
        self.send_response(reply.status)
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = serve

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet; the server keeps its own request log."""


class GitHubServer(GitHubState):
    """A fake api.github.com on 127.0.0.1 for end-to-end tests of the App over real HTTP.

    Point PyGithub at `.url`: `GithubIntegration(auth=Auth.AppAuth(server.app_id,
    server.private_key_pem), base_url=server.url)` and `Github(base_url=server.url, ...)`.
    Pass `seconds_between_requests=None, seconds_between_writes=None` in tests, or PyGithub
    sleeps 0.25 s per request and 1 s per write. Comments, issues and check runs made with an
    installation token belong to `{app_slug}[bot]` (type "Bot").

    Every response carries X-RateLimit-* headers and is logged in `requests` as
    (method, path, status) and in `exchanges` with both bodies (a reset connection is logged in
    `requests` with status 0 only). Faults queued with `fail_next`, `outage`,
    `secondary_rate_limit` and `primary_rate_limit` are served before routing and
    authentication, first queued first. Request bodies are checked against GitHub's
    OpenAPI request schemas (422 `Invalid request.` as GitHub answers) unless
    `validate_requests=False`.
    """

    def __init__(self, *, validate_requests: bool = True, **options: Any) -> None:
        super().__init__(**options)
        self._api = Api(self, validate_requests=validate_requests)
        self._faults: list[Fault] = []
        self._http: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> GitHubServer:
        """Listen on a free port of 127.0.0.1 and serve in a background thread."""
        self._http = _HttpServer(("127.0.0.1", 0), _Handler)
        self._http.github = self
        self._url = f"http://127.0.0.1:{self._http.server_address[1]}"
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,),
                                        daemon=True, name="github-test-server")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._http = self._thread = None

    def __enter__(self) -> GitHubServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    # -- webhooks ---------------------------------------------------------------------------

    def webhook(self, name: str, owner: str | None = None, repo: str | None = None,
                **refs: Any) -> Json:
        """The payload GitHub would deliver now for `name` ("pull_request.synchronize", ...).

        refs: `number` (pull_request.*, pull_request_review.*), `review_id`, `comment_id`
        (issue_comment.*), `check_run_id` (check_run.*), `installation_id` and `repositories`
        (installation*), `changes` (*.edited), `sender` (login; default the author).
        """
        with self.lock:
            return Webhooks(self, self._api.v).build(name, owner, repo, **refs)

    def delivery(self, name: str, payload: Json, secret: str) -> tuple[dict[str, str], bytes]:
        """Signed headers (X-GitHub-Event, X-GitHub-Delivery, X-Hub-Signature-256) and body."""
        headers, body = signed_delivery(name, payload, secret)
        headers["X-GitHub-Hook-Installation-Target-ID"] = str(self.app_id)
        return headers, body

    # -- faults -----------------------------------------------------------------------------

    def fail_next(
        self, pattern: str, count: int = 1, status: int = 502, *, method: str | None = None,
        body: Any = None,
    ) -> None:
        """The next `count` requests whose path matches the regex `pattern` get `status`."""
        self._queue(pattern, count, method, server_error(status, body))

    def outage(
        self, pattern: str, seconds: float, status: int = 503, *, method: str | None = None,
        reset: bool = False,
    ) -> None:
        """Every request whose path matches `pattern` fails for the next `seconds`: with
        `status` (a 5xx, as GitHub's front end answers during an incident), or with `reset`
        the connection is reset without an answer."""
        make = (lambda: Reply(drop=True)) if reset else server_error(status)
        with self.lock:
            self._faults.append(Fault(re.compile(pattern), method, None, make,
                                      until=time.monotonic() + seconds))

    def secondary_rate_limit(
        self, pattern: str, count: int = 1, *, retry_after: int = 60, status: int = 403,
        method: str | None = None,
    ) -> None:
        """The next `count` matching requests hit a secondary rate limit (`Retry-After`)."""
        def make() -> Reply:
            body = ApiError(status, SECONDARY_MESSAGE.format(rid=random_token("", 8)),
                            f"{DOCS}/overview/rate-limits-for-the-rest-api").body
            return Reply(status, body, {"Retry-After": str(retry_after)})

        self._queue(pattern, count, method, make)

    def primary_rate_limit(
        self, pattern: str, count: int = 1, *, reset_in: int = 60, status: int = 403,
        method: str | None = None,
    ) -> None:
        """The next `count` matching requests find the primary budget spent (403 or 429)."""
        def make() -> Reply:
            reset = int(time.time()) + reset_in
            message = f"API rate limit exceeded for installation ID {self._any_installation()}."
            headers = {"X-RateLimit-Limit": str(CORE_LIMIT), "X-RateLimit-Remaining": "0",
                       "X-RateLimit-Used": str(CORE_LIMIT), "X-RateLimit-Reset": str(reset),
                       "X-RateLimit-Resource": "core"}
            body = ApiError(status, message, f"{DOCS}/overview/rate-limits-for-the-rest-api")
            return Reply(status, body.body, headers)

        self._queue(pattern, count, method, make)

    def clear_faults(self) -> None:
        """Drop every queued fault."""
        with self.lock:
            self._faults.clear()

    def _any_installation(self) -> int:
        return min(self.installations, default=0)

    def _queue(
        self, pattern: str, count: int, method: str | None, make: Callable[[], Reply]
    ) -> None:
        with self.lock:
            self._faults.append(Fault(re.compile(pattern), method, count, make))

    def _take_fault(self, method: str, path: str) -> Reply | None:
        for fault in self._faults:
            if fault.active(method, path):
                if fault.remaining is not None:
                    fault.remaining -= 1
                return fault.make()
        return None

    # -- dispatch ---------------------------------------------------------------------------

    def dispatch(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> Reply:
        """Answer one HTTP request and record it."""
        with self.lock:
            path, _ = split_target(target)
            template: str | None = None
            reply = self._take_fault(method, path)
            if reply is None:
                reply, template = self._answer(method, target, headers, raw)
            resource = "search" if path.startswith("/search/") else "core"
            budget = self._api.rate_headers(headers, resource, spend=path != "/rate_limit")
            reply.headers = {**budget, **reply.headers}
            reply.headers.setdefault("X-GitHub-Request-Id", random_token("", 16).upper())
            reply.headers.setdefault("X-GitHub-Media-Type", "github.v3; format=json")
            self._record(method, path, template, raw, reply)
            return reply

    def _answer(
        self, method: str, target: str, headers: dict[str, str], raw: bytes
    ) -> tuple[Reply, str | None]:
        template = None
        try:
            call = self._api.route(method, target, headers)
            template = call.route.template
            return self._api.handle(call, raw), template
        except ApiError as error:
            return Reply(error.status, error.body, error.headers), template
        except Exception as error:  # a bug in this fake: report it, never hang the client
            self.errors.append(traceback.format_exc())
            return Reply(500, {"message": f"github test server bug: {error!r}"}), template

    def _record(
        self, method: str, path: str, template: str | None, raw: bytes, reply: Reply
    ) -> None:
        if reply.drop:
            self.requests.append((method, path, 0))
            return
        self.requests.append((method, path, reply.status))
        try:
            request = json.loads(raw) if raw.strip() else None
        except ValueError:
            request = raw
        self.exchanges.append(
            Exchange(method, path, template, reply.status, request,
                     reply.body if reply.raw is None else None, raw=reply.raw is not None)
        )
