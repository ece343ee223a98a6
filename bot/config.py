"""``.github/alignbot.yml``: the per-repository configuration, with errors that name the line.

The file is parsed once into a YAML node tree (which keeps every node's line and column) and
validated by strict pydantic models that reject unknown keys. Each validation error is mapped
back through the node tree to the line where the offending key or value is written, so a
maintainer reads ``.github/alignbot.yml:7:5: candidate.prelude: …`` and knows what to fix.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
import zoneinfo
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

CONFIG_PATH = ".github/alignbot.yml"
MAX_CONFIG_BYTES = 64 * 1024
MAX_NODES = 10_000  # YAML aliases can make a tiny file expand enormously ("billion laughs")

# Kept in step with checks.presets.PRESETS (a test checks it); not imported, so that loading a
# configuration never imports the engine.
Preset = Literal["torch", "torch-compile", "torch-float64", "torch-no-mkldnn", "paddle"]
PRESETS: tuple[str, ...] = typing.get_args(Preset)

_OWNER_REPO = r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"
_LOGIN = r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$"
_TORCH_API = r"^torch(?:\.[A-Za-z_][A-Za-z0-9_]*)+$"
_TARGET = r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*$"
_TEAM_OR_LOGIN = r"^(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+|@?[A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))$"


# --------------------------------------------------------------------------- path globs


@lru_cache(maxsize=1024)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """``**`` (a whole segment) spans any number of folders; ``*``, ``?`` and ``[…]`` stay
    inside one segment."""
    segments = pattern.split("/")
    out = ""
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            out += ".*" if last else "(?:[^/]*/)*"
            continue
        out += _segment_regex(segment) + ("" if last else "/")
    return re.compile(out)


def _segment_regex(segment: str) -> str:
    out, i = "", 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out += "[^/]*"
        elif char == "?":
            out += "[^/]"
        elif char == "[" and (end := segment.find("]", i + 2)) != -1:
            body = segment[i + 1:end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            out += "[" + ("^/" if negate else "") + body.replace("\\", "\\\\") + "]"
            i = end
        else:
            out += re.escape(char)
        i += 1
    return out


def glob_match(path: str, pattern: str) -> bool:
    """Whether a repository path (``a/b/c.py``) matches a glob such as ``src/**/ops/*.py``."""
    return _glob_regex(pattern).fullmatch(path.lstrip("/")) is not None


# --------------------------------------------------------------------------- field checks


def _path_glob(value: str) -> str:
    if not value.strip():
        raise ValueError("a path glob cannot be empty")
    if value.startswith("/") or "\\" in value:
        raise ValueError(f"`{value}`: write paths relative to the repository root, with `/`")
    if ".." in value.split("/"):
        raise ValueError(f"`{value}`: `..` cannot appear in a repository path")
    return value


def _spec_glob(value: str) -> str:
    if not value.strip() or "," in value or any(c.isspace() for c in value):
        raise ValueError(f"`{value}`: a spec glob is one name or op pattern such as "
                         "`activations.*` or `torch.nn.functional.gelu` (no commas or spaces)")
    return value


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


PathGlob = Annotated[str, AfterValidator(_path_glob)]
SpecGlob = Annotated[str, AfterValidator(_spec_glob)]
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


# --------------------------------------------------------------------------- the models


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
            relative = "/" in self.python and not self.python.startswith("/")
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

    tracker: OwnerRepo = Field(default="pytorch/pytorch",
                               description="where upstream drafts for reference bugs are filed")
    tracking_repo: OwnerRepo | None = Field(default=None, description="this project's own "
                                            "repository for tracking issues (optional)")


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
    timeout_minutes: int = Field(default=15, ge=1, le=120,
                                 description="wall-clock limit for one check")
    tolerances: Tolerances | None = None
    upstream: Upstream = Field(default_factory=Upstream)
    trust: Trust = Field(default_factory=Trust)
    reminders: Reminders = Field(default_factory=Reminders)

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


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class ConfigProblem:
    line: int
    column: int
    key: str  # "candidate.setup[0]", or "" for the whole file
    message: str


class ConfigError(ValueError):
    """The file is not valid; ``str()`` is one line per problem, each naming its line."""

    def __init__(self, path: str, problems: list[ConfigProblem]) -> None:
        self.path, self.problems = path, problems
        super().__init__("\n".join(
            f"{path}:{p.line}:{p.column}: {p.key + ': ' if p.key else ''}{p.message}"
            for p in problems))


def load_config(text: str, path: str = CONFIG_PATH) -> RepoConfig:
    """Parse and validate the file's text; raise :class:`ConfigError` naming every problem."""
    if len(text.encode("utf-8", errors="replace")) > MAX_CONFIG_BYTES:
        raise ConfigError(path, [ConfigProblem(1, 1, "", f"the file is larger than "
                                               f"{MAX_CONFIG_BYTES // 1024} KiB")])
    node, data = _parse(text, path)
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {type(data).__name__}, not a mapping"
        line, col = (node.start_mark.line + 1, node.start_mark.column + 1) if node else (1, 1)
        raise ConfigError(path, [ConfigProblem(line, col, "", f"the file is {what}; it needs "
                                               "at least a `candidate:` section")])
    try:
        return RepoConfig.model_validate(data)
    except ValidationError as exc:
        assert node is not None
        problems = [_problem(node, error) for error in exc.errors()]
        raise ConfigError(path, sorted(problems, key=lambda p: (p.line, p.column))) from None


def config_schema() -> dict[str, Any]:
    """The JSON schema of the file (``alignbot config-schema`` prints it)."""
    schema = RepoConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "alignbot repository configuration (.github/alignbot.yml)"
    return schema


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``1e-5`` as a float (YAML 1.1 wants ``1.0e-5``)."""


_FLOAT = "tag:yaml.org,2002:float"
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag != _FLOAT]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(_FLOAT, re.compile(r"""^(?:
    [-+]?(?:[0-9][0-9_]*)?\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""", re.X), list("-+0123456789."))


def _parse(text: str, path: str) -> tuple[yaml.Node | None, Any]:
    try:
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                _check_tree(node, path)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = " ".join(filter(None, [exc.context, exc.problem]))
        start = exc.context_mark
        if start is not None and start.line + 1 != line:
            problem += f" (it started on line {start.line + 1})"
        raise ConfigError(path, [ConfigProblem(line, col, "", f"YAML syntax error: {problem}")]
                          ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(path, [ConfigProblem(1, 1, "", f"YAML error: {exc}")]) from None
    return node, data


def _check_tree(root: yaml.Node, path: str) -> None:
    """Reject duplicate keys (YAML keeps the last one silently) and alias bombs."""
    problems: list[ConfigProblem] = []
    count, stack = 0, [root]
    while stack:
        node = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise ConfigError(path, [ConfigProblem(1, 1, "", f"the file expands to more than "
                                                   f"{MAX_NODES} values (aliases?)")])
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else None
                if name is not None and name in seen and name != "<<":
                    problems.append(ConfigProblem(
                        key.start_mark.line + 1, key.start_mark.column + 1, str(name),
                        f"key `{name}` appears twice (first on line {seen[name]})"))
                elif name is not None:
                    seen[name] = key.start_mark.line + 1
                stack += [key, value]
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
    if problems:
        raise ConfigError(path, sorted(problems, key=lambda p: (p.line, p.column)))


# --------------------------------------------------------------------------- error mapping


def _problem(root: yaml.Node, error: Any) -> ConfigProblem:
    loc = tuple(error["loc"])
    kind = error["type"]
    if kind == "missing":
        node = _node_at(root, loc[:-1], key=True)
        return _at(node, loc[:-1], f"required key `{loc[-1]}` is missing")
    if kind == "extra_forbidden":
        node = _node_at(root, loc, key=True)
        return _at(node, loc, _unknown_key(loc))
    node = _node_at(root, loc, key=False)
    if isinstance(node, yaml.MappingNode) and loc:
        node = _node_at(root, loc, key=True)  # a section's own error: point at its key
    message = str(error["msg"])
    if message.startswith("Value error, "):
        message = message[len("Value error, "):]
    elif kind != "literal_error":
        message = message[:1].lower() + message[1:] + _got(error.get("input"))
        if kind in ("int_type", "float_type", "bool_type") and isinstance(error.get("input"),
                                                                           str):
            message += "; write it without quotes"
    if kind == "literal_error":
        message = "expected one of " + ", ".join(
            f"`{v}`" for v in re.findall(r"'([^']*)'", str(error["msg"])))
        message += _got(error.get("input"))
    return _at(node, loc, message)


def _got(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return f" (got a {'mapping' if isinstance(value, dict) else 'list'})"
    text = repr(value)
    return f" (got {text[:60] + '…' if len(text) > 60 else text})"


def _at(node: yaml.Node, loc: tuple[Any, ...], message: str) -> ConfigProblem:
    return ConfigProblem(node.start_mark.line + 1, node.start_mark.column + 1, _key_path(loc),
                         message)


def _key_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if part == "[key]":
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", part):
            out += ("." if out else "") + part
        else:
            out += f"[{str(part)!r}]"
    return out


def _node_at(root: yaml.Node, loc: tuple[Any, ...], key: bool) -> yaml.Node:
    """The deepest node along ``loc``; its key node when ``key`` (and for ``[key]`` errors)."""
    node = root
    for index, part in enumerate(loc):
        last = index == len(loc) - 1
        if part == "[key]":
            return node
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(part):
                    if (last and key) or (index + 1 < len(loc) and loc[index + 1] == "[key]"):
                        return k
                    node = v
                    break
            else:
                return node
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) \
                and part < len(node.value):
            node = node.value[part]
        else:
            return node
    return node


def _unknown_key(loc: tuple[Any, ...]) -> str:
    name = str(loc[-1])
    allowed = _allowed_keys(loc[:-1])
    if not allowed:
        return f"unknown key `{name}`"
    close = difflib.get_close_matches(name, allowed, n=1)
    hint = f"; did you mean `{close[0]}`?" if close else ""
    return f"unknown key `{name}`{hint} (allowed here: {', '.join(allowed)})"


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    annotation: Any = RepoConfig
    for part in loc:
        annotation = _unwrap(annotation)
        origin = typing.get_origin(annotation)
        if isinstance(part, int) and origin is list:
            annotation = typing.get_args(annotation)[0]
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel) \
                and isinstance(part, str) and part in annotation.model_fields:
            annotation = annotation.model_fields[part].annotation
        else:
            return []
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return list(annotation.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """``X | None`` -> ``X``; ``Annotated[X, …]`` -> ``X``."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _unwrap(options[0]) if len(options) == 1 else annotation
    return annotation
