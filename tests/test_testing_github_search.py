"""The GitHub test server's collaborator permissions and issue search
(bot/testing/github/repos.py, search.py)."""

from __future__ import annotations

import httpx
import pytest
from github import Github, GithubException
from github.GithubException import UnknownObjectException
from testing_github import (
    BASE,
    BASE_TREE,
    HEAD,
    NAME,
    OWNER,
)

from alignbot.bot.testing.github import GitHubServer


def test_collaborator_permissions(server: GitHubServer, gh: Github) -> None:
    expected = {"admin": "admin", "maintain": "write", "write": "write", "triage": "read",
                "read": "read"}
    for role in expected:
        server.set_permission(OWNER, NAME, f"user-{role}", role)
    server.user("passer-by")
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    for role, permission in expected.items():
        assert repo.get_collaborator_permission(f"user-{role}") == permission
        assert repo.get_collaborator_role_name(f"user-{role}") == role
    assert repo.get_collaborator_permission("passer-by") == "read"  # public repository
    assert gh.get_user("passer-by").login == "passer-by"
    with pytest.raises(UnknownObjectException):
        repo.get_collaborator_permission("nobody-at-all")


def test_search_open_ready_pull_requests(server: GitHubServer, gh: Github) -> None:
    for number in range(10, 50):
        server.add_pull(OWNER, NAME, number, f"{number:040x}", BASE, draft=number % 4 == 0)
    server.update_pull(OWNER, NAME, 11, state="closed")
    server.add_repo("other-org", "elsewhere", 99, {BASE: BASE_TREE})
    server.add_pull("other-org", "elsewhere", 1, HEAD, BASE)
    found = gh.search_issues(f"repo:{OWNER}/{NAME} is:pr is:open draft:false")
    numbers = sorted(issue.number for issue in found)
    assert numbers == [7] + [n for n in range(10, 50) if n % 4 and n != 11]
    assert found.totalCount == len(numbers)
    stale = gh.search_issues("", repo=f"{OWNER}/{NAME}", type="pr", state="open",
                             updated="<2000-01-01")
    assert stale.totalCount == 0
    page = httpx.get(f"{server.url}/search/issues",
                     params={"q": f"repo:{OWNER}/{NAME} is:pr", "per_page": 10, "page": 2})
    assert len(page.json()["items"]) == 10 and 'rel="prev"' in page.headers["Link"]
    assert page.headers["X-RateLimit-Resource"] == "search"
    with pytest.raises(GithubException) as unsupported:
        list(gh.search_issues("repo:octo-org/ops-lib linked:issue"))
    assert unsupported.value.status == 422
