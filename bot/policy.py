"""Who may run what: the trust data that the ``/ok-to-test`` gate (``bot/trust.py``) and the
slash-commands (``bot/commands/``) both read, kept out of either feature.

A pull request from outside the organisation and its collaborators runs only after a
maintainer's ``/ok-to-test`` (recorded in ``pr_ok_to_test``), unless the configuration on the
base branch says ``trust.outside_contributors: run`` (or ``skip``: never automatically).
"""

from __future__ import annotations

import logging
from enum import StrEnum

from github.PullRequest import PullRequest
from github.Repository import Repository
from sqlalchemy import Engine, exists, select

from .config import CONFIG_PATH, ConfigError, RepoConfig, Trust, load_config
from .github import read_text
from .storage import OK_TO_TEST, insert_ignore, transaction, utcnow

log = logging.getLogger(__name__)

# author_association values of people inside the organisation or invited to the repository.
TRUSTED_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})


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
