"""The finding a ``/repro`` or ``/upstream`` names, from the latest ``align`` report."""

from __future__ import annotations

from typing import Any

from ...engine_report import checked_finding
from ..context import DEFAULT_TRACKER, Outcome, Refusal, Request, Services, refused
from ..state import latest_report


def finding(services: Services, request: Request, fingerprint: str
            ) -> tuple[str, dict[str, Any]] | Outcome:
    """The head sha of the latest report and its finding ``fingerprint`` (links checked), or
    the refusal to answer with."""
    latest = latest_report(services.queue, request.repo_name, request.number)
    if latest is None:
        return refused(Refusal.NO_REPORT)
    head_sha, findings = latest
    for found in findings:
        if found.get("fingerprint") == fingerprint:
            tracker = (request.config.upstream.tracker if request.config is not None
                       else DEFAULT_TRACKER)
            return head_sha, checked_links(found, tracker)
    known = [str(f.get("fingerprint")) for f in findings]
    return refused(Refusal.UNKNOWN_FINDING, fingerprint=fingerprint, head_sha=head_sha,
                   known=known)


def checked_links(finding: dict[str, Any], tracker: str = DEFAULT_TRACKER) -> dict[str, Any]:
    """The finding without the report's ``upstream_url`` (the report comes out of the sandbox
    that ran the pull request's code) and with ``new_issue_link``, the prefilled link the bot
    builds from ``tracker`` and the draft (``alignbot.bot.engine_report.new_issue_link``)."""
    return checked_finding(finding, tracker)
