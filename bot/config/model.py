"""The configuration's model: strict pydantic sections (unknown keys are errors) and
``RepoConfig``, the whole file, with the questions the App asks of it (which changed files are
op code, which specs check them)."""

from __future__ import annotations

import re
import typing
import zoneinfo
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from alignbot.checks.api import DEFAULT_TRACKER, relative_interpreter

from .globs import PathGlob, SpecGlob, glob_match

# Kept in step with alignbot.checks.presets.PRESETS (a test checks it); not imported, so that
# loading a
# configuration never imports the engine.
Preset = Literal["torch", "torch-compile", "torch-compile-program", "torch-float64",
                 "torch-no-mkldnn", "paddle", "torchax", "openvino"]
PRESETS: tuple[str, ...] = typing.get_args(Preset)

_OWNER_REPO = r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"
_LOGIN = r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$"
_TORCH_API = r"^torch(?:\.[A-Za-z_][A-Za-z0-9_]*)+$"
_TARGET = r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*$"
_TEAM_OR_LOGIN = r"^(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+|@?[A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))$"


def _matches(pattern: str, what: str) -> typing.Callable[[str], str]:
    regex = re.compile(pattern)

    def check(value: str) -> str:
        if not regex.match(value):
            raise ValueError(f"`{value}` is not {what}")
        return value

    return check


def _timezone(value: str) -> str:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"`{value}` is not an IANA time zone such as `UTC` or "
                         "`Europe/Paris`") from None
    return value


def _pattern(regex: str) -> Any:
    return Field(json_schema_extra={"pattern": regex})


OwnerRepo = Annotated[str, AfterValidator(_matches(_OWNER_REPO, "an OWNER/REPO name")),
                      _pattern(_OWNER_REPO)]
Login = Annotated[str, AfterValidator(_matches(_LOGIN, "a GitHub login")), _pattern(_LOGIN)]
TorchApi = Annotated[str, AfterValidator(_matches(_TORCH_API, "a torch API name such as "
                                                  "`torch.nn.functional.gelu`")),
                     _pattern(_TORCH_API)]
Target = Annotated[str, AfterValidator(_matches(_TARGET, "`module:attribute`")),
                   _pattern(_TARGET)]
TeamOrLogin = Annotated[str, AfterValidator(_matches(_TEAM_OR_LOGIN, "a team (`org/team`) or "
                                                     "a GitHub login")),
                        _pattern(_TEAM_OR_LOGIN)]
