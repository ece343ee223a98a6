"""A push to the default branch: the whole configured check of the pushed commit, stored per
op × dtype × kind (``bot/status/store.py``) for the status page and later baselines."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from github.Repository import Repository
from sqlalchemy import Engine

from alignbot.bot.config import CONFIG_PATH, ConfigError, RepoConfig, load_config
from alignbot.bot.github import (
    FileUnreadable,
    GitHubApp,
    InstallationGone,
    read_text,
    transient_failures,
)
from alignbot.bot.jobs import STATUS, status_job
from alignbot.bot.output import CheckContext, candidate_line
from alignbot.bot.queue import JobRecord, JobRequest
from alignbot.bot.seeds import seed_of
from alignbot.bot.storage import installation_gone
from alignbot.bot.webhooks import Event, PayloadError, WebhookRouter, require
from alignbot.bot.worker import ensure_current
from alignbot.checks.api import KNOWN_PATH

from .store import KnownLookup, known_lookup, record_run

log = logging.getLogger(__name__)

JOB_KIND = STATUS
NO_COMMIT = "0" * 40  # ``after`` of a push that deleted the branch


def on_push(event: Event) -> list[JobRequest]:
    """A ``status`` job for a push to the repository's default branch; nothing otherwise."""
    payload = event.payload
    branch = require(payload, "repository", "default_branch", kind=str)
    if require(payload, "ref", kind=str) != f"refs/heads/{branch}":
        return []
    after = require(payload, "after", kind=str)
    if payload.get("deleted") or after == NO_COMMIT:
        return []
    if not (len(after) == 40 and all(c in "0123456789abcdef" for c in after)):
        raise PayloadError(f"after is not a commit sha: {after[:60]!r}")
    repo = require(payload, "repository", "full_name", kind=str)
    installation = require(payload, "installation", "id", kind=int)
    return [status_job(repo, branch, {"installation_id": installation, "repo": repo,
                                      "branch": branch, "head_sha": after,
                                      "seed": branch_seed(repo, branch)})]


def branch_seed(repo: str, branch: str) -> int:
    """The seed of a branch's checks: one per repository and branch, whatever the commit, so
    that consecutive commits draw the same programs and their results compare."""
    return seed_of(f"{repo.lower()}@{branch}")


def register(router: WebhookRouter) -> None:
    router.on("push")(on_push)


class Checker(Protocol):
    """What runs one sandboxed check into ``ctx`` (``alignbot.bot.alignment.AlignmentJob.check``:
    the pull requests' own path, so a push is checked as a pull request's head is)."""

    def check(self, ctx: CheckContext, config: RepoConfig, repo: Repository,
              payload: dict[str, Any], read_known: bool = True) -> None: ...


@dataclass
class StatusJob:
    """Runs one ``status`` job: every spec the configuration maps, on the pushed commit."""

    app: GitHubApp
    engine: Engine
    checker: Checker

    def __call__(self, job: JobRecord) -> dict[str, Any]:
        payload = job.payload
        gone = installation_gone(self.engine, payload["installation_id"])
        if gone is not None:
            return {"skipped": f"the App was {gone}"}
        try:
            with transient_failures(self.app, payload["installation_id"]):
                return self._run(job)
        except InstallationGone as exc:
            return {"skipped": str(exc)}

    def _run(self, job: JobRecord) -> dict[str, Any]:
        payload = job.payload
        sha = payload["head_sha"]
        repo = self.app.client(payload["installation_id"]).get_repo(payload["repo"])
        try:
            text = read_text(repo, CONFIG_PATH, sha)
        except FileUnreadable as exc:
            return self._store(job, "?", None, str(exc))
        if text is None:
            return {"skipped": f"no {CONFIG_PATH}"}
        try:
            config = load_config(text, CONFIG_PATH)
        except ConfigError as exc:
            return self._store(job, "?", None, f"{CONFIG_PATH} is invalid: {exc}")
        candidate = config.candidate.preset or candidate_line(config.candidate.prelude or "")
        specs = list(dict.fromkeys(spec for entry in config.ops for spec in entry.specs))
        if not specs:
            return self._store(job, candidate[:80], None, f"{CONFIG_PATH} maps no ops")
        ctx = CheckContext(sha, candidate[:80], specs=specs)
        self.checker.check(ctx, config, repo, payload, read_known=False)
        ensure_current()  # superseded by a newer push, or taken over: store nothing
        report = ctx.report.dump() if ctx.report is not None else None
        known, note = self.known(repo, sha) if report is not None else (None, None)
        return self._store(job, ctx.candidate, report, ctx.failure, known, note)

    def known(self, repo: Repository, sha: str) -> tuple[KnownLookup | None, str | None]:
        """How the findings at ``sha`` are matched against the repository's known-divergences
        file (none without the file), or why the file could not be used."""
        try:
            return known_lookup(read_text(repo, KNOWN_PATH, sha))
        except FileUnreadable as exc:
            return None, f"{KNOWN_PATH} was not used: {str(exc)[:500]}"

    def _store(self, job: JobRecord, candidate: str, report: dict[str, Any] | None,
               failure: str | None, known: KnownLookup | None = None,
               note: str | None = None) -> dict[str, Any]:
        payload = job.payload
        run_id = record_run(self.engine, installation_id=payload["installation_id"],
                            repo=payload["repo"], branch=payload["branch"],
                            commit_sha=payload["head_sha"], job_id=job.id, candidate=candidate,
                            report=report, failure=failure, known=known, note=note)
        log.info("status of %s at %s stored (run %d): %s", payload["repo"],
                 payload["head_sha"][:12], run_id, failure or "complete")
        return {"status_run": run_id, "failure": failure,
                "findings": len((report or {}).get("findings") or [])}
