"""Pull requests: lists, details, files, reviews, commits and requested reviewers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .handling import ApiBase
from .model import Issue
from .routes import Call, Reply, pick


class PullsApi(ApiBase):
    """GET /repos/{owner}/{repo}/pulls and what hangs off one pull request."""

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
