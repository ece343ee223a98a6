"""The kinds of job in the queue, named once: a feature queues another feature's job (``/align``
queues an ``align`` job) or reads its results by kind, never by importing that feature."""

from __future__ import annotations

ALIGN = "align"  # bot/alignment.py: a sandboxed check of a pull request's head
ALIGN_SHARD = "align-shard"  # bot/sharding.py: one shard of a check split by an ``align`` job
COMMAND = "command"  # bot/commands/: the slash-commands of one comment or review
REMINDER_SWEEP = "reminder-sweep"  # bot/reminders/: the weekly sweep of one repository
