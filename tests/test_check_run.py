"""bot/check_run.py: a check run goes from none to open to completed (or handed over), once
and forwards only, against the GitHub test server."""

from __future__ import annotations

from typing import Any

import pytest

from alignbot.bot.check_run import (
    CheckRunLifecycle,
    CheckRunState,
    ended_on_failure,
    external_id,
    will_retry,
)
from alignbot.bot.errors import TransientError
from alignbot.bot.github import ApiOptions, GitHubApp
from alignbot.bot.output import CheckOutput, Conclusion
from alignbot.bot.testing.github import GitHubServer
from alignbot.bot.worker import JobLost, JobSuperseded

INSTALLATION, OWNER, REPO, HEAD, KEY = 7, "octo", "kernels", "c" * 40, "octo/kernels#1"


@pytest.fixture()
def repo(github_server: GitHubServer) -> Any:
    github_server.add_installation(INSTALLATION, OWNER)
    github_server.add_repo(OWNER, REPO, INSTALLATION, files_by_ref={HEAD: {"k.py": "x\n"}})
    gh = GitHubApp(github_server.app_id, github_server.private_key_pem, ApiOptions(
        base_url=github_server.url, seconds_between_writes=0)).client(INSTALLATION)
    return gh.get_repo(f"{OWNER}/{REPO}")


def stored(github_server: GitHubServer) -> Any:
    (run,) = github_server.check_runs_for(OWNER, REPO, HEAD)
    return run


def patches(github_server: GitHubServer) -> int:
    return sum(1 for e in github_server.exchanges if e.method == "PATCH")


PASSED = CheckOutput(Conclusion.SUCCESS, "all aligned", "summary", "text", [])


def test_a_new_lifecycle_has_no_run_and_writes_nothing(github_server: GitHubServer) -> None:
    lifecycle = CheckRunLifecycle(HEAD)
    assert lifecycle.state is CheckRunState.NONE and not lifecycle.is_open
    assert not lifecycle.complete(PASSED) and not lifecycle.fail_if_open("boom")
    assert lifecycle.state is CheckRunState.NONE and github_server.exchanges == []


def test_open_creates_the_run_in_progress_and_a_second_job_finds_it_again(
        repo: Any, github_server: GitHubServer) -> None:
    first = CheckRunLifecycle(HEAD)
    run = first.open(repo, KEY, "https://alignbot.example/status")
    assert first.is_open and first.state is CheckRunState.OPEN
    found = stored(github_server)
    assert (found.status, found.external_id) == ("in_progress", external_id(KEY, HEAD))
    assert found.details_url == "https://alignbot.example/status"
    assert first.complete(PASSED)

    again = CheckRunLifecycle(HEAD)
    assert again.open(repo, KEY).id == run.id  # a job run again: the same run, in progress
    assert stored(github_server).status == "in_progress" and again.is_open


def test_a_lifecycle_opens_once(repo: Any) -> None:
    lifecycle = CheckRunLifecycle(HEAD)
    lifecycle.open(repo, KEY)
    with pytest.raises(RuntimeError, match="open already"):
        lifecycle.attach(repo, KEY)


def test_completing_twice_writes_once(repo: Any, github_server: GitHubServer) -> None:
    lifecycle = CheckRunLifecycle(HEAD)
    lifecycle.open(repo, KEY)
    assert lifecycle.complete(PASSED)
    assert lifecycle.state is CheckRunState.COMPLETED and not lifecycle.is_open
    written = patches(github_server)
    failed = CheckOutput(Conclusion.FAILURE, "a second opinion", "summary", "text", [])
    assert not lifecycle.complete(failed)
    assert patches(github_server) == written
    run = stored(github_server)
    assert (run.status, run.conclusion) == ("completed", "success")


def test_failing_after_completion_does_not_change_the_conclusion(
        repo: Any, github_server: GitHubServer) -> None:
    lifecycle = CheckRunLifecycle(HEAD)
    lifecycle.open(repo, KEY)
    lifecycle.complete(PASSED)
    assert not lifecycle.fail_if_open("the comment could not be written")
    assert not lifecycle.fail_if_open("superseded", Conclusion.CANCELLED)
    run = stored(github_server)
    assert run.conclusion == "success" and run.output["title"] == "all aligned"


