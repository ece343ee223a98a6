"""Everything the fake GitHub knows, with the methods tests seed it and read it back by."""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from .formats import as_bytes, blob_sha, count_patch, random_token, utcnow
from .model import (
    CheckRun,
    Comment,
    Commit,
    Exchange,
    Installation,
    Issue,
    Json,
    OAuthCode,
    Pull,
    Repo,
    Review,
    Token,
    User,
    UserToken,
)

ROLE_PERMISSION = {
    "admin": "admin",
    "maintain": "write",
    "write": "write",
    "triage": "read",
    "read": "read",
    "none": "none",
}
LEVELS = {"none": 0, "read": 1, "write": 2, "admin": 3}
DEFAULT_PERMISSIONS = {
    "checks": "write",
    "contents": "read",
    "issues": "write",
    "metadata": "read",
    "pull_requests": "write",
}
DEFAULT_EVENTS = ("check_run", "issue_comment", "pull_request", "pull_request_review")


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
        self.client_secret = random_token("", 40)
        self.callback_urls: list[str] = []  # the App's callback URLs (empty: any is taken)
        self.signed_in: User | None = None  # who the browser is signed in to GitHub as
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
        self.moved: dict[str, int] = {}  # a renamed or transferred repository's old names
        self.issues: dict[tuple[int, int], Issue] = {}
        self.comments: dict[int, Comment] = {}
        self.check_runs: dict[int, CheckRun] = {}
        self.tokens: dict[str, Token] = {}
        self.user_tokens: dict[str, UserToken] = {}
        self.oauth_codes: dict[str, OAuthCode] = {}
        self.downloads: dict[str, tuple[int, str, datetime]] = {}
        self.requests: list[tuple[str, str, int]] = []
        self.exchanges: list[Exchange] = []
        self.errors: list[str] = []
        self._url: str | None = None
        # When things happen (comments, pushes, check runs, issues): a test may set its own
        # clock. Tokens and download links expire on the real one, as clients check them.
        self.clock: Callable[[], datetime] = utcnow

    def now(self) -> datetime:
        """The server's time, to the second, as GitHub reports it."""
        return self.clock().astimezone(UTC).replace(microsecond=0)

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
            installation = Installation(installation_id, owner, self.now(), repository_selection)
            self.installations[installation_id] = installation
            return installation

    def remove_installation(self, installation_id: int) -> None:
        """Uninstall the App from an account: GitHub forgets the installation (its token
        requests answer 404), its repositories stay but are no longer the App's, and the
        tokens it issued stop working."""
        with self.lock:
            del self.installations[installation_id]
            for repo in self.repos.values():
                if repo.installation_id == installation_id:
                    repo.installation_id = None
            issued = [v for v, t in self.tokens.items() if t.installation_id == installation_id]
            for value in issued:
                del self.tokens[value]

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
                default_branch, private, self.now() - timedelta(days=7),
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
        repo.commits[sha] = Commit(sha, message, author, parents, self.now())

    def add_commit(
        self, owner: str, repo: str, sha: str, files: Mapping[str, bytes | str], *,
        branch: str | None = None, message: str | None = None,
    ) -> None:
        """A commit on top of `branch` (default: the default branch), which moves to it: the
        base branch of a pull request moving on."""
        with self.lock:
            target = self.repo(owner, repo)
            name = branch or target.default_branch
            parent = target.branches.get(name)
            target.trees[sha] = {path: as_bytes(data) for path, data in files.items()}
            target.commits[sha] = Commit(sha, message or f"Commit {sha[:7]}", target.owner,
                                         [parent] if parent else [], self.now())
            target.branches[name] = sha

    def move_repo(
        self, owner: str, name: str, new_owner: str | None = None, new_name: str | None = None,
        installation_id: int | None = None,
    ) -> Repo:
        """Rename a repository, or transfer it to ``new_owner`` (whose installation, if the
        App has one there, is ``installation_id``; a transfer leaves the old one). As on
        GitHub, the old name goes on answering: a redirect to the repository's new place."""
        with self.lock:
            repo = self.repos.pop(f"{owner}/{name}".lower())
            self.moved[repo.full_name.lower()] = repo.id
            if new_owner is not None and new_owner.lower() != repo.owner.login.lower():
                repo.owner = self.user(new_owner, repo.owner.type)
                repo.installation_id = installation_id
            repo.name = new_name or repo.name
            self.repos[repo.full_name.lower()] = repo
            self.moved.pop(repo.full_name.lower(), None)
            return repo

    def repo_by_id(self, repo_id: int) -> Repo | None:
        """The repository with this id, wherever it is now."""
        return next((r for r in self.repos.values() if r.id == repo_id), None)

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
            created = created_at or self.now()
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
            repo.commits[head_sha] = Commit(head_sha, "Update", author, [parent], self.now())

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
            issue.updated_at = updated_at or self.now()
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
                pull.merged_at = self.now()
            if "state" in changes:
                issue.state = changes["state"]
                issue.closed_at = self.now() if issue.state == "closed" else None
            issue.updated_at = changes.get("updated_at", self.now())
            return issue

    def sign_in(self, login: str | None) -> None:
        """Who the browser is signed in to GitHub as (None: no one): the web flow's
        ``/login/oauth/authorize`` approves the App for them at once."""
        with self.lock:
            self.signed_in = None if login is None else self.user(login)

    def push_branch(self, owner: str, repo: str, sha: str, files: Mapping[str, bytes | str],
                    *, branch: str | None = None, message: str = "Update") -> str:
        """A new commit on ``branch`` (default: the default branch) with these files, as a
        push makes it; returns the commit it replaced (the push event's ``before``)."""
        with self.lock:
            target = self.repo(owner, repo)
            name = branch or target.default_branch
            before = target.branches.get(name, "0" * 40)
            self._add_commit(target, sha, files, target.owner, message)
            if before in target.commits:
                target.commits[sha].parents = [before]
            target.branches[name] = sha
            return before

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
            moment = created_at or self.now()
            association = author_association or self.association(issue.repo, author)
            comment = Comment(
                self.next_id(), issue.repo, number, body, author, moment, moment, association
            )
            self.comments[comment.id] = comment
            issue.updated_at = max(issue.updated_at, moment)
            return comment

    def edit_comment(self, comment_id: int, body: str) -> Json:
        """A person edits a comment (now, by the server's clock); returns the ``changes`` of
        its ``issue_comment.edited`` webhook."""
        with self.lock:
            comment = self.comments[comment_id]
            before, comment.body, comment.updated_at = comment.body, body, self.now()
            return {"body": {"from": before}}

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
            moment = submitted_at or self.now()
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
