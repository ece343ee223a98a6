"""The webhook side of the slash-commands: parse a comment or review and queue one ``command``
job with its command lines. It must not touch the database or the network: the job does."""

from __future__ import annotations

from typing import Any

from ..jobs import COMMAND as JOB_KIND
from ..markers import is_bot_account
from ..queue import JobRequest
from ..webhooks import Event, WebhookRouter, require
from .parser import MAX_COMMANDS, command_lines, new_command_lines


def _request(event: Event, source: str, source_id: int, number: int, actor: str,
             created_at: str | None, lines: list[str], commit_id: str | None = None
             ) -> JobRequest:
    """The ``command`` job for one comment or review: at most ``MAX_COMMANDS`` lines, and how
    many more there were (``ignored``; the reply says so). ``created_at`` (when the comment
    was written) and a review's ``commit_id`` say which head a go-ahead is for."""
    repo = require(event.payload, "repository", "full_name", kind=str)
    installation = require(event.payload, "installation", "id", kind=int)
    return JobRequest(kind=JOB_KIND, key=f"{repo}#{number}/{source}/{source_id}", payload={
        "installation_id": installation, "repo": repo, "number": number,
        "source": source, "source_id": source_id, "actor": actor,
        "created_at": created_at, "commands": lines[:MAX_COMMANDS],
        "ignored": max(0, len(lines) - MAX_COMMANDS), "delivery_id": event.delivery_id,
        "commit_id": commit_id})


def _optional(mapping: dict[str, Any], key: str, kind: type) -> Any:
    """``mapping[key]`` if it is there and of ``kind``; None if it is missing or null;
    ``PayloadError`` if it is something else."""
    if mapping.get(key) is None:
        return None
    return require(mapping, key, kind=kind)


def on_issue_comment(event: Event) -> list[JobRequest]:
    """``issue_comment`` created or edited on a pull request: its new command lines."""
    comment = require(event.payload, "comment", kind=dict)
    issue = require(event.payload, "issue", kind=dict)
    sender = _optional(event.payload, "sender", dict)
    if "pull_request" not in issue or is_bot_account(comment.get("user")) or is_bot_account(sender):
        return []
    body = _optional(comment, "body", str) or ""
    if event.action == "edited":
        changes = _optional(event.payload, "changes", dict) or {}
        before = _optional(changes, "body", dict) or {}
        previous = _optional(before, "from", str)
        if previous is None:  # the edit did not touch the body
            return []
        lines = new_command_lines(body, previous)
    else:
        lines = command_lines(body)
    if not lines:
        return []
    # For an edit the sender wrote the new lines (a maintainer may edit others' comments).
    actor = (_optional(sender, "login", str) if sender else None) \
        or require(comment, "user", "login", kind=str)
    return [_request(event, "comment", require(comment, "id", kind=int),
                     require(issue, "number", kind=int), actor,
                     _optional(comment, "created_at", str), lines)]


def on_review(event: Event) -> list[JobRequest]:
    """``pull_request_review`` submitted: the command lines of the review's body."""
    review = require(event.payload, "review", kind=dict)
    sender = _optional(event.payload, "sender", dict)
    if is_bot_account(review.get("user")) or is_bot_account(sender):
        return []
    lines = command_lines(_optional(review, "body", str) or "")
    if not lines:
        return []
    number = require(event.payload, "pull_request", "number", kind=int)
    return [_request(event, "review", require(review, "id", kind=int), number,
                     require(review, "user", "login", kind=str),
                     _optional(review, "submitted_at", str), lines,
                     _optional(review, "commit_id", str))]


def register(router: WebhookRouter) -> None:
    router.on("issue_comment", "created", "edited")(on_issue_comment)
    router.on("pull_request_review", "submitted")(on_review)
