"""The alignment feature: a pull request that touches op code gets a sandboxed check, one
check run and one sticky comment, edited in place on later pushes."""

from __future__ import annotations

import functools
import json
import logging
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from github import GithubException
from github.PullRequest import PullRequest
from github.Repository import Repository
from sqlalchemy import Engine

from alignbot.checks.api import KNOWN_PATH, KnownFile, KnownFileError, load_known

from . import baseline as baselines
from .archive import ArchiveError, extract_tarball
from .baseline import BASELINE_FILE, Classified, classify
from .check_run import CheckRunLifecycle, ended_on_failure, external_id, open_check_run
from .config import CONFIG_PATH, ConfigError, RepoConfig, load_config
from .engine_command import check_args
from .engine_report import EngineReport, InvalidReport, empty_report, parse_report
from .errors import is_transient
from .github import (
    FileTooLarge,
    FileUnreadable,
    GitHubApp,
    InstallationGone,
    read_text,
    transient_failures,
)
from .jobs import ALIGN, align_job
from .markers import upsert_marked
from .output import (
    CHECK_NAME,
    MARKER,
    CheckContext,
    Conclusion,
    candidate_line,
    check_output,
    comment_body,
)
from .policy import Hold, head_seen
from .queue import JobQueue, JobRecord, JobRequest
from .sandbox import Containment, SandboxLimits, SandboxResult, run_check
from .seeds import check_seed
from .storage import installation_gone
from .webhooks import Event, WebhookRouter
from .worker import JobTimedOut, ensure_current, stop_event

log = logging.getLogger(__name__)

JOB_KIND = ALIGN

PR_ACTIONS = ("opened", "synchronize", "reopened", "ready_for_review")
SUPERSEDED = "superseded by a newer push"
INVALID_REPORT_ADVICE = ("The report comes out of the sandbox, where the pull request's code "
                        "runs: something there wrote or changed it.")
TOO_LARGE = (f"{CONFIG_PATH} is larger than 1 MB; GitHub will not serve it through the "
             "contents API")


def align_request(payload: dict[str, Any], pr: dict[str, Any], head_sha: str, trigger: str
                  ) -> JobRequest | None:
    """The job for one pull request head, or None (with a log line) when it cannot run."""
    repo = (payload.get("repository") or {}).get("full_name")
    installation = (payload.get("installation") or {}).get("id")
    number = pr.get("number")
    if not (repo and installation and number and head_sha):
        log.info("skipping %s: the payload lacks repository, installation or pull request",
                 trigger)
        return None
    return align_job(repo, int(number), {
        "installation_id": int(installation), "repo": repo, "number": int(number),
        "head_sha": head_sha, "trigger": trigger})


def on_pull_request(event: Event) -> list[JobRequest]:
    pr = event.payload.get("pull_request") or {}
    if pr.get("draft"):
        return []
    head = pr.get("head") or {}
    if head.get("repo") is None:
        log.info("skipping %s: the head repository is gone (a deleted fork)", event.delivery_id)
        return []
    request = align_request(event.payload, pr, head.get("sha", ""), f"pull_request.{event.action}")
    if request is None:
        return []
    request.payload.update(head_seen(event.payload))  # when GitHub showed this head (trust)
    return [request]


def on_check_run_rerequested(event: Event) -> list[JobRequest]:
    run = event.payload.get("check_run") or {}
    if run.get("name") != CHECK_NAME:
        return []
    requests = (align_request(event.payload, pr, run.get("head_sha", ""), "check_run.rerequested")
                for pr in run.get("pull_requests") or [])
    return [r for r in requests if r is not None]


def register(router: WebhookRouter) -> None:
    router.on("pull_request", *PR_ACTIONS)(on_pull_request)
    router.on("check_run", "rerequested")(on_check_run_rerequested)


class SandboxRunner(Protocol):
    """``run_check``'s signature: what runs the check (tests pass their own)."""

    def __call__(self, repo_dir: Path, config: RepoConfig, check_args: list[str],
                 limits: SandboxLimits, containment: Containment, *,
                 stop: threading.Event | None = None) -> SandboxResult: ...


class Sharding(Protocol):
    """``alignbot.bot.sharding.Sharding``: what an ``align`` job does with a check of several
    shards."""

    def split(self, job: JobRecord, ctx: CheckContext, shards: int
              ) -> dict[str, Any] | None: ...

    def split_before(self, job: JobRecord) -> dict[str, Any] | None: ...

    def close_superseded(self, job: JobRecord, repo: Repository, newer: str) -> None: ...


