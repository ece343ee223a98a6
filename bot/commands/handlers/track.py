"""``/track URL``: a maintainer adds an issue or pull request to the weekly upstream watch."""

from __future__ import annotations

from ..context import Outcome, Reaction, Refusal, Request, Services, refused
from ..parser import Command, parse_item_url
from ..state import register_upstream, upstream_item


def track(services: Services, request: Request, command: Command) -> Outcome:
    assert command.url is not None
    if not request.can_write:
        return refused(Refusal.NEEDS_WRITE)
    item = parse_item_url(command.url)
    assert item is not None
    tracking = request.config.upstream.tracking_repo if request.config else None
    if register_upstream(services.engine, url=item.url, repo=item.repo, number=item.number,
                         kind=item.kind, registered_by=request.actor,
                         pr_repo=request.repo_name, pr_number=request.number,
                         tracking_repo=tracking):
        return Outcome(True, Reaction.DONE, values={"url": item.url})
    existing = upstream_item(services.engine, item.url)
    return Outcome(True, None, "command_track.md.j2",
                   {"url": item.url, "existing": dict(existing._mapping) if existing
                    else None})
