"""The GitHub test server's webhook payloads against GitHub's fixtures and schemas, and their
signed delivery (bot/testing/github/webhooks.py; fixtures in tests/fixtures/github/)."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest
from github import Auth, Github
from testing_github import (
    HEAD,
    HEAD2,
    INSTALLATION,
    NAME,
    OWNER,
    WEBHOOKS,
    explain,
    fast,
    token_for,
)

from alignbot.bot.testing.github import GitHubServer, OpenApiSubset, load_subset

# Where the real example payloads differ from GitHub's own webhook schemas: (path, message start).
KNOWN_DEVIATIONS: dict[str, set[tuple[str, str]]] = {
    "check_run.rerequested": {
        ("check_run", "'node_id' is a required"),
        ("check_run", "'details_url' is a required"),
        ("repository", "'disabled' is a required"),
        ("check_run/app", "{"),
        ("check_run/check_suite/app", "{"),
    },
    "installation.created": {
        ("installation", "'app_slug' is a required"),
        ("installation/created_at", "1557933591 is not of type 'string'"),
        ("installation/updated_at", "1557933591 is not of type 'string'"),
    },
    "installation_repositories.added": {
        ("", "'requester' is a required"),
        ("installation", "'app_slug' is a required"),
        ("installation", "'suspended_by' is a required"),
        ("installation", "'suspended_at' is a required"),
        ("installation/created_at", "1557933591 is not of type 'string'"),
        ("installation/updated_at", "1557933591 is not of type 'string'"),
    },
    "pull_request.synchronize": {
        ("pull_request/base/repo", "'has_discussions' is a required"),
        ("pull_request/head/repo", "'has_discussions' is a required"),
    },
    "pull_request_review.submitted": {
        ("pull_request/base/repo", "'has_discussions' is a required"),
        ("pull_request/head/repo", "{"),
    },
}


EXPECTED_WEBHOOKS = [
    "check_run.rerequested", "installation.created", "installation_repositories.added",
    "issue_comment.created", "issue_comment.edited", "ping", "pull_request.closed",
    "pull_request.edited", "pull_request.opened", "pull_request.ready_for_review",
    "pull_request.reopened", "pull_request.synchronize", "pull_request_review.submitted",
]


def deviations(subset: OpenApiSubset, name: str, payload: Any) -> set[tuple[str, str]]:
    """The schema violations of one webhook fixture, as (path, message start) pairs."""
    schema = subset.webhook_schema(name.replace("_", "-").replace(".", "-"))
    found = set()
    for error in subset.errors(schema, payload):
        path = "/".join(map(str, error.absolute_path))
        known = [m for p, m in KNOWN_DEVIATIONS.get(name, set()) if p == path]
        found.add((path, next((m for m in known if error.message.startswith(m)), error.message)))
    return found


@pytest.mark.parametrize("name", EXPECTED_WEBHOOKS)
def test_webhook_fixture_matches_the_official_schema(name: str) -> None:
    payload = json.loads((WEBHOOKS / f"{name}.json").read_text())
    action = name.partition(".")[2]
    assert payload.get("action") == (action or None)
    assert deviations(load_subset(), name, payload) == KNOWN_DEVIATIONS.get(name, set())


def test_webhook_fixture_set_is_complete() -> None:
    assert sorted(p.stem for p in WEBHOOKS.glob("*.json")) == EXPECTED_WEBHOOKS


def webhook_refs(server: GitHubServer, name: str) -> dict[str, Any]:
    """Arguments of `server.webhook` for `name`, seeding what the event is about."""
    event = name.partition(".")[0]
    if name == "ping":
        return {}
    if event == "installation":
        return {"installation_id": INSTALLATION}
    if event == "installation_repositories":
        return {"installation_id": INSTALLATION, "repositories": [f"{OWNER}/{NAME}"]}
    where = {"owner": OWNER, "repo": NAME}
    if event == "issue_comment":
        return {**where, "comment_id": server.add_comment(OWNER, NAME, 7, "/alignbot", "bob").id}
    if event == "check_run":
        run = Github(base_url=server.url, auth=Auth.Token(token_for(server)), **fast()).get_repo(
            f"{OWNER}/{NAME}").create_check_run("alignbot", HEAD, conclusion="success")
        return {**where, "check_run_id": run.id}
    if event == "pull_request_review":
        return {**where, "number": 7, "review_id": server.add_review(OWNER, NAME, 7, "bob").id}
    return {**where, "number": 7}


@pytest.mark.parametrize("name", EXPECTED_WEBHOOKS)
def test_built_webhooks_match_the_official_schema(server: GitHubServer, name: str) -> None:
    if name == "pull_request.closed":
        server.update_pull(OWNER, NAME, 7, state="closed")
    payload = server.webhook(name, **webhook_refs(server, name))
    subset = load_subset()
    schema = subset.webhook_schema(name.replace("_", "-").replace(".", "-"))
    assert [explain(error) for error in subset.errors(schema, payload)] == []
    fixture = json.loads((WEBHOOKS / f"{name}.json").read_text())
    if name != "ping":  # the fixture is a repository hook's ping, not an App's
        assert set(fixture) - set(payload) <= {"enterprise"}
    if "repository" in payload:
        assert payload["repository"]["url"] == f"{server.url}/repos/{OWNER}/{NAME}"
        assert payload["installation"]["id"] == INSTALLATION


def test_synchronize_payload_follows_pushes(server: GitHubServer) -> None:
    server.push(OWNER, NAME, 7, HEAD2)
    payload = server.webhook("pull_request.synchronize", OWNER, NAME, number=7)
    assert (payload["before"], payload["after"]) == (HEAD, HEAD2)
    assert payload["pull_request"]["head"]["sha"] == HEAD2


def test_delivery_is_signed(server: GitHubServer) -> None:
    payload = server.webhook("ping")
    headers, body = server.delivery("ping", payload, "s3cret")
    expected = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers["X-Hub-Signature-256"] == f"sha256={expected}"
    assert headers["X-GitHub-Event"] == "ping" and json.loads(body) == payload
    assert len(headers["X-GitHub-Delivery"]) == 36
