"""The GitHub test server's pull requests (bot/testing/github/pulls.py)."""

from __future__ import annotations

from datetime import timedelta

import httpx
from github import Github
from testing_github import (
    BASE,
    HEAD,
    HEAD2,
    NAME,
    OWNER,
    file_text,
)

from alignbot.bot.testing.github import GitHubServer


def test_pull_request_fields(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    pr = repo.get_pull(7)
    assert (pr.title, pr.user.login, pr.draft, pr.state) == ("Speed up add", "alice", False,
                                                            "open")
    assert (pr.head.sha, pr.base.sha, pr.base.ref) == (HEAD, BASE, "main")
    assert pr.head.repo.full_name == f"{OWNER}/{NAME}"
    assert (pr.additions, pr.deletions, pr.changed_files, pr.commits) == (1, 2, 1, 1)
    assert pr.raw_data["author_association"] == "CONTRIBUTOR"
    assert [c.sha for c in pr.get_commits()] == [HEAD]


def test_forks_and_deleted_forks(server: GitHubServer, gh: Github) -> None:
    server.add_pull(OWNER, NAME, 8, "e" * 40, BASE, user="bob", head_repo="bob/ops-lib",
                    author_association="FIRST_TIME_CONTRIBUTOR")
    server.add_pull(OWNER, NAME, 9, "f" * 40, BASE, user="carol", head_repo=None)
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    fork = repo.get_pull(8)
    assert fork.head.repo.full_name == "bob/ops-lib" and fork.head.repo.fork
    assert repo.get_pull(9).head.repo is None
    assert file_text(repo, "ops/add.py", "e" * 40).startswith(b"def add")
    run = repo.create_check_run("alignbot", "e" * 40)
    assert run.pull_requests == []  # as on GitHub: fork pull requests are not listed


def test_pull_files_are_paginated(server: GitHubServer, gh: Github) -> None:
    files = [{"filename": f"ops/op_{i:03}.py", "status": "added", "patch": "@@ +1 @@\n+x"}
             for i in range(75)]
    server.push(OWNER, NAME, 7, HEAD2, files)
    pr = gh.get_repo(f"{OWNER}/{NAME}").get_pull(7)
    server.clear_log()
    assert [f.filename for f in pr.get_files()] == [f["filename"] for f in files]
    assert server.count("GET", "/pulls/7/files$") == 3  # 30 + 30 + 15
    page = httpx.get(f"{server.url}/repos/{OWNER}/{NAME}/pulls/7/files?per_page=100&page=1")
    assert len(page.json()) == 75 and "Link" not in page.headers


def test_push_moves_the_head(server: GitHubServer, gh: Github) -> None:
    before = server.pull(OWNER, NAME, 7).updated_at - timedelta(days=3)
    server.update_pull(OWNER, NAME, 7, updated_at=before)
    server.push(OWNER, NAME, 7, HEAD2, [{"filename": "ops/mul.py", "status": "added"}])
    pr = gh.get_repo(f"{OWNER}/{NAME}").get_pull(7)
    assert pr.head.sha == HEAD2 and pr.updated_at is not None and pr.updated_at > before
    assert [c.sha for c in pr.get_commits()] == [HEAD, HEAD2]
    assert [f.filename for f in pr.get_files()] == ["ops/mul.py"]
    assert file_text(gh.get_repo(f"{OWNER}/{NAME}"), ".alignbot.yml", HEAD2)


def test_reviews_and_requested_reviewers(server: GitHubServer, gh: Github) -> None:
    server.set_permission(OWNER, NAME, "maria", "maintain")
    server.add_review(OWNER, NAME, 7, "maria", "CHANGES_REQUESTED", "please add a test")
    server.request_reviewers(OWNER, NAME, 7, users=["dave"], teams=["core"])
    pr = gh.get_repo(f"{OWNER}/{NAME}").get_pull(7)
    reviews = list(pr.get_reviews())
    assert [(r.user.login, r.state, r.commit_id) for r in reviews] == [
        ("maria", "CHANGES_REQUESTED", HEAD)]
    users, teams = pr.get_review_requests()
    assert [u.login for u in users] == ["dave"] and [t.slug for t in teams] == ["core"]


def test_pull_list_filters_and_pages(server: GitHubServer, gh: Github) -> None:
    for number in range(10, 45):
        server.add_pull(OWNER, NAME, number, f"{number:040x}", BASE, draft=number % 5 == 0)
    server.update_pull(OWNER, NAME, 10, state="closed", merged=True)
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    open_numbers = [p.number for p in repo.get_pulls(state="open")]
    assert len(open_numbers) == 35 and open_numbers[0] == 44 and 10 not in open_numbers
    assert [p.number for p in repo.get_pulls(state="closed")] == [10]
    assert repo.get_pull(10).merged
    oldest = repo.get_pulls(state="all", sort="created", direction="asc")[0]
    assert oldest.number == 7