Command = Annotated[str, Field(min_length=1, max_length=4000)]
Weekday = Literal["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class CandidateSection(_Strict):
    """What is checked against PyTorch: a built-in preset, or a prelude that binds ``torch``."""

    model_config = ConfigDict(json_schema_extra={
        "oneOf": [{"required": ["preset"]}, {"required": ["prelude"]}]})

    preset: Preset | None = Field(default=None, description="a built-in candidate (not with "
                                                          "`prelude`)")
    prelude: str | None = Field(default=None, min_length=1, max_length=64 * 1024,
                                description="Python source run in the candidate's worker; it "
                                            "must bind `torch` (not with `preset`)")
    python: str | None = Field(default=None, min_length=1, max_length=1024,
                               description="the candidate's interpreter inside the sandbox "
                                           "(a path relative to the repository root, or a "
                                           "command on PATH); default: the sandbox's python")
    setup: list[Command] = Field(default_factory=list, max_length=50,
                                 description="shell commands run at the repository root, in "
                                             "the sandbox, before checking")
    overrides: dict[TorchApi, Target] = Field(default_factory=dict,
                                              description="torch API name -> module:attribute "
                                                          "of the candidate's callable")

    @field_validator("python")
    @classmethod
    def _interpreter_path(cls, value: str | None) -> str | None:
        # The sandbox resolves links and decides against the service's allow-list; what
        # can be refused from the text alone is refused here, with the line.
        if value is None:
            return value
        if "\x00" in value or "\\" in value or value != value.strip():
            raise ValueError(f"{value!r} is not a path; write it with `/`")
        if ".." in value.split("/"):
            raise ValueError(f"`{value}`: `..` cannot appear here; name an interpreter in "
                             "the repository (`.venv/bin/python`), one the service allows, "
                             "or a command on PATH")
        return value

    @field_validator("prelude")
    @classmethod
    def _not_both(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("preset") is not None:
            raise ValueError("give either `preset` or `prelude`, not both")
        return value

    @model_validator(mode="after")
    def _one_of(self) -> CandidateSection:
        if self.preset is None and self.prelude is None:
            raise ValueError("say what to check: `preset: torch` (or another preset) or a "
                             "`prelude` that binds `torch`")
        return self

    def cli_args(self, repo_root: PurePosixPath | Path | None = None) -> list[str]:
        """The engine's (``alignbot check``) options for this candidate; a relative
        ``python`` path is made absolute under ``repo_root``."""
        args = (["--candidate", self.preset] if self.preset is not None
                else ["--prelude", self.prelude or ""])
        if self.python:
            relative = relative_interpreter(self.python)
            python = str(repo_root / self.python) if relative and repo_root else self.python
            args += ["--python", python]
        for api, target in self.overrides.items():
            args += ["--override", f"{api}={target}"]
        return args


class OpMapping(_Strict):
    """Changed files matching ``paths`` are op code; they are checked by the ``specs`` globs."""

    paths: list[PathGlob] = Field(min_length=1, description="repository path globs (`**` "
                                                            "crosses folders, `*` does not)")
    specs: list[SpecGlob] = Field(min_length=1, description="spec globs, by name or op, as "
                                                            "`alignbot check --ops`")

    def matches(self, path: str) -> bool:
        return any(glob_match(path, pattern) for pattern in self.paths)


class Tolerances(_Strict):
    """Tolerances that replace the per-dtype table: both or neither."""

    rtol: float = Field(ge=0, description="relative tolerance")
    atol: float = Field(ge=0, description="absolute tolerance")


class Upstream(_Strict):
    """Where drafts go when the reference (PyTorch) looks wrong."""

    tracker: OwnerRepo = Field(default=DEFAULT_TRACKER,
                               description="where upstream drafts for reference bugs are filed")
    tracking_repo: OwnerRepo | None = Field(default=None, description="this project's own "
                                            "repository for tracking issues (optional)")


class Known(_Strict):
    """``.github/alignbot-known.yml``, the known divergences (docs/baselines.md)."""

    strict: bool = Field(default=False, description="fail the check when an entry of the "
                         "known-divergences file no longer reproduces (remove it)")


class Baseline(_Strict):
    """The same check on the pull request's merge base, whose findings are pre-existing."""

    enabled: bool = Field(default=True, description="check the merge base too (cached) and "
                          "fail only on new divergences")


class Trust(_Strict):
    """Whose pull requests run without a maintainer's go-ahead (their code runs in the
    sandbox)."""

    outside_contributors: Literal["run", "require-ok-to-test", "skip"] = Field(
        default="require-ok-to-test",
        description="pull requests from authors without write access: check them at once, "
                    "after a maintainer's `/alignbot ok-to-test`, or never")
    carry_over_pushes: bool = Field(default=False, description="whether an ok-to-test also "
                                    "covers later pushes to the same pull request")


class Reminders(_Strict):
    """Weekly reminders on stale pull requests (off unless ``enabled``)."""

    enabled: bool = Field(default=False, description="send weekly reminders on stale pull "
                                                     "requests")
    weekday: Weekday = "monday"
    hour: int = Field(default=9, ge=0, le=23, description="hour of day, in `timezone`")
    stale_days: int = Field(default=7, ge=1, le=365, description="days without activity "
                                                                 "before a reminder")
    max_reminders: int = Field(default=3, ge=1, le=52, description="reminders per pull "
                                                                   "request before escalating")
    escalate_to: TeamOrLogin | None = Field(default=None, description="a team (`org/team`) or "
                                            "login mentioned after the last reminder")
    maintainers: list[Login] = Field(default_factory=list)
    exempt_labels: list[Annotated[str, Field(min_length=1, max_length=50)]] = Field(
        default_factory=list)
    exempt_authors: list[Login] = Field(default_factory=list)
    exempt_paths: list[PathGlob] = Field(default_factory=list,
                                         description="pull requests touching only these paths "
                                                     "get no reminders")
    labels: bool = Field(default=False, description="also label stale pull requests")
    timezone: Annotated[str, AfterValidator(_timezone)] = "UTC"


class RepoConfig(_Strict):
    """The whole file. ``candidate`` is required; everything else has a default."""

    candidate: CandidateSection
    ops: list[OpMapping] = Field(default_factory=list, description="which changed paths are "
                                 "op code and which specs check them")
    specs: list[PathGlob] = Field(default_factory=list, description="extra spec files in the "
                                  "repository (path globs)")
    draws: int = Field(default=20, ge=1, le=1000, description="draws per spec")
    opinfo: bool = Field(default=True, description="also run the specs from PyTorch's OpInfo "
                         "and ModuleInfo databases that the op globs match")
    timeout_minutes: int = Field(default=15, ge=1, le=120,
                                 description="wall-clock limit for one check")
    shards: int = Field(default=1, ge=1, le=16, description="shard jobs to split a check "
                        "into, run side by side by the service's workers and merged into one "
                        "report (the service may cap it)")
    tolerances: Tolerances | None = None
    upstream: Upstream = Field(default_factory=Upstream)
    trust: Trust = Field(default_factory=Trust)
    reminders: Reminders = Field(default_factory=Reminders)
    known: Known = Field(default_factory=Known)
    baseline: Baseline = Field(default_factory=Baseline)

    def op_files(self, changed_paths: Iterable[str]) -> list[str]:
        """The changed files that are op code (in the order given)."""
        return [p for p in changed_paths if any(m.matches(p) for m in self.ops)]

    def specs_for(self, changed_paths: Iterable[str]) -> list[str]:
        """The spec globs mapped from the changed op files; empty means nothing to check."""
        changed = list(changed_paths)
        found: dict[str, None] = {}
        for mapping in self.ops:
            if any(mapping.matches(p) for p in changed):
                found.update(dict.fromkeys(mapping.specs))
        return list(found)

    def spec_files(self, repo_paths: Iterable[str]) -> list[str]:
        """The repository's own spec files: paths matching ``specs``, sorted."""
        return sorted({p for p in repo_paths if any(glob_match(p, g) for g in self.specs)})


def config_schema() -> dict[str, Any]:
    """The JSON schema of the file (``alignbot config-schema`` prints it)."""
    schema = RepoConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "alignbot repository configuration (.github/alignbot.yml)"
    return schema
