"""Phase 3 of a repository's sweep, the upstream watch: the repository's watched upstream issues
and pull requests (``/upstream … file``, ``/track URL``) are read once a week, and the digest in
``upstream.tracking_repo`` is updated."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import requests
from github import GithubException

from ..markers import find_marked
from ..storage import UpstreamState
from ..tenancy import Access, Directory, Grant, NotAllowed, Tenant, authorize
from .api import SweepApi
from .render import DIGEST_MARKER, DIGEST_TITLE, render_digest, render_digest_issue
from .report import SweepReport
from .schedule import Schedule, parse_time, search_time
from .store import RepoState, Store

DigestLock = Callable[[str], AbstractContextManager[object]]  # held while a digest is written


def no_lock(tracking: str) -> AbstractContextManager[object]:
    """The digest lock of a sweep that runs alone."""
    return nullcontext()


@dataclass
class UpstreamWatch:
    """Checks a repository's due upstream items and writes the tracking repository's digest.

    Tenancy (``alignbot.bot.tenancy``): everything is read and written with the swept repository's
    own installation (``api``); the tracking repository is written only when it is held by
    that installation under the same owner (asked of GitHub each time: a renamed or
    transferred one is followed), and its digest lists only that owner's items.

    Invariant: one digest comment per tracking repository and period. Sweeps of several
    repositories feed the same digest and run as parallel jobs, so the comment is looked for
    (by its marker) and written under ``digest_lock(tracking repo)``, and always rendered from
    every repository's items. A sweep that checked items notes it in its cursor first, so a
    sweep stopped before its digest writes it when it resumes.
    """

    store: Store
    api: SweepApi
    bot_login: str
    clock: Callable[[], datetime]
    guard: Callable[[], None]
    report: SweepReport
    directory: Directory  # what GitHub says of a repository before it is written
    digest_lock: DigestLock

    def run(self, state: RepoState, tracking: str | None, schedule: Schedule,
            slot: datetime) -> None:
        tenant = Tenant(state.installation_id, state.repo)
        target = self._tracking(state, tenant, tracking) if tracking else None
        due = self.store.upstream_due(state.repo, slot)
        if due and target:
            state.cursor["digest"] = True
            self.store.save(state)
        for item in due:
            self.guard()
            self._check(tenant, item, target.repo if target else None)
        if target and state.cursor.get("digest"):
            with self.digest_lock(target.repo):
                self._digest(state, tenant, target,
                             schedule.period_day(slot).isoformat(), slot)
            state.cursor["digest"] = False

    def _tracking(self, state: RepoState, tenant: Tenant, tracking: str) -> Grant | None:
        """``upstream.tracking_repo``, if this installation may write there (else the
        sweep's state says why, and no digest is written)."""
        granted = authorize(tenant, tracking, Access.WRITE, self.directory)
        if isinstance(granted, NotAllowed):
            state.error = f"no digest: {granted} (upstream.tracking_repo)"
            return None
        return granted

    def _check(self, tenant: Tenant, item: dict[str, Any], tracking: str | None) -> None:
        now = self.clock()
        values: dict[str, Any] = {"last_checked": now, "tracking_repo": tracking}
        upstream = authorize(tenant, str(item["repo"]), Access.READ)
        try:
            if isinstance(upstream, NotAllowed):
                raise ValueError(str(upstream))
            data = self.api.get(f"/repos/{upstream.repo}/issues/{item['number']}")
        except (GithubException, requests.RequestException, ValueError) as exc:
            status = getattr(exc, "status", None)
            reason = f"HTTP {status}" if status else type(exc).__name__
            values["note"] = f"could not be read ({reason})"
            self.store.update_upstream(item["id"], **values)
            self.report.upstream_checked += 1
            return
        merged = (data.get("pull_request") or {}).get("merged_at")
        state = UpstreamState.MERGED if merged else (
            UpstreamState.OPEN if data.get("state") == "open" else UpstreamState.CLOSED)
        values.update(state=state.value, note=None,
                      last_activity=parse_time(data.get("updated_at")))
        self.store.update_upstream(item["id"], **values)
        self.report.upstream_checked += 1


    def _digest(self, state: RepoState, tenant: Tenant, target: Grant, period: str,
                slot: datetime) -> None:
        api, tracking = self.api, target.repo
        items = [item for item in self.store.digest_items(tracking)
                 if isinstance(authorize(tenant, str(item["pr_repo"]), Access.SHOW), Grant)]
        body = render_digest(items, period, slot, self.clock())
        issue = self.store.digest_issue(tracking)
        if issue is None:
            self.guard()
            created = api.post(f"/repos/{tracking}/issues", {
                "title": DIGEST_TITLE, "body": render_digest_issue()})
            issue = int(created["number"])
            self.store.set_digest_issue(tracking, target.installation_id, issue)
        path = f"/repos/{tracking}/issues/{issue}/comments"
        existing = None
        pages = api.pages(path, {"since": search_time(slot)})
        for comment, match in find_marked(pages, self.bot_login, DIGEST_MARKER):
            if match.group(1) == period:
                existing = comment
        self.guard()
        if existing is None:
            comment = api.post(path, {"body": body})
        elif existing.get("body") != body:
            comment = api.patch(f"/repos/{tracking}/issues/comments/{existing['id']}",
                                {"body": body})
        else:
            comment = existing
        self.report.digests.append((tracking, int(comment["id"])))