# (repository, pull request, job payload) -> None to run, or why not (alignbot.bot.trust.TrustGate)
Gate = Callable[[Repository, PullRequest, dict[str, Any]], Hold | None]


@dataclass
class AlignmentJob:
    """Runs one ``align`` job; every GitHub write is idempotent (found again by marker or
    external id), so a job that is re-run after a crash never posts twice."""

    app: GitHubApp
    queue: JobQueue
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    containment: Containment = field(default_factory=Containment)
    sandbox: SandboxRunner = run_check
    public_url: str | None = None
    gate: Gate | None = None
    engine: Engine | None = None  # where installations are recorded: a removed one is skipped
    max_shards: int = 1  # the operator's cap on a repository's ``shards``
    merge_base_check: bool = True  # the operator's switch: False checks no merge base
    work_dir: Path | None = None  # where checkouts go (alignbot.bot.workdir.WorkFolder); None: /tmp
    # alignbot.bot.sharding.Sharding: splits a check into shard jobs
    sharding: Sharding | None = None
    status_url: str | None = None  # the App's public address: check runs link the PR's page

    def __call__(self, job: JobRecord) -> dict[str, Any] | None:
        """Run the job; once its check run exists, every way out completes it, except a
        transient error (the worker runs the job again, which finds the same check run)."""
        if (skipped := app_removed(self.engine, job)) is not None:
            return skipped
        lifecycle = CheckRunLifecycle(job.payload["head_sha"])
        try:
            with ended_on_failure(lifecycle, functools.partial(self._ended_by, job)), \
                    transient_failures(self.app, job.payload["installation_id"]):
                return self._run(job, lifecycle)
        except InstallationGone as exc:  # no token: nothing can be posted, nor retried
            log.info("job %d (%s): not checked: %s", job.id, job.key, exc)
            return {"skipped": str(exc)}

    def _ended_by(self, job: JobRecord, error: Exception, superseded: bool) -> str | None:
        """The line that ends the open check run after ``error``; None for a gone
        installation, which leaves no token to write it with."""
        if isinstance(error, InstallationGone):
            return None
        return self._superseded_by(job) if superseded else failed_reason(error, "this head")

    def _superseded_by(self, job: JobRecord) -> str:
        """Why a superseded job's check run ends: the pull request's newer head, by sha."""
        payload = job.payload
        try:
            pr = self.app.client(payload["installation_id"]).get_repo(payload["repo"]
                                                                      ).get_pull(payload["number"])
            newer = pr.head.sha
        except Exception:
            return SUPERSEDED
        if pr.state != "open":
            return "superseded: the pull request was closed"
        return SUPERSEDED if newer == payload["head_sha"] else f"superseded by {newer[:12]}"

    def give_up(self, job: JobRecord, reason: str) -> None:
        """The worker will not run ``job`` again (e.g. GitHub was unreachable for too long):
        complete its check run, if it has one, as failed with ``reason``. Best effort."""
        payload = job.payload
        head_sha = payload["head_sha"]
        try:
            repo = self.app.client(payload["installation_id"]).get_repo(payload["repo"])
            CheckRunLifecycle.found(repo, head_sha, job.key).fail_if_open(reason)
        except Exception:
            log.exception("could not complete the check run of job %s (%s)", job.id,
                          external_id(job.key, head_sha))

    def _run(self, job: JobRecord, lifecycle: CheckRunLifecycle) -> dict[str, Any] | None:
        payload = job.payload
        gh = self.app.client(payload["installation_id"])
        repo = gh.get_repo(payload["repo"])
        pr = repo.get_pull(payload["number"])
        head_sha = payload["head_sha"]
        if pr.head.sha != head_sha or pr.state != "open":
            return {"skipped": "the pull request moved on (new head or closed)"}
        unreadable: FileUnreadable | None = None
        try:
            text = read_text(repo, CONFIG_PATH, head_sha)
            if text is None:
                return {"skipped": f"no {CONFIG_PATH}"}
        except FileUnreadable as exc:
            text, unreadable = None, exc  # a config is there, but unreadable: the run says so
        if self.gate is not None and (hold := self.gate(repo, pr, payload)) is not None:
            return _held(repo, head_sha, job.key, hold)
        ensure_current()  # a job another worker took over creates no check run here
        if self.sharding is not None:
            split = self.sharding.split_before(job)
            if split is not None:  # its worker died after the split: the shards end the run
                return split
            self.sharding.close_superseded(job, repo, head_sha)
        run = lifecycle.open(repo, job.key, self.status_url and (
            f"{self.status_url}/status/{payload['repo']}/pull/{payload['number']}"))
        started = time.monotonic()
        if text is None:
            assert unreadable is not None
            ctx, config = _unreadable_config(head_sha, unreadable), None
        else:
            ctx, config = self.plan(repo, pr, head_sha, text, payload)
        if config is not None:
            shards = min(config.shards, self.max_shards)
            if shards > 1 and self.sharding is not None:
                result = self.sharding.split(job, ctx, shards)
                if result is None:  # superseded or taken over before the shards were queued
                    return self._cancelled(job, lifecycle)
                lifecycle.hand_over()  # the shards end the check run
                return {**result, "check_run_id": run.id}
            self.check(ctx, config, repo, payload)
        ctx.seconds = time.monotonic() - started
        if self.public_url:
            ctx.full_report_url = f"{self.public_url.rstrip('/')}/reports/{job.id}"
        ensure_current()  # under a worker: superseded or taken over since the sandbox ran
        if not self.queue.is_current(job.id):
            return self._cancelled(job, lifecycle)
        return self.post(pr, lifecycle, ctx)

    def _cancelled(self, job: JobRecord, lifecycle: CheckRunLifecycle) -> dict[str, Any]:
        reason = self._superseded_by(job)
        lifecycle.fail_if_open(reason, Conclusion.CANCELLED)
        return {"skipped": reason}

    def post(self, pr: PullRequest, lifecycle: CheckRunLifecycle, ctx: CheckContext
             ) -> dict[str, Any]:
        """Complete the open check run from ``ctx``, then write the sticky comment."""
        run, output = lifecycle.run, check_output(ctx)
        lifecycle.complete(output)  # whatever fails from here on keeps its conclusion
        log.info("check run %s for %s completed: %s", run.id, ctx.head_sha[:12],
                 output.conclusion.value)
        ensure_current()
        comment_id = _upsert_comment(pr, self.app.bot_login(), comment_body(ctx))
        return {"conclusion": output.conclusion.value, "check_run_id": run.id,
                "comment_id": comment_id, "report": ctx.report.dump() if ctx.report else None,
                "failure": ctx.failure}

    def plan(self, repo: Repository, pr: PullRequest, head_sha: str, text: str,
             payload: dict[str, Any]) -> tuple[CheckContext, RepoConfig | None]:
        """The check's context from the configuration and the changed files, and the
        configuration when the sandbox has specs to run (None: ``ctx`` is final already)."""
        try:
            config = load_config(text, CONFIG_PATH)
        except ConfigError as exc:
            return CheckContext(head_sha, "?", failure=f"{CONFIG_PATH} is invalid: {exc}",
                                advice=f"Fix {CONFIG_PATH} at the line named above; "
                                       "`alignbot config-schema` prints every key it accepts."
                                ), None
        files = list(pr.get_files())
        changed = [f.filename for f in files]
        specs = _specs(config, changed, payload)
        ctx = CheckContext(head_sha, _describe(config), specs=specs,
                           patches={f.filename: f.patch or "" for f in files},
                           op_files_for=_op_files_for(config, changed),
                           tracker=config.upstream.tracker, base_sha=pr.base.sha,
                           strict_known=config.known.strict)
        if not specs:
            ctx.report = empty_report()
            return ctx, None
        return ctx, config

    def check(self, ctx: CheckContext, config: RepoConfig, repo: Repository,
              payload: dict[str, Any], read_known: bool = True) -> None:
        """Run the sandboxed check of ``ctx.specs`` (shard ``payload["shard"]`` of
        ``payload["shards"]``, when given): ``ctx.report``, or ``ctx.failure`` with advice.
        With ``read_known``, the head's known-divergences file marks the findings and a
        malformed one fails the check; the status job reads the file itself, after the run."""
        head_sha = ctx.head_sha
        known, problem = known_file(repo, head_sha) if read_known else (None, None)
        if problem is not None:
            ctx.failure, ctx.advice = problem, (
                f"Fix {KNOWN_PATH} at the line named above: each entry needs a `reason:` and "
                "a `fingerprint:`, an `op:` or a `signature:`.")
            return
        seed, base = check_seed(payload), None
        with tempfile.TemporaryDirectory(prefix="alignbot-pr-", dir=self.work_dir) as tmp:
            root = self._unpacked(ctx, repo, head_sha, payload, Path(tmp) / "head")
            if root is None:
                return
            shard: tuple[int, int] | None = None
            baseline_file: str | None = None
            if payload.get("shards"):
                shard = (int(payload["shard"]), int(payload["shards"]))
            elif config.baseline.enabled and self.merge_base_check and ctx.base_sha:
                base = self.baseline(ctx, config, repo, payload, seed, Path(tmp) / "base")
                ensure_current()  # lost or superseded while the base ran: the head is not run
                if base is not None:
                    (root / BASELINE_FILE).parent.mkdir(parents=True, exist_ok=True)
                    (root / BASELINE_FILE).write_text(json.dumps(base.dump()))
                    baseline_file = BASELINE_FILE
            args = check_args(config, ctx.specs, root, seed, payload.get("n"), shard=shard,
                              baseline=baseline_file,
                              known=KNOWN_PATH if known is not None else None)
            # a newer push (or losing the job) kills the sandbox at once, not at its end
            result = self.sandbox(root, config, args, self.limits, self.containment,
                                  stop=stop_event())
        ctx.isolation, ctx.limits = list(result.isolation), list(result.limits)
        if result.report is not None:
            try:
                ctx.report = parse_report(result.report)
            except InvalidReport as exc:
                ctx.failure = f"the engine's report was invalid: {exc}"
                ctx.advice = INVALID_REPORT_ADVICE
            else:
                if not payload.get("shards") and (ctx.classified is not None or known):
                    against = ctx.classified or Classified()  # the base's sha, or its problem
                    ctx.classified = classify(ctx.report, base, known)
                    ctx.classified.base_sha = against.base_sha
                    ctx.classified.base_problem = against.base_problem
        else:
            ctx.failure = result.reason or "the engine produced no report"
            ctx.advice = ("The pull request's setup commands and spec files run in a sandbox "
                          "without network or secrets; the reason above says what stopped it.")

    def _unpacked(self, ctx: CheckContext, repo: Repository, sha: str, payload: dict[str, Any],
                  folder: Path) -> Path | None:
        """The tree at ``sha`` unpacked under ``folder``; None (with ``ctx.failure``) when
        its archive is refused."""
        folder.mkdir(parents=True)
        try:  # streamed to a file and from it: a large archive is never whole in memory
            with self.app.download(repo.get_archive_link("tarball", sha),
                                   payload["installation_id"], folder=folder) as archive:
                return extract_tarball(archive, folder / "src")
        except ArchiveError as exc:
            ctx.failure = f"the pull request's archive was refused: {exc}"
            ctx.advice = ("alignbot unpacks only plain files and folders, and links that "
                          "stay inside the repository.")
            return None

    def baseline(self, ctx: CheckContext, config: RepoConfig, repo: Repository,
                 payload: dict[str, Any], seed: int, folder: Path) -> EngineReport | None:
        """The same check (specs, seed, draws, candidate) on the pull request's merge base:
        cached by base, configuration and candidate, else run in the sandbox now and kept.
        Sets ``ctx.classified`` to say which base, or why there is none."""
        ctx.classified = Classified()
        try:
            base_sha = repo.compare(ctx.base_sha, ctx.head_sha).merge_base_commit.sha
        except GithubException as exc:
            if is_transient(exc):
                raise
            ctx.classified.base_problem = f"GitHub gave no merge base ({exc.status})"
            return None
        ctx.classified.base_sha = base_sha
        key = baselines.cache_key(config, ctx.specs, seed, payload.get("n"))
        if self.engine is not None and (hit := baselines.cached(
                self.engine, payload["repo"], base_sha, key)) is not None:
            return hit
        started = time.monotonic()
        failed = CheckContext(base_sha, ctx.candidate)
        root = self._unpacked(failed, repo, base_sha, payload, folder)
        if root is None:
            ctx.classified.base_problem = failed.failure
            return None
        # as drawn: the head's check replays the program that showed a finding here to
        # tell a fix from a draw that missed it, and minimizes only what is new
        args = check_args(config, ctx.specs, root, seed, payload.get("n"), minimize=False)
        result = self.sandbox(root, config, args, self.limits, self.containment,
                              stop=stop_event())
        try:
            report = parse_report(result.report) if result.report is not None else None
        except InvalidReport as exc:
            report, result.reason = None, f"its report was invalid: {exc}"
        if report is None or not report.complete:
            ctx.classified.base_problem = (result.reason or "the run was cut short")[:300]
            return None
        if self.engine is not None:
            baselines.store(self.engine, payload["repo"], base_sha, key, report,
                            time.monotonic() - started)
        return report


