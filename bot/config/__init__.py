"""``.github/alignbot.yml``: the per-repository configuration, with errors that name the line.

The file is parsed once into a YAML node tree (which keeps every node's line and column) and
validated by strict pydantic models that reject unknown keys. Each validation error is mapped
back through the node tree to the line where the offending key or value is written, so a
maintainer reads ``.github/alignbot.yml:7:5: candidate.prelude: …`` and knows what to fix.

- ``globs.py``    ``glob_match`` and the path and spec glob fields
- ``model.py``    the sections, ``RepoConfig`` (the whole file) and its JSON schema
- ``loading.py``  ``load_config``: YAML with lines and columns, each error mapped back to
                  where it is written (``ConfigError``)
"""

from __future__ import annotations

from .globs import PathGlob, SpecGlob, glob_match
from .loading import (
    CONFIG_PATH,
    MAX_CONFIG_BYTES,
    MAX_NODES,
    ConfigError,
    ConfigProblem,
    load_config,
)
from .model import (
    PRESETS,
    CandidateSection,
    OpMapping,
    Preset,
    Reminders,
    RepoConfig,
    Tolerances,
    Trust,
    Upstream,
    config_schema,
)

__all__ = [
    "CONFIG_PATH",
    "MAX_CONFIG_BYTES",
    "MAX_NODES",
    "PRESETS",
    "CandidateSection",
    "ConfigError",
    "ConfigProblem",
    "OpMapping",
    "PathGlob",
    "Preset",
    "Reminders",
    "RepoConfig",
    "SpecGlob",
    "Tolerances",
    "Trust",
    "Upstream",
    "config_schema",
    "glob_match",
    "load_config",
]
