"""Webhook payloads built from the server's state, and their signed delivery."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Iterable
from typing import Any

from .formats import iso, node_id
from .model import CheckRun, Json, Repo, User
from .state import GitHubState
from .views import Views


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

    def push(self, repo: Repo, action: str, *, before: str, branch: str | None = None,
             sender: str | None = None) -> Json:
        """push: the branch's (default: the default branch's) head after ``before``."""
        name = branch or repo.default_branch
        after = repo.branches[name]
        commit = repo.commits[after]
        author = {"name": commit.author.login, "email": f"{commit.author.login}@example.com",
                  "username": commit.author.login}
        head = {"id": after, "tree_id": after, "distinct": True, "message": commit.message,
                "timestamp": iso(commit.date),
                "url": f"{self.v.html(repo.full_name)}/commit/{after}", "author": author,
                "committer": author, "added": [], "removed": [], "modified": []}
        return {"ref": f"refs/heads/{name}", "before": before, "after": after,
                "created": before == "0" * 40, "deleted": False, "forced": False,
                "base_ref": None,
                "compare": f"{self.v.html(repo.full_name)}/compare/{before[:12]}...{after[:12]}",
                "commits": [head], "head_commit": head,
                "pusher": {"name": author["name"], "email": author["email"]},
                **self.common(repo, sender or commit.author.login)}

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
