"""Whose pull requests run without a maintainer's go-ahead: the ``/ok-to-test`` records and the
gate in front of the automatic ``align`` job."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from github.PullRequest import PullRequest
from github.Repository import Repository
from sqlalchemy import Engine, exists, select

from checks.report import environment

from .config import CONFIG_PATH, ConfigError, RepoConfig, Trust, load_config
from .github import GitHubApp, read_text
from .markers import upsert_marked
from .storage import OK_TO_TEST, insert_ignore, transaction, utcnow

log = logging.getLogger(__name__)

# author_association values of people inside the organisation or invited to the repository.
TRUSTED_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
WAITING_MARKER = "<!-- alignbot:waiting-for-ok-to-test -->"


class Decision(StrEnum):
    RUN = "run"
    WAIT = "wait"  # until a maintainer's /ok-to-test
    SKIP = "skip"  # never automatically (trust.outside_contributors: skip)


def record_ok(engine: Engine, repo: str, number: int, head_sha: str, login: str) -> bool:
    """Record an ``/ok-to-test``; False if this head was already trusted (nothing changes)."""
    with transaction(engine) as conn:
        return insert_ignore(conn, OK_TO_TEST, {
            "repo": repo, "number": number, "head_sha": head_sha, "trusted_by": login,
            "created_at": utcnow()}, keys=["repo", "number", "head_sha"])


def is_ok(engine: Engine, repo: str, number: int, head_sha: str, carry_over: bool) -> bool:
    """Whether a maintainer trusted this pull request at ``head_sha`` (or at any head)."""
    where = [OK_TO_TEST.c.repo == repo, OK_TO_TEST.c.number == number]
    if not carry_over:
        where.append(OK_TO_TEST.c.head_sha == head_sha)
    with transaction(engine) as conn:
        return bool(conn.execute(select(exists().where(*where))).scalar())


def decide(association: str | None, trust: Trust, ok: bool) -> Decision:
    """Run, wait or skip a pull request whose author has this ``author_association``."""
    if association in TRUSTED_ASSOCIATIONS or trust.outside_contributors == "run":
        return Decision.RUN
    if trust.outside_contributors == "skip":
        return Decision.SKIP
    return Decision.RUN if ok else Decision.WAIT


def base_config(repo: Repository, pr: PullRequest) -> RepoConfig | None:
    """The configuration on the pull request's base branch, or None (missing or invalid).

    Trust and filing settings come from here, never from the head: a pull request must not be
    able to trust itself or send issues elsewhere by editing the file.
    """
    text = read_text(repo, CONFIG_PATH, pr.base.ref)
    if text is None:
        return None
    try:
        return load_config(text)
    except ConfigError:
        log.info("%s: the base branch's %s is invalid; trust defaults apply",
                 repo.full_name, CONFIG_PATH)
        return None


def base_trust(repo: Repository, pr: PullRequest) -> Trust:
    config = base_config(repo, pr)
    return config.trust if config is not None else Trust()


def pr_trusted(engine: Engine, repo: Repository, pr: PullRequest, trust: Trust) -> bool:
    """Whether the pull request at its current head may run without a maintainer's word."""
    ok = is_ok(engine, repo.full_name, pr.number, pr.head.sha, trust.carry_over_pushes)
    return decide(pr.author_association, trust, ok) is Decision.RUN


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
