"""Sharded checks: an ``align`` job splits a long check into ``align-shard`` jobs that any
worker claims; the shard that stores the last report merges them into the one report the whole
check would have written, and completes the one check run and the one sticky comment."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, cast

from github.PullRequest import PullRequest
from github.Repository import Repository

from alignbot.checks.api import Report, ShardError, merge_shards, select_shard

from .alignment import INVALID_REPORT_ADVICE, AlignmentJob, app_removed, failed_reason, known_file
from .baseline import classify
from .check_run import CheckRunLifecycle, ended_on_failure
from .config import CONFIG_PATH
from .engine_report import EngineReport, InvalidReport, parse_report
from .github import FileTooLarge, read_text, transient_failures
from .jobs import ALIGN_SHARD
from .output import CheckContext, Conclusion
from .queue import JobRecord, JobRequest
from .seeds import check_seed
from .shard_groups import Group, ShardGroups
from .storage import GroupEnd, utcnow
from .worker import current_worker, ensure_current

log = logging.getLogger(__name__)

JOB_KIND = ALIGN_SHARD


def label(job: JobRecord) -> str:
    return f"shard {int(job.payload['shard'])}/{int(job.payload['shards'])}"


@dataclass
class Sharding:
    """What an ``align`` job does with a sharded check (``AlignmentJob.sharding``)."""

    groups: ShardGroups

    def split(self, job: JobRecord, ctx: CheckContext, shards: int) -> dict[str, Any] | None:
        """Queue ``shards`` shard jobs of ``ctx.specs``; None when ``job`` no longer runs."""
        requests = [JobRequest(kind=JOB_KIND, key=job.key, payload={
            **job.payload, "ops": ctx.specs, "parent": job.id, "shard": index,
            "shards": shards}) for index in range(1, shards + 1)]
        ids = self.groups.split(job, current_worker(), requests)
        if ids is None:
            return None
        log.info("job %d (%s): split into %d shard jobs %s", job.id, job.key, shards, ids)
        return {"sharded": shards, "shard_jobs": ids}

    def split_before(self, job: JobRecord) -> dict[str, Any] | None:
        """What ``split`` returned, when ``job`` split its check before (and then its worker
        died): the job is done, and must not set the check run in progress again."""
        group = self.groups.get(job.id)
        return None if group is None else {"sharded": len(group.jobs), "shard_jobs": group.jobs}

    def close_superseded(self, job: JobRecord, repo: Repository, newer: str) -> None:
        """End the earlier sharded checks of ``job``'s key, which ``job`` superseded: a
        shard still running cancels its check run itself; this covers shards superseded
        before any ran. The check run of ``job``'s own head is ``job``'s to reuse."""
        for group in self.groups.unended(job.key, before=job.id):
            if not self.groups.end(group.parent_id, GroupEnd.CANCELLED, job.id):
                continue
            if group.head_sha == job.payload["head_sha"]:
                continue
            CheckRunLifecycle.found(repo, group.head_sha, job.key).fail_if_open(
                f"superseded by {newer[:12]}", Conclusion.CANCELLED)


@dataclass
class ShardJob:
    """Runs one ``align-shard`` job: the sandboxed check of its shard of the specs, with the
    check's own configuration, seed and draws.

    Only the shard that ends the group (``ShardGroups``: merged, failed or cancelled, set
    once) writes to GitHub, and every write is idempotent (the check run by external id, the
    comment by marker): a shard run again after its worker died posts nothing twice."""

    check: AlignmentJob
    groups: ShardGroups

    def __call__(self, job: JobRecord) -> dict[str, Any] | None:
        payload = job.payload
        check = self.check
        if (skipped := app_removed(check.engine, job, label(job))) is not None:
            return skipped
        group = self.groups.get(int(payload["parent"]))
        if group is None or job.id not in group.jobs or \
                group.jobs.index(job.id) + 1 != int(payload["shard"]) or \
                len(group.jobs) != int(payload["shards"]):
            return {"skipped": "not a shard of a check this service split"}
        if group.ended is not None and group.ended_by != job.id:
            return {"skipped": f"its check ended ({group.ended})"}
        lifecycle = CheckRunLifecycle(payload["head_sha"])
        with ended_on_failure(lifecycle, functools.partial(self._ended_by, job, group)), \
                transient_failures(check.app, payload["installation_id"]):
            return self._run(job, group, lifecycle)

    def _ended_by(self, job: JobRecord, group: Group, error: Exception, superseded: bool
                  ) -> str | None:
        """The line that ends the check run after ``error``, when this shard ends the group
        (set once: a shard that did not end it writes nothing); else None."""
        how = GroupEnd.CANCELLED if superseded else GroupEnd.FAILED
        if not self.groups.end(group.parent_id, how, job.id):
            return None
        return self.check._superseded_by(job) if superseded else failed_reason(
            error, f"{label(job)} of this head")

    def give_up(self, job: JobRecord, reason: str) -> None:
        """The shard failed for good: the check fails, with which shard and why."""
        if self.groups.end(int(job.payload["parent"]), GroupEnd.FAILED, job.id):
            self.check.give_up(job, f"{label(job)}: {reason}")

    def _run(self, job: JobRecord, group: Group, lifecycle: CheckRunLifecycle
             ) -> dict[str, Any] | None:
        payload = job.payload
        head_sha = payload["head_sha"]
        repo = self.check.app.client(payload["installation_id"]).get_repo(payload["repo"])
        pr = repo.get_pull(payload["number"])
        if pr.head.sha != head_sha or pr.state != "open":
            # closed, or pushed to: no later job of this head may end the check run
            ensure_current()
            if self.groups.end(group.parent_id, GroupEnd.CANCELLED, job.id):
                lifecycle.attach(repo, job.key)
                lifecycle.fail_if_open(self.check._superseded_by(job), Conclusion.CANCELLED)
            return {"skipped": "the pull request moved on (new head or closed)"}
        ensure_current()
        lifecycle.attach(repo, job.key)
        try:
            text = read_text(repo, CONFIG_PATH, head_sha)
        except FileTooLarge:
            text = None
        if text is None:
            return self._end_failed(job, pr, lifecycle, CheckContext(
                head_sha, "?", failure=f"{label(job)}: {CONFIG_PATH} is gone or too large"))
        ctx, config = self.check.plan(repo, pr, head_sha, text, payload)
        if config is None:  # the configuration read at the split said otherwise
            ctx.failure = f"{label(job)}: {ctx.failure or 'no spec to check'}"
            return self._end_failed(job, pr, lifecycle, ctx)
        if group.ended is not GroupEnd.MERGED:  # else it merged before it stopped: again
            self.check.check(ctx, config, repo, payload)
            ensure_current()
            if ctx.report is None:
                ctx.failure = f"{label(job)}: {ctx.failure}"
                return self._end_failed(job, pr, lifecycle, ctx)
            if group.ended is GroupEnd.FAILED:  # this shard failed, then GitHub was away
                ctx.report, ctx.failure = None, (
                    f"{label(job)} failed on an earlier run, and the check run could not be "
                    "completed then; this run passed: run the check again")
                return self._end_failed(job, pr, lifecycle, ctx)
            own = {"shard": label(job), "shard_report": ctx.report.dump()}
            merges = self.groups.store(group.parent_id, job.id, current_worker(), own)
            if merges is None:
                ensure_current()
                return {"skipped": "no longer this worker's job"}
            if not merges:
                log.info("job %d (%s): %s stored its report", job.id, job.key, label(job))
                lifecycle.hand_over()  # the shard that stores the last report ends the run
                return own
        results = self.groups.results(group)
        ctx.report = None
        ctx.failure = self._merge(results, ctx, payload)
        if ctx.failure is not None:
            ctx.advice = INVALID_REPORT_ADVICE
        elif ctx.report is not None:  # known divergences apply to the merged report
            known, _ = known_file(repo, head_sha)  # a malformed file failed every shard
            ctx.classified = classify(ctx.report, None, known) if known else None
        ctx.seconds = (utcnow() - group.created_at).total_seconds()
        if self.check.public_url:
            ctx.full_report_url = f"{self.check.public_url.rstrip('/')}/reports/{job.id}"
        ensure_current()
        own = results[group.jobs.index(job.id)] or {}
        return {**self.check.post(pr, lifecycle, ctx), "shard": label(job),
                "shard_report": own.get("shard_report"), "merged": group.jobs}

    def _merge(self, results: list[dict[str, Any] | None], ctx: CheckContext,
               payload: dict[str, Any]) -> str | None:
        """Merge the shards' stored results into ``ctx.report``; what is wrong, or None."""
        seed = check_seed(payload)
        reports = []
        for index, result in enumerate(results, 1):
            try:
                report = parse_report((result or {}).get("shard_report"))
            except InvalidReport as exc:
                return f"the report of shard {index}/{len(results)} was invalid: {exc}"
            if report.seed != seed:
                return (f"the report of shard {index}/{len(results)} is not from this "
                        f"check (seed {report.seed}, expected {seed})")
            reports.append(_mergeable(report))
        try:
            merged: Any = merge_shards(cast(list[Report], reports))
            if merged["complete"]:
                _dealt_as_the_engine_deals(merged["specs"], reports)
            if all(report.exploration is None for report in map(parse_report, reports)):
                merged["exploration"] = None
            ctx.report = parse_report(merged)
        except (ShardError, InvalidReport) as exc:
            return f"the shards' reports do not merge: {exc}"
        return None

    def _end_failed(self, job: JobRecord, pr: PullRequest, lifecycle: CheckRunLifecycle,
                    ctx: CheckContext) -> dict[str, Any]:
        """End the check as failed with ``ctx.failure``, unless another shard ended it."""
        ensure_current()
        if not self.groups.end(int(job.payload["parent"]), GroupEnd.FAILED, job.id):
            lifecycle.hand_over()
            return {"skipped": "another shard ended the check", "failure": ctx.failure}
        return {**self.check.post(pr, lifecycle, ctx), "shard": label(job)}


def _dealt_as_the_engine_deals(names: list[str], reports: list[dict[str, Any]]) -> None:
    """The engine deals the specs in name order, the i-th to shard ``i % N``: a complete
    shard report must list exactly its share of all the shards' specs, so a shard cannot
    speak for another's specs (nor leave its own out) without the merge noticing."""
    for index, report in enumerate(reports, 1):
        share = select_shard(sorted(names), index, len(reports))
        if sorted(report["specs"]) != share:
            raise ShardError(f"shard {index}/{len(reports)} reports specs "
                             f"{', '.join(sorted(report['specs'])) or '(none)'}, but its "
                             f"share is {', '.join(share) or '(none)'}")


def _mergeable(report: EngineReport) -> dict[str, Any]:
    """A validated shard report as ``alignbot.checks.api.merge_shards`` takes it."""
    data = report.dump()
    data["exploration"] = data["exploration"] or []
    return data
