"""Loading ``.github/alignbot.yml``: YAML parsed into a node tree that keeps every line and
column, validated by the model, and each validation error mapped back to where it is written."""

from __future__ import annotations

import difflib
import re
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ValidationError

from .. import nesting
from .model import RepoConfig

CONFIG_PATH = ".github/alignbot.yml"
MAX_CONFIG_BYTES = 64 * 1024
MAX_NODES = 10_000  # YAML aliases can make a tiny file expand enormously ("billion laughs")
MAX_DEPTH = nesting.MAX_DEPTH
_TOO_DEEP = f"values nest deeper than {MAX_DEPTH} levels"


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
        _check_depth(text, path)  # PyYAML composes nodes recursively: measure first
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


def _check_depth(text: str, path: str) -> None:
    """Refuse collections nested deeper than ``MAX_DEPTH``, from the parser's events (read
    without recursion), naming the line where the limit is passed."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line, column = (event.start_mark.line + 1, event.start_mark.column + 1) \
                    if event.start_mark is not None else (1, 1)
                raise ConfigError(path, [ConfigProblem(line, column, "", _TOO_DEEP)])
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _check_tree(root: yaml.Node, path: str) -> None:
    """Reject duplicate keys (YAML keeps the last one silently), alias bombs, and values
    nested too deep through aliases."""
    problems: list[ConfigProblem] = []
    count, stack = 0, [(root, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise ConfigError(path, [ConfigProblem(1, 1, "", f"the file expands to more than "
                                                   f"{MAX_NODES} values (aliases?)")])
        if depth > MAX_DEPTH:
            raise ConfigError(path, [ConfigProblem(
                node.start_mark.line + 1, node.start_mark.column + 1, "", _TOO_DEEP)])
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
                stack += [(key, depth + 1), (value, depth + 1)]
        elif isinstance(node, yaml.SequenceNode):
            stack += [(item, depth + 1) for item in node.value]
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
