"""The kinds of job in the queue, named once: a feature queues another feature's job (``/align``
queues an ``align`` job) or reads its results by kind, never by importing that feature."""

from __future__ import annotations

from typing import Any

from .queue import JobRequest

ALIGN = "align"  # bot/alignment.py: a sandboxed check of a pull request's head
ALIGN_SHARD = "align-shard"  # bot/sharding.py: one shard of a check split by an ``align`` job
COMMAND = "command"  # bot/commands/: the slash-commands of one comment or review
REMINDER_SWEEP = "reminder-sweep"  # bot/reminders/: the weekly sweep of one repository
STATUS = "status"  # bot/status/: the whole check of a default branch's pushed commit


def align_job(repo: str, number: int, payload: dict[str, Any]) -> JobRequest:
    """The ``align`` job of pull request ``repo#number``: a newer one supersedes it, and the
    shard jobs it split its check into."""
    return JobRequest(kind=ALIGN, key=f"{repo}#{number}", payload=payload, supersede=True,
                      supersedes=(ALIGN_SHARD,))


def status_job(repo: str, branch: str, payload: dict[str, Any]) -> JobRequest:
    """The ``status`` job of ``repo``'s default branch ``branch``: a newer push supersedes
    it, so that only the branch's latest commit waits to be checked."""
    return JobRequest(kind=STATUS, key=f"{repo}@{branch}", payload=payload, supersede=True)
