"""alignbot's database: every table, defined once, with the states its columns hold.

- ``base.py``          ``Base`` (one MetaData for every table), ``UtcDateTime``, ``BigId``
- ``engine.py``        engines for SQLite or PostgreSQL, ``transaction``
- ``upsert.py``        insert-or-update and insert-or-ignore, on SQLite and PostgreSQL alike
- ``migrate.py``       ``migrate(engine)``: Alembic's ``upgrade head``, adopting a database
                       created before migrations; ``migrations/`` holds the revisions
- ``deliveries.py``    webhook deliveries
- ``jobs.py``          the job queue's rows and ``JobState``
- ``installations.py`` GitHub App installations
- ``commands.py``      slash-command replies and rate-limited uses
- ``reminders.py``     reminders sent, sweep cursors (``Phase``), API budgets, PR settings
- ``upstream.py``      watched upstream items (``UpstreamState``) and filed issues
- ``trust.py``         ``/ok-to-test`` go-aheads
- ``locks.py``         named leases (``bot/lease.py``: the upstream digest's)
- ``shards.py``        checks split into shard jobs (``GroupEnd``: how each ended)
- ``status.py``        the default branch's checks per commit, their results (``StatusOutcome``)
- ``baselines.py``     checks run on a pull request's merge base, cached
"""

from .base import Base, BigId, UtcDateTime, utcnow
from .baselines import BASELINES, BaselineReport
from .commands import REPLIES, USES, CommandReply, CommandUse
from .deliveries import DELIVERIES, Delivery
from .engine import FairLock, database_url, make_engine, transaction
from .installations import INSTALLATIONS, InstallationRow, installation_gone
from .jobs import ACTIVE_STATES, JOBS, Job, JobState
from .locks import LOCKS, SweepLock
from .migrate import SchemaMismatch, current_revision, migrate
from .reminders import (
    CALLS,
    PR_SETTINGS,
    SENT,
    SWEEPS,
    Phase,
    PrReminderSettings,
    ReminderApiCalls,
    ReminderKind,
    ReminderSent,
    ReminderSweep,
)
from .shards import SHARD_GROUPS, GroupEnd, ShardGroup
from .status import STATUS_RESULTS, STATUS_RUNS, RunState, StatusOutcome, StatusResult, StatusRun
from .trust import OK_TO_TEST, OkToTest
from .upsert import insert_ignore, upsert
from .upstream import FILINGS, UPSTREAM, UpstreamFiling, UpstreamItem, UpstreamState

__all__ = [
    "ACTIVE_STATES",
    "BASELINES",
    "CALLS",
    "DELIVERIES",
    "FILINGS",
    "INSTALLATIONS",
    "JOBS",
    "LOCKS",
    "OK_TO_TEST",
    "PR_SETTINGS",
    "REPLIES",
    "SENT",
    "SHARD_GROUPS",
    "STATUS_RESULTS",
    "STATUS_RUNS",
    "SWEEPS",
    "UPSTREAM",
    "USES",
    "Base",
    "BaselineReport",
    "BigId",
    "CommandReply",
    "CommandUse",
    "Delivery",
    "FairLock",
    "GroupEnd",
    "InstallationRow",
    "Job",
    "JobState",
    "OkToTest",
    "Phase",
    "PrReminderSettings",
    "ReminderApiCalls",
    "ReminderKind",
    "ReminderSent",
    "ReminderSweep",
    "RunState",
    "SchemaMismatch",
    "ShardGroup",
    "StatusOutcome",
    "StatusResult",
    "StatusRun",
    "SweepLock",
    "UpstreamFiling",
    "UpstreamItem",
    "UpstreamState",
    "UtcDateTime",
    "current_revision",
    "database_url",
    "insert_ignore",
    "installation_gone",
    "make_engine",
    "migrate",
    "transaction",
    "upsert",
    "utcnow",
]
