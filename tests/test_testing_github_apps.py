"""The GitHub test server's App endpoints: JWTs, installations, tokens and their scope
(bot/testing/github/apps.py, handling.py)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from github import Auth, Github, GithubException, GithubIntegration
from github.GithubException import (
    BadCredentialsException,
    UnknownObjectException,
)
from testing_github import (
    BASE,
    BASE_TREE,
    HEAD,
    HEAD2,
    INSTALLATION,
    NAME,
    OWNER,
    assert_documented,
    fast,
    signed_jwt,
    stranger_key,
    token_for,
)

from alignbot.bot.testing.github import GitHubServer


def test_app_installations_and_tokens(server: GitHubServer, integration: GithubIntegration) -> None:
    app = integration.get_app()
    assert (app.id, app.slug) == (server.app_id, "alignbot")
    assert [i.id for i in integration.get_installations()] == [INSTALLATION]
    assert integration.get_app_installation(INSTALLATION).id == INSTALLATION
    assert integration.get_repo_installation(OWNER, NAME).id == INSTALLATION
    access = integration.get_access_token(INSTALLATION)
    assert access.token.startswith("ghs_") and len(access.token) == 40
    lifetime = access.expires_at - datetime.now(UTC)
    assert timedelta(minutes=59) < lifetime <= timedelta(hours=1)
    assert server.tokens[access.token].installation_id == INSTALLATION


def test_jwt_is_verified(server: GitHubServer) -> None:
    url = f"{server.url}/app"
    stranger = stranger_key()
    now = int(time.time())
    cases = {
        "": "A JSON web token could not be decoded",
        signed_jwt(stranger, iss=str(server.app_id)): "A JSON web token could not be decoded",
        signed_jwt(server.private_key, iss="999"): "A JSON web token could not be decoded",
        signed_jwt(server.private_key, iss=str(server.app_id), iat=now - 900, exp=now - 120):
            "'Expiration time' claim ('exp') must be a numeric value",
        signed_jwt(server.private_key, iss=str(server.app_id), exp=now + 3600):
            "'Expiration time' claim ('exp') is too far in the future",
        token_for(server): "A JSON web token could not be decoded",
    }
    for credential, message in cases.items():
        headers = {"Authorization": f"Bearer {credential}"} if credential else {}
        reply = httpx.get(url, headers=headers)
        assert reply.status_code == 401
        assert reply.json()["message"].startswith(message)
    client_id_jwt = signed_jwt(server.private_key, iss=server.client_id)
    assert httpx.get(url, headers={"Authorization": f"Bearer {client_id_jwt}"}).is_success


def test_wrong_key_raises_bad_credentials(server: GitHubServer) -> None:
    pem = stranger_key().private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()).decode()
    auth = Auth.AppAuth(server.app_id, pem)
    with pytest.raises(GithubException) as caught:
        GithubIntegration(auth=auth, base_url=server.url, **fast()).get_app()
    assert caught.value.status == 401


def test_expired_tokens_are_rejected(server: GitHubServer) -> None:
    token = token_for(server)
    github = Github(base_url=server.url, auth=Auth.Token(token), **fast())
    assert github.get_repo(f"{OWNER}/{NAME}").id
    assert server.expire_tokens() == 1
    with pytest.raises(BadCredentialsException):
        github.get_repo(f"{OWNER}/{NAME}")
    fresh = Github(base_url=server.url, auth=Auth.Token(token_for(server)), **fast())
    assert fresh.get_repo(f"{OWNER}/{NAME}").name == NAME


def test_short_token_lifetime_makes_pygithub_refresh() -> None:
    with GitHubServer(token_lifetime=timedelta(seconds=10)) as server:
        server.add_repo(OWNER, NAME, INSTALLATION, {BASE: BASE_TREE})
        auth = Auth.AppAuth(server.app_id, server.private_key_pem)
        gh = GithubIntegration(auth=auth, base_url=server.url, **fast())
        repo = gh.get_github_for_installation(INSTALLATION).get_repo(f"{OWNER}/{NAME}")
        repo.get_contents("README.md")
        # PyGithub renews a token due within 20 s: every call asks for a new one.
        assert server.count("POST", "/access_tokens$") == 2
    assert_documented(server)


def test_token_scoping_and_permissions(server: GitHubServer) -> None:
    server.add_repo(OWNER, "other", INSTALLATION, {BASE: BASE_TREE}, private=True)
    narrow = Github(base_url=server.url, auth=Auth.Token(token_for(server, repositories=[NAME])),
                    **fast())
    with pytest.raises(UnknownObjectException):
        narrow.get_repo(f"{OWNER}/other")
    read_only = token_for(server, permissions={"checks": "read"})
    reply = httpx.post(f"{server.url}/repos/{OWNER}/{NAME}/check-runs",
                       headers={"Authorization": f"token {read_only}"},
                       json={"name": "alignbot", "head_sha": HEAD})
    assert (reply.status_code, reply.json()["message"]) == (
        403, "Resource not accessible by integration")
    app_id = str(server.app_id)
    too_much = httpx.post(
        f"{server.url}/app/installations/{INSTALLATION}/access_tokens",
        headers={"Authorization": f"Bearer {signed_jwt(server.private_key, iss=app_id)}"},
        json={"permissions": {"administration": "write"}},
    )
    assert too_much.status_code == 422


def test_installation_repositories_paginate(server: GitHubServer, integration: GithubIntegration,
                                            gh: Github) -> None:
    for index in range(4):
        server.add_repo(OWNER, f"extra-{index}", INSTALLATION, {BASE: BASE_TREE})
    server.add_repo("elsewhere", "not-installed", None, {BASE: BASE_TREE})
    installation = integration.get_app_installation(INSTALLATION)
    names = [repo.name for repo in installation.get_repos()]
    assert names == [NAME] + [f"extra-{i}" for i in range(4)]
    reply = httpx.get(f"{server.url}/installation/repositories?per_page=2",
                      headers={"Authorization": f"token {token_for(server)}"})
    assert reply.json()["total_count"] == 5 and len(reply.json()["repositories"]) == 2
    assert 'rel="next"' in reply.headers["Link"] and 'rel="last"' in reply.headers["Link"]


def test_a_removed_installation_is_unknown_and_its_tokens_stop(
        server: GitHubServer, integration: GithubIntegration) -> None:
    token = token_for(server)
    server.remove_installation(INSTALLATION)
    headers = {"Authorization": f"token {token}"}
    assert httpx.get(f"{server.url}/repos/{OWNER}/{NAME}/pulls/7",
                     headers=headers).status_code == 401  # Bad credentials
    with pytest.raises(UnknownObjectException):  # GitHub's answer to the token request
        integration.get_access_token(INSTALLATION)
    with pytest.raises(UnknownObjectException):
        integration.get_repo_installation(OWNER, NAME)
    assert server.repo(OWNER, NAME).installation_id is None
    assert integration.get_installations().totalCount == 0


def test_the_clock_dates_what_happens(server: GitHubServer, gh: Github) -> None:
    moment = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    server.clock = lambda: moment
    made = gh.get_repo(f"{OWNER}/{NAME}").get_issue(7).create_comment("hello")
    assert made.created_at == moment.replace(microsecond=0)
    server.push(OWNER, NAME, 7, HEAD2)
    assert server.pull(OWNER, NAME, 7).updated_at == moment.replace(microsecond=0)
    assert server.tokens and all(not t.expired for t in server.tokens.values())  # real time