def known_file(repo: Repository, head_sha: str) -> tuple[KnownFile | None, str | None]:
    """The head's known divergences (None without the file), or why it is refused."""
    try:
        text = read_text(repo, KNOWN_PATH, head_sha)
    except FileUnreadable as exc:
        return None, f"{KNOWN_PATH}: {exc}"
    if text is None:
        return None, None
    try:
        return load_known(text, KNOWN_PATH), None
    except KnownFileError as exc:
        return None, f"{KNOWN_PATH} is invalid: {exc}"


def _unreadable_config(head_sha: str, error: FileUnreadable) -> CheckContext:
    """The check of a head whose configuration GitHub will not hand over as a file."""
    if isinstance(error, FileTooLarge):
        return CheckContext(head_sha, "?", failure=TOO_LARGE, advice=(
            f"Keep {CONFIG_PATH} small: it names the candidate, the op files and their "
            "specs; the specs themselves belong in the repository's own files."))
    return CheckContext(head_sha, "?", failure=str(error), advice=error.advice)


def _held(repo: Repository, head_sha: str, key: str, hold: Hold) -> dict[str, Any]:
    """The gate keeps this head from running: its check run says why and what to do (a hold
    without a title, e.g. ``trust.outside_contributors: skip``, posts none)."""
    if hold.title is not None:
        ensure_current()  # a job another worker took over posts nothing
        run = open_check_run(repo, head_sha, key)
        run.edit(status="completed", conclusion=hold.conclusion,
                 output={"title": hold.title, "summary": hold.summary})
    return {"skipped": hold.reason}