def test_failing_an_open_run_completes_it_with_the_reason_once(
        repo: Any, github_server: GitHubServer) -> None:
    lifecycle = CheckRunLifecycle(HEAD)
    lifecycle.open(repo, KEY)
    assert lifecycle.fail_if_open("superseded by 0123456789ab", Conclusion.CANCELLED)
    assert lifecycle.state is CheckRunState.COMPLETED
    assert not lifecycle.fail_if_open("a later failure")
    run = stored(github_server)
    assert run.conclusion == "cancelled" and run.output["title"] == "superseded by 0123456789ab"


def test_a_handed_over_run_is_left_to_the_job_that_ends_it(
        repo: Any, github_server: GitHubServer) -> None:
    lifecycle = CheckRunLifecycle(HEAD)
    lifecycle.open(repo, KEY)
    lifecycle.hand_over()
    assert lifecycle.state is CheckRunState.HANDED_OVER and not lifecycle.is_open
    assert not lifecycle.complete(PASSED) and not lifecycle.fail_if_open("boom")
    assert stored(github_server).status == "in_progress"
    shard = CheckRunLifecycle(HEAD)  # the shard that ends it takes it over, not reopened
    github_server.clear_log()
    shard.attach(repo, KEY)
    assert patches(github_server) == 0 and shard.complete(PASSED)
    assert stored(github_server).conclusion == "success"


def test_found_reads_the_state_github_has(repo: Any) -> None:
    assert CheckRunLifecycle.found(repo, HEAD, KEY).state is CheckRunState.NONE
    CheckRunLifecycle(HEAD).open(repo, KEY)
    assert CheckRunLifecycle.found(repo, HEAD, KEY).is_open
    assert CheckRunLifecycle.found(repo, HEAD, KEY).fail_if_open("gave up")
    found = CheckRunLifecycle.found(repo, HEAD, KEY)
    assert found.state is CheckRunState.COMPLETED and not found.fail_if_open("gave up again")


@pytest.mark.parametrize(("error", "conclusion"), [
    (ValueError("bug"), "failure"), (JobSuperseded(), "cancelled"),
    (TransientError("502"), None), (JobLost(), None),
])
def test_what_raises_out_of_the_job_ends_the_open_run(
        repo: Any, github_server: GitHubServer, error: Exception, conclusion: str | None
        ) -> None:
    lifecycle = CheckRunLifecycle(HEAD)
    lifecycle.open(repo, KEY)
    seen: list[tuple[str, bool]] = []

    def reason(exc: Exception, superseded: bool) -> str:
        seen.append((type(exc).__name__, superseded))
        return f"ended by {type(exc).__name__}"

    with pytest.raises(type(error)), ended_on_failure(lifecycle, reason):
        raise error
    run = stored(github_server)
    assert run.conclusion == conclusion and lifecycle.is_open is (conclusion is None)
    if conclusion is not None:  # left open: the job runs again, or its new worker posts
        assert seen == [(type(error).__name__, isinstance(error, JobSuperseded))]
        assert f"ended by {type(error).__name__}" in " ".join(map(str, run.output.values()))
    assert will_retry(error) is isinstance(error, TransientError)


def test_a_failure_after_completion_or_with_no_reason_leaves_the_run(
        repo: Any, github_server: GitHubServer) -> None:
    lifecycle = CheckRunLifecycle(HEAD)
    lifecycle.open(repo, KEY)
    with pytest.raises(ValueError), ended_on_failure(lifecycle, lambda exc, superseded: None):
        raise ValueError("another shard ended the check")
    assert lifecycle.is_open and stored(github_server).status == "in_progress"
    with pytest.raises(ValueError), ended_on_failure(lifecycle, lambda exc, s: "failed"):
        lifecycle.complete(PASSED)
        raise ValueError("the comment could not be written")
    assert stored(github_server).conclusion == "success"
