"""The GitHub test server's check runs and request-body checks (bot/testing/github/check_runs.py,
openapi.py)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from github import Github, GithubException
from testing_github import (
    HEAD,
    NAME,
    OWNER,
    token_for,
)

from alignbot.bot.testing.github import GitHubServer


def make_annotations(count: int, start: int = 0) -> list[dict[str, Any]]:
    """`count` check-run annotations on ops/add.py."""
    return [{"path": "ops/add.py", "start_line": i + 1, "end_line": i + 1,
             "annotation_level": "failure", "message": f"mismatch {i}"}
            for i in range(start, start + count)]


def test_check_run_lifecycle(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    run = repo.create_check_run("alignbot", HEAD, status="in_progress", external_id="job-1",
                                output={"title": "Checking", "summary": "running",
                                        "annotations": make_annotations(50)})
    assert run.pull_requests[0].number == 7
    title = "1 mismatch"
    run.edit(output={"title": title, "summary": "s", "annotations": make_annotations(50, 50)})
    run.edit(conclusion="failure",
             output={"title": title, "summary": "done", "annotations": make_annotations(10, 100)})
    assert (run.status, run.conclusion, run.output.title) == ("completed", "failure", "1 mismatch")
    assert run.output.annotations_count == 110 and run.completed_at is not None
    assert [a.message for a in run.get_annotations()][-1] == "mismatch 109"
    stored = server.check_runs[run.id]
    assert len(stored.updates) == 3 and stored.updates[-1]["conclusion"] == "failure"
    assert [r.id for r in repo.get_commit(HEAD).get_check_runs(check_name="alignbot")] == [run.id]
    assert repo.get_check_run(run.id).external_id == "job-1"


def test_check_run_limits(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    with pytest.raises(GithubException) as many:
        repo.create_check_run("alignbot", HEAD, output={"title": "t", "summary": "s",
                                                        "annotations": make_annotations(51)})
    assert many.value.status == 422
    assert many.value.data["message"] == (
        "Invalid request.\n\nNo more than 50 items are allowed; 51 were supplied.")
    run = repo.create_check_run("alignbot", HEAD, output={"title": "t", "summary": "s" * 65535})
    with pytest.raises(GithubException) as long_text:
        run.edit(output={"title": "t", "summary": "s", "text": "t" * 65536})
    assert long_text.value.data["message"] == (
        "Invalid request.\n\nOnly 65535 characters are allowed; 65536 were supplied.")
    with pytest.raises(GithubException) as wide:
        run.edit(output={"title": "t", "summary": "é" * 40000})
    assert wide.value.data["errors"][0]["message"] == "summary exceeds a maximum bytesize of 65535"
    with pytest.raises(GithubException) as unknown:
        repo.create_check_run("alignbot", "0" * 40)
    assert unknown.value.data["message"] == f"No commit found for SHA: {'0' * 40}"


def test_check_runs_for_ref_keep_the_latest(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    first = repo.create_check_run("alignbot", HEAD, conclusion="neutral")
    second = repo.create_check_run("alignbot", HEAD, status="queued")
    other = repo.create_check_run("lint", HEAD, conclusion="success")
    assert first.status == "completed"
    latest = [r.id for r in repo.get_commit(HEAD).get_check_runs()]
    assert latest == [other.id, second.id]
    every = httpx.get(f"{server.url}/repos/{OWNER}/{NAME}/commits/{HEAD}/check-runs?filter=all")
    assert every.json()["total_count"] == 3
    assert len(server.check_runs_for(OWNER, NAME, HEAD)) == 3


def test_request_bodies_are_checked(server: GitHubServer) -> None:
    headers = {"Authorization": f"token {token_for(server)}"}
    url = f"{server.url}/repos/{OWNER}/{NAME}/check-runs"
    missing = httpx.post(url, headers=headers, json={"head_sha": HEAD})
    assert missing.json()["message"] == "Invalid request.\n\n\"name\" wasn't supplied."
    bad_level = httpx.post(url, headers=headers, json={
        "name": "a", "head_sha": HEAD,
        "output": {"title": "t", "summary": "s", "annotations": [
            {**make_annotations(1)[0], "annotation_level": "error"}]}})
    assert bad_level.status_code == 422 and "annotation_level" in bad_level.json()["message"]
    garbage = httpx.post(url, headers=headers, content=b"{not json")
    assert (garbage.status_code, garbage.json()["message"]) == (400, "Problems parsing JSON")
