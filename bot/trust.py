"""The gate in front of the automatic ``align`` job: a pull request from outside waits for a
maintainer's ``/ok-to-test``. Who is trusted, and the ``/ok-to-test`` records, are in
``bot/policy.py`` (the slash-commands read them too); they are re-exported here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from github.PullRequest import PullRequest
from github.Repository import Repository
from sqlalchemy import Engine

from alignbot.checks.api import environment

from .config import Trust
from .github import GitHubApp
from .markers import upsert_marked
from .policy import (
    TRUSTED_ASSOCIATIONS,
    Approval,
    Decision,
    Hold,
    approval,
    base_config,
    base_trust,
    decide,
    is_ok,
    needs_ok,
    pr_trusted,
    record_ok,
)

__all__ = [
    "TRUSTED_ASSOCIATIONS",
    "WAITING",
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
WAITING = "waiting for a maintainer's /ok-to-test"
SKIPPED = "an outside contributor's pull request (trust.outside_contributors: skip)"


@dataclass
class TrustGate:
    """The gate in front of the ``align`` job (``AlignmentJob.gate``).

    A pull request from outside the organisation and its collaborators does not run on its
    own: the head's check run completes as ``action_required`` and says so, as does one
    comment (found again by its author and ``WAITING_MARKER`` at its start, edited in place
    on later pushes, never posted twice), and a maintainer's ``/ok-to-test`` of that very
    commit lets it run, while the maintainer still has write access (``policy.approval``).
    A job a maintainer asked for (``approved_by`` in its payload, set by ``/align`` for the
    head of the comment's time) passes.
    """

    engine: Engine
    app: GitHubApp

    def __call__(self, repo: Repository, pr: PullRequest, payload: dict[str, Any]
                 ) -> Hold | None:
        """None if the check may run; otherwise why not (after telling the pull request)."""
        if payload.get("approved_by"):
            return None
        trust = base_trust(repo, pr)
        if not needs_ok(pr.author_association, trust):
            return None
        if trust.outside_contributors == "skip":
            return Hold(SKIPPED)
        found = approval(self.engine, repo, pr.number, pr.head.sha, trust.carry_over_pushes)
        if found.by is not None:
            return None
        self._say_waiting(pr, trust, found)
        summary = environment().get_template("check_run_waiting.md.j2").render(
            **_waiting_values(pr, trust, found))
        return Hold(WAITING, f"Waiting for a maintainer's /ok-to-test of {pr.head.sha[:12]}",
                    summary)

    def _say_waiting(self, pr: PullRequest, trust: Trust, found: Approval) -> None:
        body = environment().get_template("command_waiting.md.j2").render(
            marker=WAITING_MARKER, **_waiting_values(pr, trust, found))
        upsert_marked(pr, self.app.bot_login(), WAITING_MARKER, body)


def _waiting_values(pr: PullRequest, trust: Trust, found: Approval) -> dict[str, Any]:
    return {"head_sha": pr.head.sha, "carry_over": trust.carry_over_pushes,
            "others": found.others, "lost": found.lost}
