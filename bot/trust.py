"""The gate in front of the automatic ``align`` job: a pull request from outside waits for a
maintainer's ``/ok-to-test``. Who is trusted, and the ``/ok-to-test`` records, are in
``bot/policy.py`` (the slash-commands read them too); they are re-exported here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from github.PullRequest import PullRequest
from github.Repository import Repository
from sqlalchemy import Engine

from checks.report import environment

from .config import Trust
from .github import GitHubApp
from .markers import upsert_marked
from .policy import (
    TRUSTED_ASSOCIATIONS,
    Decision,
    base_config,
    base_trust,
    decide,
    is_ok,
    pr_trusted,
    record_ok,
)

__all__ = [
    "TRUSTED_ASSOCIATIONS",
    "WAITING_MARKER",
    "Decision",
    "TrustGate",
    "base_config",
    "base_trust",
    "decide",
    "is_ok",
    "pr_trusted",
    "record_ok",
]

WAITING_MARKER = "<!-- alignbot:waiting-for-ok-to-test -->"


@dataclass
class TrustGate:
    """The gate in front of the ``align`` job (``AlignmentJob.gate``).

    A pull request from outside the organisation and its collaborators does not run on its
    own: the first time, the app says so in one comment (found again by its author and
    ``WAITING_MARKER`` at its start, edited in place on later pushes, never posted twice),
    and a maintainer's ``/ok-to-test`` lets it run. A job a maintainer asked for
    (``approved_by`` in its payload, set by ``/align``) passes.
    """

    engine: Engine
    app: GitHubApp

    def __call__(self, repo: Repository, pr: PullRequest, payload: dict[str, Any]
                 ) -> str | None:
        """None if the check may run; otherwise why not (after telling the pull request)."""
        if payload.get("approved_by"):
            return None
        trust = base_trust(repo, pr)
        ok = is_ok(self.engine, repo.full_name, pr.number, pr.head.sha, trust.carry_over_pushes)
        decision = decide(pr.author_association, trust, ok)
        if decision is Decision.RUN:
            return None
        if decision is Decision.SKIP:
            return "an outside contributor's pull request (trust.outside_contributors: skip)"
        self._say_waiting(pr, trust)
        return "waiting for a maintainer's /ok-to-test"

    def _say_waiting(self, pr: PullRequest, trust: Trust) -> None:
        body = environment().get_template("command_waiting.md.j2").render(
            marker=WAITING_MARKER, head_sha=pr.head.sha, carry_over=trust.carry_over_pushes)
        upsert_marked(pr, self.app.bot_login(), WAITING_MARKER, body)
