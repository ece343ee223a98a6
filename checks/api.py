"""The engine as the App sees it: everything ``bot/`` takes from ``checks/``, and nothing else.

The App runs the engine in a sandbox and reads its report back; what it needs of the engine
in its own process is small, and it is all here:

- the report's shape (``Report``, ``FindingEntry``, ``Cause``, ``CauseForm``, ``Measure``,
  ``Side``; ``REPORT_VERSION``) and its vocabulary (``Kind``, ``Verdict``), which the App's
  strict model (``bot/engine_report.py``) is held to;
- the defaults the configuration shares with the engine's options: the tracker a draft goes
  to (``DEFAULT_TRACKER``) and which interpreter paths are relative (``relative_interpreter``);
- the texts both halves write: the templates (``environment``, ``templates_dir``), the
  Markdown filters (``Trusted``, ``visible``, ``inline``, ``defuse``, ``no_comment``), the
  lines that name a candidate (``candidate_line``, ``packages_line``), the upstream
  issue link (``new_issue_url``) and a repro's case (``case_source``);
- the known-divergences file (``KNOWN_PATH``, ``load_known``, ``KnownFile``,
  ``KnownEntry``, ``KnownFileError``);
- what the App computes from reports as the engine does: the causes of findings
  (``group_causes``, ``member_dtype``), a finding's fingerprints across a baseline
  (``fingerprints``), shards (``select_shard``, ``merge_shards``, ``ShardError``) and the
  order of dtypes (``DTYPE_ORDER``) and the precisions a candidate may declare
  (``PRECISIONS``);
- the engine's commands, for the one ``alignbot`` command line (``new_parser``,
  ``add_commands``, ``run``, ``UsageError``), and the exit status of its own failure
  (``INTERNAL_ERROR``), which the sandbox tells apart from the candidate's;
- a page's generated part between markers (``replace_between``, ``page_command``), which
  the settings table of docs/operations.md shares with the report's tables.

Why a face: the engine's modules can be split, merged and renamed without the App noticing,
as long as this module keeps its names; and what the App relies on is one list to read, not
an inventory of imports spread over ``bot/``. The App imports ``checks`` through this module
only (``tests/test_layers.py`` fails on any other import, wherever it is written). A name
the App needs is added here, re-exported from the module that defines it; a name no module of
``bot/`` imports any more leaves (the same test fails on it)."""

from __future__ import annotations

from .baseline import fingerprints
from .capabilities import PRECISIONS
from .catalog import DTYPE_ORDER
from .causes import group as group_causes
from .causes import member_dtype
from .cli import UsageError, add_commands, new_parser, run
from .generated_pages import page_command, replace_between
from .internal_errors import INTERNAL_ERROR
from .known import KNOWN_PATH, KnownEntry, KnownFile, KnownFileError, load_known
from .markdown import Trusted, defuse, inline, no_comment, visible
from .report import REPORT_VERSION, candidate_line, environment, packages_line, templates_dir
from .report_types import Cause, CauseForm, FindingEntry, Measure, Report, Side
from .repro_case import case_source
from .shards import ShardError
from .shards import merge as merge_shards
from .shards import select as select_shard
from .upstream import new_issue_url
from .vocab import DEFAULT_TRACKER, Kind, Verdict, relative_interpreter

__all__ = [
    "DEFAULT_TRACKER",
    "DTYPE_ORDER",
    "INTERNAL_ERROR",
    "KNOWN_PATH",
    "PRECISIONS",
    "REPORT_VERSION",
    "Cause",
    "CauseForm",
    "FindingEntry",
    "Kind",
    "KnownEntry",
    "KnownFile",
    "KnownFileError",
    "Measure",
    "Report",
    "ShardError",
    "Side",
    "Trusted",
    "UsageError",
    "Verdict",
    "add_commands",
    "candidate_line",
    "case_source",
    "defuse",
    "environment",
    "fingerprints",
    "group_causes",
    "inline",
    "load_known",
    "member_dtype",
    "merge_shards",
    "new_issue_url",
    "new_parser",
    "no_comment",
    "packages_line",
    "page_command",
    "relative_interpreter",
    "replace_between",
    "run",
    "select_shard",
    "templates_dir",
    "visible",
]
