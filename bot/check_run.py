"""The check run of one head, from opened to completed: one object shared by the whole check
(``alignbot.bot.alignment``) and its shards (``alignbot.bot.sharding``)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from github.GithubObject import NotSet
from github.Repository import Repository

from .errors import is_transient
from .output import CHECK_NAME, CheckContext, CheckOutput, Conclusion, batches, check_output
from .worker import JobLost, JobSuperseded

log = logging.getLogger(__name__)


class CheckRunState(StrEnum):
    NONE = "none"  # no check run yet: a job that ends here ends visibly without one
    OPEN = "open"  # in progress and this job's to end: every way out completes it
    COMPLETED = "completed"  # concluded: nothing this job does changes the conclusion again
    HANDED_OVER = "handed over"  # another job ends it (the shards, or the shard that ended)


@dataclass
class CheckRunLifecycle:
    """The one check run of ``head_sha`` as one job sees it: none, then open, then completed
    or handed over, each step once and forwards only.

    Invariant: a run is written to only while it is open; ``complete`` and ``fail_if_open``
    on a run that is completed or handed over write nothing and return False, so a failure
    after the check's conclusion (the comment, say) never overwrites it."""

    head_sha: str
    run: Any = None  # PyGithub's CheckRun
    state: CheckRunState = CheckRunState.NONE

    @classmethod
    def found(cls, repo: Repository, head_sha: str, key: str) -> CheckRunLifecycle:
        """The check run an earlier job created, as GitHub has it: open unless completed
        (or none at all)."""
        run = find_check_run(repo, head_sha, key)
        if run is None:
            return cls(head_sha)
        return cls(head_sha, run, CheckRunState.COMPLETED if run.status == "completed"
                   else CheckRunState.OPEN)

    @property
    def is_open(self) -> bool:
        """Whether this job still has to end the run (every way out of the job does)."""
        return self.state is CheckRunState.OPEN

    def open(self, repo: Repository, key: str, details_url: str | None = None) -> Any:
        """Find the run again by its external id and set it in progress, or create it
        (linking ``details_url``, the pull request's status page, when given)."""
        self._opened(open_check_run(repo, self.head_sha, key, details_url))
        return self.run

    def attach(self, repo: Repository, key: str) -> Any:
        """Take over the run another job opened (a shard, the ``align`` job's): found, not
        set in progress again (another shard may have completed it), created if gone."""
        run = find_check_run(repo, self.head_sha, key)
        self._opened(run if run is not None else open_check_run(repo, self.head_sha, key))
        return self.run

    def _opened(self, run: Any) -> None:
        if self.state is not CheckRunState.NONE:
            raise RuntimeError(f"the check run of {self.head_sha[:12]} is {self.state} already")
        self.run, self.state = run, CheckRunState.OPEN

    def complete(self, output: CheckOutput) -> bool:
        """Conclude the open run with ``output``; False (and nothing written) when it is not
        open. A write that raises leaves it open, for ``fail_if_open`` to end."""
        if not self.is_open:
            return False
        complete_run(self.run, output)
        self.state = CheckRunState.COMPLETED
        return True

    def fail_if_open(self, reason: str, conclusion: Conclusion = Conclusion.FAILURE) -> bool:
        """Conclude the run, if still open, with ``reason`` as its one line (``CANCELLED``
        for a superseded check); best effort: a write that fails is logged."""
        if not self.is_open:
            return False
        self.state = CheckRunState.COMPLETED  # tried once: a second failure does not try again
        finish_run(self.run, self.head_sha, reason, conclusion)
        return True

    def hand_over(self) -> None:
        """Another job ends the run from here on; this one writes to it no more."""
        if self.state is not CheckRunState.COMPLETED:
            self.state = CheckRunState.HANDED_OVER


def will_retry(error: BaseException) -> bool:
    """A transient error, or a rate limit the worker reschedules (``retry_at``): the job runs
    again and finds its check run again, so it is left in progress."""
    return is_transient(error) or hasattr(error, "retry_at")


@contextmanager
def ended_on_failure(lifecycle: CheckRunLifecycle,
                     reason: Callable[[Exception, bool], str | None]) -> Iterator[None]:
    """Whatever raises out of the block ends the run if it is still open, cancelled for a
    superseded job and failed otherwise, with ``reason(error, superseded)`` (None: another
    job ends it), and raises on. Left open: a transient error (the job runs again and finds
    the same run) and a lost job (the worker that took it over posts)."""
    try:
        yield
    except Exception as exc:
        if lifecycle.is_open and not will_retry(exc) and not isinstance(exc, JobLost):
            superseded = isinstance(exc, JobSuperseded)
            why = reason(exc, superseded)
            if why is not None:
                lifecycle.fail_if_open(why, Conclusion.CANCELLED if superseded
                                       else Conclusion.FAILURE)
        raise


def external_id(key: str, head_sha: str) -> str:
    """The external id of the check run of pull request ``key`` at ``head_sha``: how a job
    run again, a shard or a newer push finds the run an earlier job created."""
    return f"{key}@{head_sha}"


def find_check_run(repo: Repository, head_sha: str, key: str) -> Any | None:
    """The check run of pull request ``key`` at ``head_sha``, or None when there is none."""
    wanted = external_id(key, head_sha)
    for run in repo.get_commit(head_sha).get_check_runs(check_name=CHECK_NAME):
        if run.external_id == wanted:
            return run
    return None


def open_check_run(repo: Repository, head_sha: str, key: str, details_url: str | None = None
                   ) -> Any:
    """The check run for this head, found again by its external id and set in progress, or
    a new one (linking ``details_url`` when given)."""
    run = find_check_run(repo, head_sha, key)
    if run is not None:
        run.edit(status="in_progress")
        return run
    return repo.create_check_run(name=CHECK_NAME, head_sha=head_sha, status="in_progress",
                                 external_id=external_id(key, head_sha),
                                 details_url=details_url or NotSet)


def complete_run(run: Any, output: CheckOutput) -> None:
    """Complete ``run`` with ``output``, its annotations in GitHub's batches (the last edit
    sets the conclusion)."""
    chunks = batches(output.annotations)
    for index, chunk in enumerate(chunks):
        body: dict[str, Any] = {"title": output.title, "summary": output.summary,
                                "text": output.text}
        if chunk:
            body["annotations"] = chunk
        last = index == len(chunks) - 1
        if last:
            run.edit(status="completed", conclusion=output.conclusion.value, output=body)
        else:
            run.edit(output=body)


def finish_run(run: Any, head_sha: str, reason: str, conclusion: Conclusion) -> None:
    """Complete ``run`` with ``reason`` as the one line of its output; best effort."""
    ctx = CheckContext(head_sha, "?", failure=reason)
    output = dataclasses.replace(check_output(ctx), conclusion=conclusion, annotations=[])
    if conclusion is Conclusion.CANCELLED:
        output.title = reason
    try:
        complete_run(run, output)
    except Exception:
        log.exception("could not complete check run %s (%s)", getattr(run, "id", "?"), reason)
