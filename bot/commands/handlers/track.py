"""``/track URL``: a maintainer adds an issue or pull request to the weekly upstream watch of
this repository, listed in the digest of its ``upstream.tracking_repo`` when this
installation may write there (``alignbot.bot.tenancy``)."""

from __future__ import annotations

from typing import Any

from ...tenancy import Access, Grant, NotAllowed, authorize
from ..context import Outcome, Reaction, Refusal, Request, Services, refused
from ..parser import TrackCommand, parse_item_url
from ..state import register_upstream, upstream_item


def track(services: Services, request: Request, command: TrackCommand) -> Outcome:
    if not request.can_write:
        return refused(Refusal.NEEDS_WRITE)
    item = parse_item_url(command.url)
    assert item is not None
    upstream = authorize(request.tenant, item.repo, Access.READ)  # read with our own token
    assert isinstance(upstream, Grant)  # parse_item_url takes only names tenancy reads
    tracking, refusal = _tracking(request)
    values: dict[str, Any] = {"url": item.url, "existing": None, "refusal": refusal}
    if register_upstream(services.engine, url=item.url, repo=upstream.repo,
                         number=item.number, kind=item.kind, registered_by=request.actor,
                         pr_repo=request.repo_name, pr_number=request.number,
                         tracking_repo=tracking):
        if refusal is None:
            return Outcome(True, Reaction.DONE, values={"url": item.url})
        return Outcome(True, Reaction.DONE, "command_track.md.j2", {**values, "new": True})
    existing = upstream_item(services.engine, item.url, request.repo_name)
    if existing is not None and isinstance(
            authorize(request.tenant, str(existing.pr_repo), Access.SHOW), Grant):
        values["existing"] = dict(existing._mapping)
    return Outcome(True, None, "command_track.md.j2", {**values, "new": False})


def _tracking(request: Request) -> tuple[str | None, NotAllowed | None]:
    """The configured tracking repository as GitHub names it, if this installation may write
    its digest there; else None and why not."""
    tracking = request.config.upstream.tracking_repo if request.config else None
    if tracking is None:
        return None, None
    granted = authorize(request.tenant, tracking, Access.WRITE, request.app)
    if isinstance(granted, NotAllowed):
        return None, granted
    return granted.repo, None
