"""``/upstream FINGERPRINT [file]``: reply with the finding's upstream draft; with ``file``, a
maintainer opens (once per tracking repository and finding) an issue in the configured
tracking repository, which this installation must hold under the same owner
(``alignbot.bot.tenancy``), and the issue joins the weekly upstream watch."""

from __future__ import annotations

from typing import Any

from github import GithubException
from sqlalchemy import delete, select, update

from ...markers import first_marked
from ...output import safe_title
from ...storage import FILINGS, transaction, utcnow
from ...tenancy import Access, NotAllowed, authorize
from ..context import Outcome, Reaction, Refusal, Request, Services, refused, render
from ..parser import UpstreamCommand
from ..state import register_upstream
from .findings import finding


def upstream(services: Services, request: Request, command: UpstreamCommand) -> Outcome:
    found = finding(services, request, command.fingerprint)
    if isinstance(found, Outcome):
        return found
    head_sha, checked = found
    if not checked.get("upstream_draft"):
        return refused(Refusal.NO_DRAFT, fingerprint=command.fingerprint,
                       verdict=checked.get("verdict") or "not triaged")
    values = {"finding": checked, "head_sha": head_sha, "filed": None}
    if not command.file:
        return Outcome(True, Reaction.DONE, "command_upstream.md.j2", values)
    if not request.can_write:
        return refused(Refusal.NEEDS_WRITE)
    tracking = request.config.upstream.tracking_repo if request.config else None
    if tracking is None:
        return refused(Refusal.NO_TRACKING_REPO)
    granted = authorize(request.tenant, tracking, Access.WRITE, request.app)
    if isinstance(granted, NotAllowed):
        return refused(Refusal.FOREIGN_TRACKING_REPO, tracking=tracking,
                       owner=request.tenant.owner, denial=granted.denial)
    tracking = granted.repo  # where GitHub says it is now
    filed = _file(services, request, tracking, checked)
    if isinstance(filed, Outcome):
        return filed
    if filed["url"]:  # watched weekly, listed in the digest (a re-run registers nothing new)
        register_upstream(services.engine, url=str(filed["url"]), repo=tracking,
                          number=int(filed["number"]), kind="issue",
                          registered_by=request.actor, pr_repo=request.repo_name,
                          pr_number=request.number, tracking_repo=tracking)
    return Outcome(True, Reaction.DONE, "command_upstream.md.j2", {**values, "filed": filed})


def _file(services: Services, request: Request, tracking: str, finding: dict[str, Any]
          ) -> dict[str, Any] | Outcome:
    """The tracking issue for this finding: the one already opened, or a new one."""
    fingerprint = str(finding["fingerprint"])
    keys = (FILINGS.c.tracking_repo == tracking, FILINGS.c.fingerprint == fingerprint)
    with transaction(services.engine) as conn:
        row = conn.execute(select(FILINGS).where(*keys)).first()
        if row is None:
            conn.execute(FILINGS.insert().values(
                tracking_repo=tracking, fingerprint=fingerprint, repo=request.repo_name,
                number=request.number, filed_by=request.actor, filed_at=utcnow()))
    if row is not None and row.issue_number is not None:
        return {"repo": tracking, "number": row.issue_number, "url": row.issue_url,
                "new": False}
    marker = f"<!-- alignbot:upstream {fingerprint} -->"
    title = safe_title(str(finding.get("upstream_title")
                           or f"{finding['kind']} at {finding['op']}"))
    body = render("command_upstream_issue.md.j2", marker=marker, finding=finding,
                  source=request.repo_name, number=request.number)
    try:
        # a row without an issue: a job that stopped half-way may have opened it already
        issue = (_find_issue(request, tracking, fingerprint, marker) if row is not None
                 else None)
        if issue is None:
            issue = request.gh.get_repo(tracking).create_issue(title, body)
    except GithubException as exc:
        with transaction(services.engine) as conn:
            conn.execute(delete(FILINGS).where(*keys, FILINGS.c.issue_number.is_(None)))
        return refused(Refusal.FILING_FAILED, tracking=tracking, status=exc.status)
    with transaction(services.engine) as conn:
        conn.execute(update(FILINGS).where(*keys).values(issue_number=issue.number,
                                                         issue_url=issue.html_url))
    return {"repo": tracking, "number": issue.number, "url": issue.html_url, "new": True}


def _find_issue(request: Request, tracking: str, fingerprint: str, marker: str) -> Any:
    """An issue the app opened in ``tracking`` whose body has ``marker``, or None."""
    found = request.gh.search_issues(f"repo:{tracking} is:issue {fingerprint}")
    return first_marked(found, request.app.bot_login(), marker)
