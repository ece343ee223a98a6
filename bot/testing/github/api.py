"""The REST API: every family of handlers behind one route table."""

from __future__ import annotations

from .apps import AppsApi
from .check_runs import CheckRunsApi
from .issues import IssuesApi
from .oauth import OAuthApi
from .pulls import PullsApi
from .rate_limits import RateLimitsApi
from .repos import ReposApi
from .routes import Route
from .search import SearchApi


class Api(AppsApi, RateLimitsApi, ReposApi, PullsApi, IssuesApi, CheckRunsApi, SearchApi,
          OAuthApi):
    """The REST operations: each family's handlers, routed by OpenAPI path templates."""

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
            Route("GET", "/user", self.get_authenticated_user),
            Route("GET", "/login/oauth/authorize", self.authorize, "none"),
            Route("POST", "/login/oauth/access_token", self.access_token, "none"),
            Route("GET", repo, self.get_repo),
            Route("GET", f"{repo}/contents/{{path}}", self.get_content, permission="contents:read"),
            Route("GET", f"{repo}/tarball/{{ref}}", self.tarball, permission="contents:read",
                  ref_optional=True),
            Route("GET", "/_codeload/{owner}/{repo}/legacy.tar.gz/{ref}", self.codeload, "none"),
            Route("GET", "/_raw/{owner}/{repo}/{ref}/{path}", self.raw, "none"),
            Route("GET", f"{repo}/commits/{{ref}}", self.get_commit, permission="contents:read"),
            Route("GET", f"{repo}/compare/{{basehead}}", self.compare, permission="contents:read"),
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
