"""Weekly reminders on stale pull requests, and the weekly digest of watched upstream items,
swept one repository per ``reminder-sweep`` job.

- ``schedule.py``   the weekly slot of a repository, periods, GitHub's timestamps
- ``api.py``        GitHub for the sweep: the hourly budget, write pacing, GitHub's limits
- ``facts.py``      what a pull request's history says: human activity, who it waits on
- ``codeowners.py`` CODEOWNERS read and matched
- ``render.py``     the reminder and the digest, rendered from templates/
- ``store.py``      the feature's rows: sweep states, reminders sent, settings, upstream items
- ``report.py``     what sweeps did (a job's result, summed for a pass)
- ``sweep.py``      one repository's sweep: listing, follow-ups, posting (``RepoSweep``)
- ``upstream.py``   the sweep's last phase: upstream items and the one weekly digest
- ``job.py``        ``SweepJob`` (the job handler), ``enqueue_due`` (the pass that queues one
                    job per due repository), ``run_inline`` (``alignbot remind-sweep``)

Like every feature, this package imports only the layers (storage, queue, worker, github,
markers, config, lease, jobs, …), never another feature (``tests/test_layers.py``).
"""

from __future__ import annotations

from .api import ApiCallBudget, ApiCallBudgetExhausted, ApiLimits, SweepApi, WritePacer
from .codeowners import OwnerRule, owners_of, parse_codeowners
from .facts import Marker, PullFacts, Waiting, find_markers, is_bot, reminder_marker, waiting_on
from .job import (
    FIRST_PASS_DELAY,
    JOB_KIND,
    PASS_INTERVAL,
    STALE_SWEEP,
    SWEEPS_AT_ONCE,
    DigestBusy,
    SweepJob,
    enqueue_due,
    options_from,
    run_from_settings,
    run_inline,
    sweep_request,
)
from .render import Reminder, render_digest, render_digest_issue
from .report import SweepReport
from .schedule import WEEKDAYS, Schedule, describe_wait, parse_time, search_time
from .store import RepoState, Store, installed_repos
from .sweep import RepoSweep, Skip, SweepHooks, SweepOptions

__all__ = [
    "FIRST_PASS_DELAY",
    "JOB_KIND",
    "PASS_INTERVAL",
    "STALE_SWEEP",
    "SWEEPS_AT_ONCE",
    "WEEKDAYS",
    "ApiCallBudget",
    "ApiCallBudgetExhausted",
    "ApiLimits",
    "DigestBusy",
    "Marker",
    "OwnerRule",
    "PullFacts",
    "Reminder",
    "RepoState",
    "RepoSweep",
    "Schedule",
    "Skip",
    "Store",
    "SweepApi",
    "SweepHooks",
    "SweepJob",
    "SweepOptions",
    "SweepReport",
    "Waiting",
    "WritePacer",
    "describe_wait",
    "enqueue_due",
    "find_markers",
    "installed_repos",
    "is_bot",
    "options_from",
    "owners_of",
    "parse_codeowners",
    "parse_time",
    "reminder_marker",
    "render_digest",
    "render_digest_issue",
    "run_from_settings",
    "run_inline",
    "search_time",
    "sweep_request",
    "waiting_on",
]