def _describe(config: RepoConfig) -> str:
    """The candidate in one line: its preset, or the line of its prelude that says what it
    is (``import torchax``, not ``import torch``)."""
    candidate = config.candidate
    return candidate.preset or candidate_line(candidate.prelude or "")[:80]


def _op_files_for(config: RepoConfig, changed: list[str]) -> dict[str, list[str]]:
    """Spec glob -> the changed op files mapped to it, for annotations."""
    mapping: dict[str, list[str]] = {}
    for entry in config.ops:
        files = [path for path in changed if entry.matches(path)]
        for spec_glob in entry.specs:
            known = mapping.setdefault(spec_glob, [])
            known.extend(f for f in files if f not in known)
    return mapping


def _specs(config: RepoConfig, changed: list[str], payload: dict[str, Any]) -> list[str]:
    """The spec globs to run: the ones ``/align`` named, every mapped one (``all_ops``), or
    those mapped from the changed files."""
    if payload.get("ops"):
        return [str(op) for op in payload["ops"]]
    if payload.get("all_ops"):
        return list(dict.fromkeys(spec for entry in config.ops for spec in entry.specs))
    return config.specs_for(changed)


def app_removed(engine: Engine | None, job: JobRecord, what: str = "") -> dict[str, Any] | None:
    """``{"skipped": …}`` when ``engine`` records the job's installation as gone (removed or
    suspended): nothing is checked and nothing posted; else None. ``what`` names a shard."""
    gone = None if engine is None else installation_gone(engine, job.payload["installation_id"])
    if gone is None:
        return None
    log.info("job %d (%s%s): not checked, the App was %s", job.id, job.key,
             f", {what}" if what else "", gone)
    return {"skipped": f"the App was {gone}"}


def failed_reason(error: Exception, what: str) -> str:
    """The one line of a check run that an unexpected error ended: which error, on ``what``
    (this head, or a shard of it)."""
    if isinstance(error, JobTimedOut):
        return (f"alignbot stopped checking {what}: it ran past the job timeout "
                f"({error.seconds:g} s)")
    return (f"alignbot failed while checking {what} ({type(error).__name__}); the service's "
            "log has the details")


def _upsert_comment(pr: PullRequest, login: str, body: str) -> int:
    """One comment per pull request: the app's comment that starts with the marker (see
    ``bot/markers.py``), edited only if changed."""
    return upsert_marked(pr, login, MARKER, body)
