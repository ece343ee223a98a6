"""State rendered as GitHub's JSON, every API URL pointing back at the server."""

from __future__ import annotations

import hashlib
from urllib.parse import quote

from .formats import blob_sha, iso, node_id, wrap_base64
from .model import (
    CheckRun,
    Comment,
    CommentReaction,
    Commit,
    Installation,
    Issue,
    Json,
    Repo,
    Review,
    User,
)
from .state import LEVELS, ROLE_PERMISSION, GitHubState

REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")

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

    def private_user(self, user: User) -> Json:
        """A private-user object (GET /user: the user of the token)."""
        extra = {"private_gists": 0, "total_private_repos": 0, "owned_private_repos": 0,
                 "disk_usage": 0, "collaborators": 0, "two_factor_authentication": True}
        return {**self.public_user(user), **extra}

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

    def reactions(self, url: str, found: list[CommentReaction]) -> Json:
        """A reaction rollup."""
        counts = {content: sum(1 for r in found if r.content == content) for content in REACTIONS}
        return {"url": url, "total_count": len(found), **counts}

    def reaction(self, reaction: CommentReaction) -> Json:
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

    def comparison(self, repo: Repo, base: Commit, merge_base: Commit, commits: list[Commit],
                   status: str, behind: int) -> Json:
        """What the compare API answers (without `files`)."""
        api = self.repo_api(repo)
        basehead = f"{base.sha}...{commits[-1].sha if commits else base.sha}"
        return {
            "url": f"{api}/compare/{basehead}",
            "html_url": self.html(repo.full_name, "compare", basehead),
            "permalink_url": self.html(repo.full_name, "compare", basehead),
            "diff_url": self.html(repo.full_name, "compare", basehead + ".diff"),
            "patch_url": self.html(repo.full_name, "compare", basehead + ".patch"),
            "base_commit": self.commit(repo, base),
            "merge_base_commit": self.commit(repo, merge_base),
            "status": status, "ahead_by": len(commits), "behind_by": behind,
            "total_commits": len(commits), "commits": [self.commit(repo, c) for c in commits],
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

    def symlink(self, repo: Repo, ref: str, sha: str, path: str, link: bytes) -> Json:
        """A content-symlink object: the link itself, its blob being the target path."""
        entry = self.content(repo, ref, sha, path, link)
        for key in ("content", "encoding"):
            entry.pop(key)
        return {**entry, "type": "symlink", "target": link.decode(errors="replace")}

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
