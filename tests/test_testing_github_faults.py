"""The GitHub test server's injected faults, rate limits and request log
(bot/testing/github/faults.py, rate_limits.py, server.py)."""

from __future__ import annotations

import time

import httpx
import pytest
from github import Auth, Github, GithubException, GithubRetry
from github.GithubException import RateLimitExceededException
from testing_github import (
    NAME,
    OWNER,
    fast,
    token_for,
)

from alignbot.bot.testing.github import GitHubServer


def test_server_errors_are_injected(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    server.fail_next(r"/pulls/7$", count=2, status=503)
    for _ in range(2):
        with pytest.raises(GithubException) as caught:
            repo.get_pull(7)
        assert caught.value.status == 503
    assert repo.get_pull(7).number == 7
    assert [s for m, p, s in server.requests if p.endswith("/pulls/7")] == [503, 503, 200]


def test_pygithub_retries_through_a_bad_gateway(server: GitHubServer) -> None:
    retry = GithubRetry(total=3, backoff_factor=0)
    github = Github(base_url=server.url, auth=Auth.Token(token_for(server)), **fast(retry=retry))
    server.fail_next(r"/repos/octo-org/ops-lib$", status=502, method="GET")
    assert github.get_repo(f"{OWNER}/{NAME}").name == NAME
    assert server.count("GET", r"/repos/octo-org/ops-lib$") == 2


@pytest.mark.slow
def test_an_outage_fails_every_matching_request_until_it_ends(server: GitHubServer) -> None:
    headers = {"Authorization": f"token {token_for(server)}"}
    pull, repo = f"{server.url}/repos/{OWNER}/{NAME}/pulls/7", f"{server.url}/repos/{OWNER}/{NAME}"
    # 3 s: room for five requests on a busy machine (the tests run in parallel)
    server.outage(r"/pulls/7$", seconds=3, status=502)
    started = time.monotonic()
    statuses = [httpx.get(pull, headers=headers).status_code for _ in range(3)]
    assert statuses == [502, 502, 502] and time.monotonic() - started < 2
    assert httpx.get(repo, headers=headers).status_code == 200  # other paths are unaffected
    body = httpx.get(pull, headers=headers).json()
    assert body == {"message": "Server Error", "status": "502"}
    time.sleep(max(0.0, started + 3.1 - time.monotonic()))
    assert httpx.get(pull, headers=headers).status_code == 200  # the outage is over

    server.outage(r"/pulls/7$", seconds=0.6, method="POST")  # another method: unaffected
    assert httpx.get(pull, headers=headers).status_code == 200


def test_an_outage_can_reset_connections(server: GitHubServer) -> None:
    headers = {"Authorization": f"token {token_for(server)}"}
    pull = f"{server.url}/repos/{OWNER}/{NAME}/pulls/7"
    server.outage(r"/pulls/7$", seconds=0.5, reset=True)
    with pytest.raises(httpx.TransportError):
        httpx.get(pull, headers=headers)
    assert ("GET", f"/repos/{OWNER}/{NAME}/pulls/7", 0) in server.requests
    time.sleep(0.6)
    assert httpx.get(pull, headers=headers).status_code == 200


def test_pygithub_retries_through_an_outage_shorter_than_its_retries(
        server: GitHubServer) -> None:
    retry = GithubRetry(total=8, backoff_factor=0.1)
    github = Github(base_url=server.url, auth=Auth.Token(token_for(server)), **fast(retry=retry))
    server.outage(r"/repos/octo-org/ops-lib$", seconds=0.5, status=503)
    assert github.get_repo(f"{OWNER}/{NAME}").name == NAME
    statuses = [s for _, p, s in server.requests if p == "/repos/octo-org/ops-lib"]
    assert statuses[-1] == 200 and set(statuses[:-1]) == {503} and len(statuses) > 2


def test_secondary_rate_limit(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    server.secondary_rate_limit(r"/issues/7/comments$", retry_after=7, method="POST")
    with pytest.raises(GithubException) as caught:
        repo.get_pull(7).create_issue_comment("hi")
    assert caught.value.status == 403 and (caught.value.headers or {})["retry-after"] == "7"
    assert "secondary rate limit" in caught.value.data["message"]
    retry = GithubRetry(total=2, backoff_factor=0, secondary_rate_wait=0)
    patient = Github(base_url=server.url, auth=Auth.Token(token_for(server)), **fast(retry=retry))
    server.secondary_rate_limit(r"/issues/7/comments$", retry_after=0, method="POST")
    patient.get_repo(f"{OWNER}/{NAME}").get_pull(7).create_issue_comment("hi")
    assert len(server.comments_on(OWNER, NAME, 7)) == 1


def test_primary_rate_limit(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    server.primary_rate_limit(r"/pulls$", reset_in=120)
    with pytest.raises(RateLimitExceededException) as caught:
        list(repo.get_pulls())
    headers = caught.value.headers or {}
    assert headers["x-ratelimit-remaining"] == "0"
    assert int(headers["x-ratelimit-reset"]) >= int(time.time()) + 100
    server.primary_rate_limit(r"/pulls$", status=429)
    reply = httpx.get(f"{server.url}/repos/{OWNER}/{NAME}/pulls")
    assert reply.status_code == 429 and reply.json()["message"].startswith("API rate limit")
    assert len(list(repo.get_pulls())) == 1


def test_every_response_has_rate_limit_headers(server: GitHubServer) -> None:
    headers = {"Authorization": f"token {token_for(server)}"}
    paths = ["/repos/octo-org/ops-lib", "/nowhere", "/repos/octo-org/ops-lib/pulls/999"]
    replies = [httpx.get(server.url + path, headers=headers) for path in paths]
    assert [r.status_code for r in replies] == [200, 404, 404]
    used = [int(r.headers["X-RateLimit-Used"]) for r in replies]
    assert used == [1, 2, 3] and replies[0].headers["X-RateLimit-Limit"] == "5000"
    limits = httpx.get(f"{server.url}/rate_limit", headers=headers).json()
    assert limits["resources"]["core"]["used"] == 3
