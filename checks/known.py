"""Known divergences: the repository's ``.github/alignbot-known.yml``, read safely, matched
against findings, and written from a run's findings.

    known:
      - fingerprint: 3f2a9c01b7de        # one finding, exactly
        reason: float16 erfinv is computed in float32 and rounded once
        upstream: https://github.com/PaddlePaddle/Paddle/issues/123
      - op: paddle_compat.nn.functional.*  # or a pattern: op, kind, dtype, signature, spec
        kind: grad-mismatch
        dtype: bfloat16
        reason: bfloat16 gradients are accumulated in bfloat16

Every field but ``reason`` and ``upstream`` narrows what an entry matches: ``fingerprint``
exactly, the others as shell-style patterns (``fnmatch``, case-sensitive; ``dtype`` matches
any one of the dtypes a finding is about). An entry needs a ``fingerprint``, an ``op`` or a
``signature``, so that no entry swallows a whole kind. The first entry that matches a
finding is its entry. An entry with a ``spec`` can be told fixed when that spec ran and
showed nothing that matches it (:meth:`KnownFile.fixed`); one without cannot, since the
specs that would reproduce it are not known.

The file comes from the repository under test, so it is untrusted: bounded in size and in
entries before it is parsed, anchors and aliases refused, nesting measured from the parser's
events (no recursion) before a node tree is built, and every value read as a string from
that tree (no YAML types, no constructors). A malformed file raises :class:`KnownFileError`
naming its line.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from .vocab import Kind

if TYPE_CHECKING:
    from .findings import Finding
    from .report_types import FindingEntry, KnownMark

KNOWN_PATH = ".github/alignbot-known.yml"
MAX_KNOWN_BYTES = 256 * 1024
MAX_ENTRIES = 2000
MAX_VALUE_CHARS = 1000
# The file nests three levels (the mapping, the list, an entry); a little room, no more.
MAX_DEPTH = 8
_FINGERPRINT = re.compile(r"^[0-9a-f]{12}$")
_URL = re.compile(r"^https?://[^\s<>\"'`]+$")
PATTERN_FIELDS = ("op", "kind", "dtype", "signature", "spec")
FIELDS = ("fingerprint", *PATTERN_FIELDS, "reason", "upstream")
TOP_KEYS = ("version", "known")
TODO_REASON = "TODO: say why the candidate may differ here"


class KnownFileError(ValueError):
    """The known-divergences file is malformed; ``str()`` is ``source:line: message``."""

    def __init__(self, source: str, line: int, message: str) -> None:
        self.source, self.line, self.message = source, line, message
        super().__init__(f"{source}:{line}: {message}")


@dataclass(frozen=True)
class KnownEntry:
    """One entry: what it matches (``fingerprint`` exactly, the patterns by ``fnmatch``),
    why the divergence is expected, and where it is tracked upstream."""

    reason: str
    upstream: str | None = None
    fingerprint: str | None = None
    op: str | None = None
    kind: str | None = None
    dtype: str | None = None
    signature: str | None = None
    spec: str | None = None
    line: int = 0  # where the entry starts in its file (0: not from a file)

    def matches(self, finding: Finding | FindingEntry | Mapping[str, Any]) -> bool:
        facts = _Facts.of(finding)
        if self.fingerprint is not None and self.fingerprint != facts.fingerprint:
            return False
        for name in ("op", "kind", "signature", "spec"):
            pattern = getattr(self, name)
            if pattern is not None and not fnmatch.fnmatchcase(getattr(facts, name), pattern):
                return False
        if self.dtype is not None:
            dtypes = facts.dtype().split(",")
            if not any(fnmatch.fnmatchcase(d, self.dtype) for d in dtypes):
                return False
        return True

    def describe(self) -> str:
        """What the entry matches, in a few words: ``3f2a9c01b7de`` or ``op=torch.mm*``."""
        if self.fingerprint is not None:
            return self.fingerprint
        return " ".join(f"{name}={getattr(self, name)}" for name in PATTERN_FIELDS
                        if getattr(self, name) is not None)

    def mark(self) -> KnownMark:
        """The entry as a report names it (a finding's ``known``, the report's
        ``known_fixed``)."""
        return {"entry": self.describe(), "reason": self.reason, "upstream": self.upstream,
                "line": self.line}


@dataclass(frozen=True)
class KnownFile:
    """The entries of one file, in its order."""

    entries: tuple[KnownEntry, ...] = ()
    source: str = KNOWN_PATH

    def match(self, finding: Finding | FindingEntry | Mapping[str, Any]) -> KnownEntry | None:
        """The first entry that matches ``finding`` (a Finding or a report's finding entry),
        or None: the finding is not known."""
        for entry in self.entries:
            if entry.matches(finding):
                return entry
        return None

    def fixed(self, findings: Iterable[Finding | FindingEntry | Mapping[str, Any]],
              specs_run: Iterable[str]) -> list[KnownEntry]:
        """Entries that no longer reproduce: a ``spec`` among ``specs_run`` matches the entry
        and none of ``findings`` (all those of the run) does."""
        matched = {id(self.match(f)) for f in findings}
        ran = list(specs_run)
        return [e for e in self.entries if id(e) not in matched and e.spec is not None
                and any(fnmatch.fnmatchcase(s, e.spec) for s in ran)]


@dataclass
class _Facts:
    """What entries match on, read alike from a Finding and from a report's entry."""

    fingerprint: str
    kind: str
    op: str
    signature: str
    spec: str
    _entry: Mapping[str, Any] = field(repr=False)
    _dtype: str | None = None

    @classmethod
    def of(cls, finding: Finding | FindingEntry | Mapping[str, Any]) -> _Facts:
        if isinstance(finding, Mapping):
            entry: Mapping[str, Any] = finding
        else:  # a Finding: its dtype needs only these keys (checks/causes.py)
            entry = {"fingerprint": finding.fingerprint, "kind": finding.kind.value,
                     "op": finding.op, "signature": finding.signature,
                     "spec": finding.spec, "program": finding.program,
                     "node": finding.node}
        return cls(str(entry.get("fingerprint", "")), str(entry.get("kind", "")),
                   str(entry.get("op", "")), str(entry.get("signature", "")),
                   str(entry.get("spec", "")), entry)

    def dtype(self) -> str:
        if self._dtype is None:
            from .causes import member_dtype

            try:
                self._dtype = member_dtype(self._entry)  # type: ignore[arg-type]
            except Exception:  # a program this version cannot read: about no dtype
                self._dtype = ""
        return self._dtype


def read_known(path: Path) -> KnownFile:
    """The file at ``path``, read within the size limit; :class:`KnownFileError` for a file
    that cannot be read or parsed."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_KNOWN_BYTES + 1)
    except OSError as exc:
        raise KnownFileError(str(path), 1, f"cannot read it: {exc.strerror}") from exc
    return load_known(data.decode("utf-8", errors="replace"), str(path))


def load_known(text: str, source: str = KNOWN_PATH) -> KnownFile:
    """Parse a known-divergences file; raise :class:`KnownFileError` naming the line of the
    first problem. An empty file (or only comments) has no entries."""
    if len(text.encode("utf-8", errors="replace")) > MAX_KNOWN_BYTES:
        raise KnownFileError(source, 1, f"the file is larger than {MAX_KNOWN_BYTES // 1024} KiB")
    root = _compose(text, source)
    if root is None:
        return KnownFile((), source)
    if not isinstance(root, yaml.MappingNode):
        raise KnownFileError(source, _line(root), "the file needs a mapping with a `known:` "
                             "list of entries")
    entries: list[KnownEntry] = []
    for key, value in _pairs(root, TOP_KEYS, source):
        if key == "version":
            if _scalar(value, key, source) != "1":
                raise KnownFileError(source, _line(value), "version: only 1 is known")
            continue
        if _is_null(value):
            continue
        if not isinstance(value, yaml.SequenceNode):
            raise KnownFileError(source, _line(value), "known: needs a list of entries")
        if len(value.value) > MAX_ENTRIES:
            raise KnownFileError(source, _line(value), f"known: more than {MAX_ENTRIES} entries")
        entries += [_entry(item, source) for item in value.value]
    return KnownFile(tuple(entries), source)


def _compose(text: str, source: str) -> yaml.Node | None:
    try:
        _check_events(text, source)  # PyYAML composes recursively: measure first
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        problem = " ".join(filter(None, [exc.context, exc.problem]))
        start = exc.context_mark
        if start is not None and start.line + 1 != line:
            problem += f" (it started on line {start.line + 1})"
        raise KnownFileError(source, line, f"YAML syntax error: {problem}") from None
    except yaml.YAMLError as exc:
        raise KnownFileError(source, 1, f"YAML error: {exc}") from None


def _check_events(text: str, source: str) -> None:
    """Refuse anchors and aliases (an alias bomb expands a tiny file) and collections nested
    deeper than ``MAX_DEPTH``, from the parser's events, read without recursion."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        line = event.start_mark.line + 1 if event.start_mark is not None else 1
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise KnownFileError(source, line, "anchors and aliases are not allowed")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise KnownFileError(source, line, f"values nest deeper than {MAX_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1 if node.start_mark is not None else 1


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _pairs(node: yaml.MappingNode, allowed: Sequence[str], source: str
           ) -> list[tuple[str, yaml.Node]]:
    """The mapping's keys (each once, each one of ``allowed``) with their value nodes."""
    seen: set[str] = set()
    pairs = []
    for key, value in node.value:
        name = str(key.value) if isinstance(key, yaml.ScalarNode) else ""
        if name not in allowed:
            close = difflib.get_close_matches(str(name), allowed, n=1)
            hint = f" (did you mean `{close[0]}`?)" if close else \
                f" (known keys: {', '.join(allowed)})"
            raise KnownFileError(source, _line(key), f"unknown key `{_short(name)}`{hint}")
        if name in seen:
            raise KnownFileError(source, _line(key), f"`{name}` is given twice")
        seen.add(name)
        pairs.append((name, value))
    return pairs


def _scalar(node: yaml.Node, name: str, source: str) -> str:
    if not isinstance(node, yaml.ScalarNode) or _is_null(node):
        raise KnownFileError(source, _line(node), f"{name}: needs a string")
    value = str(node.value)
    if len(value) > MAX_VALUE_CHARS:
        raise KnownFileError(source, _line(node), f"{name}: longer than {MAX_VALUE_CHARS} "
                             "characters")
    return value


def _entry(node: yaml.Node, source: str) -> KnownEntry:
    if not isinstance(node, yaml.MappingNode):
        raise KnownFileError(source, _line(node), "an entry needs `reason:` and a "
                             "`fingerprint:`, `op:` or `signature:`")
    values = {name: _scalar(value, name, source) for name, value in _pairs(node, FIELDS, source)}
    line = _line(node)
    if not values.get("reason", "").strip():
        raise KnownFileError(source, line, "the entry has no `reason:` (why the divergence "
                             "is expected)")
    if not any(values.get(name) for name in ("fingerprint", "op", "signature")):
        raise KnownFileError(source, line, "the entry needs a `fingerprint:`, an `op:` or a "
                             "`signature:` (what it matches)")
    if "fingerprint" in values and not _FINGERPRINT.match(values["fingerprint"]):
        raise KnownFileError(source, line, f"fingerprint: {_short(values['fingerprint'])!r} "
                             "is not 12 hexadecimal digits (as a report gives it)")
    kind = values.get("kind")
    if kind is not None and not any(c in kind for c in "*?[") and kind not in set(Kind):
        raise KnownFileError(source, line, f"kind: {_short(kind)!r} is no kind of finding; "
                             f"use one of {', '.join(Kind)}")
    if "upstream" in values and not _URL.match(values["upstream"]):
        raise KnownFileError(source, line, "upstream: needs an http(s) URL")
    return KnownEntry(line=line, **values)


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def write_known(findings: Sequence[Finding | FindingEntry | Mapping[str, Any]],
                previous: KnownFile | None = None) -> str:
    """The file's text for today's findings: entries of ``previous`` that still match one
    (their reasons kept), then an entry by fingerprint for each finding no entry matched,
    ordered by op, kind and fingerprint so that a rerun writes the same file."""
    previous = previous or KnownFile()
    kept = [e for e in previous.entries if any(e.matches(f) for f in findings)]
    facts = sorted({(f.op, f.kind, f.fingerprint, f.spec): None
                    for f in map(_Facts.of, findings)
                    if not any(e.matches(f._entry) for e in kept)})
    # op, kind and spec only say what the fingerprint is (and let `fixed` know its spec):
    # written as literal patterns
    new = [KnownEntry(reason=TODO_REASON, fingerprint=fp, op=_literal(op), kind=_literal(kind),
                      spec=_literal(spec)) for op, kind, fp, spec in facts]
    lines = ["# Known divergences (alignbot): a finding that matches an entry is known, not",
             "# new. Written by `alignbot check --write-known`; fill in each reason.",
             "version: 1", "known:" + ("" if kept or new else " []")]
    for entry in [*kept, *new]:
        lines.append(f"  - reason: {_quote(entry.reason)}")
        lines += [f"    {name}: {_quote(getattr(entry, name))}" for name in FIELDS[:-2]
                  if getattr(entry, name) is not None]
        if entry.upstream is not None:
            lines.append(f"    upstream: {_quote(entry.upstream)}")
    return "\n".join(lines) + "\n"


def _literal(text: str) -> str:
    """A pattern that matches ``text`` alone."""
    return re.sub(r"([*?[])", r"[\1]", text)


def _quote(value: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is one), on one line."""
    return json.dumps(value, ensure_ascii=True)
