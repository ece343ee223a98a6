"""Slash-commands in pull-request comments and reviews: parsed in the webhook, acted on in a
``command`` job (permissions, database state, GitHub calls), answered from templates/.

A command is a line that starts with ``/alignbot <command>`` or a short form (``/align``,
``/repro``, ``/upstream``, ``/track``, ``/remind``, ``/ok-to-test``, ``/help``) in a top-level
paragraph of the comment parsed as CommonMark. The webhook handler only parses (it must not
touch the database or the network) and queues one job per comment or review with the command
lines that are new (for an edit: not in the previous body), at most ``MAX_COMMANDS`` of them.
The job decides each line once and posts one reply per comment or review (``job.py``).

- ``parser.py``    which lines are commands and what each says (pure: no I/O)
- ``webhook.py``   ``issue_comment`` and ``pull_request_review`` → one ``command`` job
- ``context.py``   the handlers' common interface: ``Request``, ``Services``, ``Outcome``,
                   ``Refusal``, ``Handler``
- ``state.py``     the tables the commands read and write (replies, uses, upstream watch)
- ``job.py``       ``CommandJob``: decide each line once, deliver one reply
- ``handlers/``    one module per command; ``handle`` picks one by the command record's type

Like every feature, this package imports only the layers (storage, queue, github, markers,
config, policy, jobs, …), never another feature (``tests/test_layers.py``).
"""

from __future__ import annotations

from ..jobs import COMMAND as JOB_KIND
from ..storage import REPLIES
from .context import (
    DEFAULT_TRACKER,
    WRITE_PERMISSIONS,
    CountedUse,
    Handler,
    Outcome,
    RateLimit,
    Reaction,
    Refusal,
    Request,
    Services,
    refused,
    reply_marker,
)
from .handlers import handle
from .job import CommandJob
from .parser import (
    MAX_BODY,
    MAX_COMMANDS,
    MAX_DRAWS,
    MAX_OPS,
    MAX_SEED,
    MAX_SNOOZE,
    PREFIX,
    SHORT_FORMS,
    AlignCommand,
    Command,
    HelpCommand,
    ItemUrl,
    Malformed,
    Name,
    OkToTestCommand,
    Problem,
    RemindCommand,
    ReproCommand,
    TrackCommand,
    UpstreamCommand,
    command_lines,
    new_command_lines,
    parse_duration,
    parse_item_url,
    parse_line,
)
from .state import (
    ignored_hash,
    latest_report,
    line_hash,
    register_upstream,
    reminder_settings,
    upstream_item,
)
from .webhook import on_issue_comment, on_review, register

__all__ = [
    "DEFAULT_TRACKER",
    "JOB_KIND",
    "MAX_BODY",
    "MAX_COMMANDS",
    "MAX_DRAWS",
    "MAX_OPS",
    "MAX_SEED",
    "MAX_SNOOZE",
    "PREFIX",
    "REPLIES",  # tests reach the table through here, as before the split
    "SHORT_FORMS",
    "WRITE_PERMISSIONS",
    "AlignCommand",
    "Command",
    "CommandJob",
    "CountedUse",
    "Handler",
    "HelpCommand",
    "ItemUrl",
    "Malformed",
    "Name",
    "OkToTestCommand",
    "Outcome",
    "Problem",
    "RateLimit",
    "Reaction",
    "Refusal",
    "RemindCommand",
    "ReproCommand",
    "Request",
    "Services",
    "TrackCommand",
    "UpstreamCommand",
    "command_lines",
    "handle",
    "ignored_hash",
    "latest_report",
    "line_hash",
    "new_command_lines",
    "on_issue_comment",
    "on_review",
    "parse_duration",
    "parse_item_url",
    "parse_line",
    "refused",
    "register",
    "register_upstream",
    "reminder_settings",
    "reply_marker",
    "upstream_item",
]
