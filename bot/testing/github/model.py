"""What the test server stores: accounts, repositories, pull requests, issues,
comments, check runs, tokens and the request log."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

Json = dict[str, Any]


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
class CommentReaction:
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
    reactions: list[CommentReaction] = field(default_factory=list)


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
class UserToken:
    """A user access token of the App (``ghu_``), from its web flow: it acts as the user,
    within what the App's installations hold."""

    value: str
    user: User
    expires_at: datetime

    @property
    def expired(self) -> bool:
        return self.expires_at <= datetime.now(UTC)


@dataclass
class OAuthCode:
    """A code the web flow handed to the App's callback: good once, for ten minutes."""

    user: User
    redirect_uri: str
    expires_at: datetime


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
