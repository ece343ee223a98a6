"""The GitHub test server's issues, comments and reactions (bot/testing/github/issues.py)."""

from __future__ import annotations

import httpx
import pytest
from github import Github, GithubException
from testing_github import (
    NAME,
    OWNER,
    token_for,
)

from alignbot.bot.testing.github import GitHubServer


def test_comments_reactions_and_bot_login(server: GitHubServer, gh: Github) -> None:
    server.set_permission(OWNER, NAME, "maria", "write")
    human = server.add_comment(OWNER, NAME, 7, "/alignbot recheck", "maria")
    pr = gh.get_repo(f"{OWNER}/{NAME}").get_pull(7)
    mine = pr.create_issue_comment("<!-- alignbot:report -->\nall aligned")
    assert (mine.user.login, mine.user.type) == ("alignbot[bot]", "Bot")
    assert mine.raw_data["performed_via_github_app"]["slug"] == "alignbot"
    mine.edit("<!-- alignbot:report -->\n1 mismatch")
    comments = list(pr.get_issue_comments())
    assert [c.id for c in comments] == [human.id, mine.id]
    assert comments[0].raw_data["author_association"] == "MEMBER"
    fetched = gh.get_repo(f"{OWNER}/{NAME}").get_issue(7).get_comment(mine.id)
    assert fetched.body.endswith("1 mismatch")
    assert comments[0].create_reaction("eyes").content == "eyes"
    url = f"{server.url}/repos/{OWNER}/{NAME}/issues/comments/{human.id}/reactions"
    again = httpx.post(url, json={"content": "eyes"},
                       headers={"Authorization": f"token {token_for(server)}"})
    assert again.status_code == 200  # the same reaction twice is not a new one
    assert server.comments[human.id].reactions[0].user.login == "alignbot[bot]"


def test_comment_pagination(server: GitHubServer, gh: Github) -> None:
    for index in range(65):
        server.add_comment(OWNER, NAME, 7, f"comment {index}", "alice")
    pr = gh.get_repo(f"{OWNER}/{NAME}").get_pull(7)
    server.clear_log()
    assert len(list(pr.get_issue_comments())) == 65
    assert server.count("GET", "/issues/7/comments$") == 3


def test_comment_length_limit(server: GitHubServer, gh: Github) -> None:
    pr = gh.get_repo(f"{OWNER}/{NAME}").get_pull(7)
    comment = pr.create_issue_comment("x" * 65536)
    with pytest.raises(GithubException) as created:
        pr.create_issue_comment("x" * 65537)
    assert created.value.status == 422
    assert created.value.data["errors"][0]["message"].startswith("Body is too long")
    with pytest.raises(GithubException) as edited:
        comment.edit("é" * 65537)
    assert edited.value.data["errors"][0] == {
        "resource": "IssueComment", "code": "custom", "field": "body",
        "message": "body is too long (maximum is 65536 characters)"}


def test_issues(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    issue = repo.create_issue("torch.add disagrees with itself", body="repro", labels=["upstream"])
    assert issue.number == 8 and issue.user.login == "alignbot[bot]"
    assert repo.get_issue(8).labels[0].name == "upstream"
    assert repo.get_issue(7).pull_request is not None
    assert [i.title for i in server.created_issues(OWNER, NAME)] == [issue.title]
    with pytest.raises(GithubException) as caught:
        repo.create_issue("too long", body="y" * 70000)
    assert caught.value.status == 422
