"""Check-run output and the sticky PR comment, rendered from templates/ within GitHub's limits."""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, cast

from markdown_it import MarkdownIt
from markdown_it.token import Token

from alignbot.checks.api import (
    DEFAULT_TRACKER,
    KNOWN_PATH,
    Cause,
    FindingEntry,
    Trusted,
    Verdict,
    case_source,
    defuse,
    environment,
    group_causes,
    inline,
    no_comment,
    packages_line,
    visible,
)
from alignbot.checks.api import candidate_line as candidate_line  # what alignment.py shows

from .baseline import Classified
from .engine_report import EngineFinding, EngineReport, new_issue_link

CHECK_NAME = "alignbot / op alignment"
MARKER = "<!-- alignbot:sticky-comment -->"
CHECK_TEXT_LIMIT = 65_535
COMMENT_LIMIT = 65_536
ANNOTATION_BATCH = 50
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.M)
# The parser the commands read comments with (bot/commands/parser.py): a cut is closed by it.
_MARKDOWN = MarkdownIt("commonmark")


class Conclusion(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    NEUTRAL = "neutral"
    CANCELLED = "cancelled"


@dataclass
class CheckContext:
    """Everything one posting needs; ``report`` is the engine's validated report, or None with
    ``failure``."""

    head_sha: str
    candidate: str
    report: EngineReport | None = None
    failure: str | None = None
    advice: str = ""
    specs: list[str] = field(default_factory=list)
    seconds: float = 0.0
    patches: dict[str, str] = field(default_factory=dict)  # op file -> unified diff patch
    op_files_for: dict[str, list[str]] = field(default_factory=dict)  # spec glob -> op files
    tracker: str = DEFAULT_TRACKER
    full_report_url: str | None = None
    isolation: list[str] = field(default_factory=list)  # the sandbox's layers, as it applied them
    limits: list[str] = field(default_factory=list)  # its limits, and those it could not apply
    base_sha: str = ""  # the pull request's base, whose merge base is checked ("": a push)
    # the findings against the merge base and the known divergences (bot/baseline.py);
    # None: every finding counts (no baseline was asked for, or a sharded check)
    classified: Classified | None = None
    strict_known: bool = False  # ``known: strict``: an entry that no longer reproduces fails


@dataclass
class CheckOutput:
    conclusion: Conclusion
    title: str
    summary: str
    text: str
    annotations: list[dict[str, Any]]


def shown(ctx: CheckContext) -> list[EngineFinding]:
    """The findings the check is about: the new ones against the baseline and the known
    divergences, or all of them without a classification."""
    if ctx.classified is not None:
        return ctx.classified.new
    return ctx.report.findings if ctx.report else []


def conclusion(ctx: CheckContext) -> Conclusion:
    """Failure for anything the pull request should fix (with a baseline: what it newly
    broke, and with ``known: strict`` an entry that no longer reproduces); neutral when only
    PyTorch (or rounding) is to blame; success when everything agreed or was there before."""
    if ctx.failure is not None or ctx.report is None:
        return Conclusion.FAILURE
    if ctx.strict_known and ctx.classified is not None and ctx.classified.known_fixed:
        return Conclusion.FAILURE
    verdicts = {f.verdict or Verdict.UNDETERMINED for f in shown(ctx)}
    if not verdicts:
        return Conclusion.SUCCESS
    if verdicts <= {Verdict.REFERENCE_SUSPECT, Verdict.TOLERANCE_NOISE}:
        return Conclusion.NEUTRAL
    return Conclusion.FAILURE


def headline(ctx: CheckContext) -> str:
    if ctx.failure is not None or ctx.report is None:
        return "the check could not run"
    findings = shown(ctx)
    counts = Counter(_verdict(f) for f in findings)
    parts = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    if ctx.classified is not None:
        before = ctx.classified.counts()
        if not findings:
            return f"no new divergences ({before})" if before else \
                f"all {ctx.report.specs_run} specs agree with PyTorch"
        return (f"{len(findings)} new divergence{'s' if len(findings) != 1 else ''} "
                f"({parts}{'; ' + before if before else ''})")
    if not findings:
        return f"all {ctx.report.specs_run} specs agree with PyTorch"
    causes = len(grouped(findings)[0])
    return (f"{len(findings)} finding{'s' if len(findings) != 1 else ''} in {causes} "
            f"cause{'s' if causes != 1 else ''} ({parts})")


def _verdict(finding: EngineFinding) -> str:
    return finding.verdict.value if finding.verdict else "not triaged"


def _size(text: str, in_bytes: bool) -> int:
    return len(text.encode()) if in_bytes else len(text)


def fit(text: str, limit: int, more: str | None, in_bytes: bool = False) -> str:
    """Cut at a line boundary so the result, note included, stays within ``limit`` (characters,
    or UTF-8 bytes for check-run output); whatever the cut leaves open is closed first
    (``closing``), so that the note renders as a paragraph of its own."""
    if _size(text, in_bytes) <= limit:
        return text
    where = (f" The full report: {more}" if more else
             " The full report is stored with the job in the service's database.")

    def note(dropped: int) -> str:
        return f"\n\n**Cut here:** {dropped} more characters did not fit GitHub's limit.{where}\n"

    budget = max(0, limit - _size(note(len(text)), in_bytes))
    while True:
        head = _head(text, budget, in_bytes)
        tail = note(len(text) - len(head))
        closed = closing(head, tail)
        if isinstance(closed, int):  # no closer known: cut before the block instead
            head = "\n".join(head.split("\n")[:closed]).rstrip("\n")
            tail = note(len(text) - len(head))
            closed = closing(head, tail)
            closed = closed if isinstance(closed, str) else ""
        result = head + closed + tail
        over = _size(result, in_bytes) - limit
        if over <= 0 or not head:
            return result
        budget = max(0, min(budget, _size(head, in_bytes)) - over)  # the closers need room


def _head(text: str, budget: int, in_bytes: bool) -> str:
    head = text.encode()[:budget].decode("utf-8", errors="ignore") if in_bytes \
        else text[:budget]
    cut = head.rfind("\n")
    return head[:cut] if cut > 0 else head


# CommonMark's HTML blocks that a blank line does not end (kinds 1 to 5), with what ends them.
_HTML_ENDS = [(re.compile(r" {0,3}<(script|pre|style|textarea)(?=[\s>]|$)", re.I), "</{}>"),
              (re.compile(r" {0,3}<!--"), "-->"), (re.compile(r" {0,3}<\?"), "?>"),
              (re.compile(r" {0,3}<!\[CDATA\["), "]]>"), (re.compile(r" {0,3}<![A-Za-z]"), ">")]
# Raw HTML as a browser's tokenizer reads it: what opens a comment (or a bogus one) or an
# element whose text is raw, and tags.
_HTML = re.compile(r"<!--|<[?!]|</?([A-Za-z][A-Za-z0-9-]*)(?:\s[^<>]*)?>")
_RAW_TEXT = frozenset({"script", "style", "textarea", "title"})
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                   "source", "track", "wbr"})
_MAX_CLOSERS = 4


def closing(head: str, note: str) -> str | int:
    """What must come between ``head`` and ``note`` (a paragraph after a blank line) for the
    note to render as that paragraph, outside everything ``head`` left open, as the parser
    that reads commands sees it: the end of a fenced code block or of an HTML block that a
    blank line does not end, then what ends the HTML it left open (``<details>``).
    Containers need nothing: a blank line and an unindented paragraph end lists and quotes.
    An ``int`` instead: no closer is known for the block that would swallow the note, which
    starts on that line of ``head``; cut before it."""
    closers = ""
    for _ in range(_MAX_CLOSERS):
        tokens = _MARKDOWN.parse(head + closers + note)
        line = (head + closers).count("\n") + 2  # the note's first line
        blocks = [t for t in tokens if t.level == 0 and t.map is not None and t.map[0] <= line]
        if not blocks:
            return 0
        block, (first, last) = blocks[-1], blocks[-1].map or (0, 0)
        if block.type == "paragraph_open" and (first, last) == (line, line + 1):
            # a final newline: markdown-it-py 3/4 can index past the end of a source
            # that ends inside an HTML block in a quote in a list without one
            return closers + _end_tags(_MARKDOWN.render(head + closers + "\n"))
        end = _end_of(block) if first < line < last else None
        if end is None:  # swallowed by something no line ends, or lost (nested too deep)
            return first
        closers += "\n" + end
    return 0


def _end_of(block: Token) -> str | None:
    """The line that ends ``block`` if a paragraph after a blank line does not."""
    if block.type == "fence":
        return block.markup  # the opening fence: same character, same length
    if block.type == "html_block":
        for pattern, end in _HTML_ENDS:
            if (found := pattern.match(block.content)) is not None:
                return end.format(*found.groups())
    return None


def _end_tags(html: str) -> str:
    """What ends the HTML that ``html`` (rendered Markdown) leaves open, as HTML blocks of
    their own: a comment (``<!-- -->`` ends a bogus one too), a raw-text element, then the end
    tags of the elements still open (``<details>``, and any whose end tag a comment ate)."""
    lowered, pos, open_ = html.lower(), 0, list[str]()
    until: str | None = None  # what ends the comment or raw text we are in
    while pos < len(html):
        if until is not None:
            end = lowered.find(until, pos)
            if end < 0:
                break
            pos, until = end + len(until), None
            continue
        found = _HTML.search(html, pos)
        if found is None:
            break
        pos, text, name = found.end(), found.group(0), (found.group(1) or "").lower()
        if text == "<!--":
            until = "-->"
        elif not name:
            until = ">"
        elif text.startswith("</"):
            if name in open_:
                del open_[len(open_) - 1 - open_[::-1].index(name):]
        elif name in _RAW_TEXT:
            until = f"</{name}>"
        elif name not in _VOID and not text.endswith("/>"):
            open_.append(name)
    ends = ["<!-- -->" if until in ("-->", ">") else until or "",
            "".join(f"</{name}>" for name in reversed(open_))]
    return "".join(f"\n\n{end}" for end in ends if end)


def first_added_line(patch: str) -> int:
    match = _HUNK.search(patch or "")
    return int(match.group(1)) if match else 1


def _files_for(finding: EngineFinding, ctx: CheckContext) -> list[str]:
    names = {finding.spec, finding.op}
    files: list[str] = []
    for glob, paths in ctx.op_files_for.items():
        if any(fnmatch.fnmatchcase(name, glob) for name in names):
            files.extend(p for p in paths if p not in files)
    return files


def _plain(text: str) -> str:
    """Annotation text (plain text on GitHub): no invisible characters, no marker copies."""
    return no_comment(visible(text))


def annotations_for(ctx: CheckContext) -> list[dict[str, Any]]:
    """One annotation per finding on the first changed line of each op file it maps to."""
    if ctx.report is None:
        return []
    result = []
    for finding in shown(ctx):
        blamed = finding.verdict in (Verdict.CANDIDATE_BUG, Verdict.UNDETERMINED, None)
        level = "failure" if blamed else "warning"
        for path in _files_for(finding, ctx):
            line = first_added_line(ctx.patches.get(path, ""))
            result.append({  # plain text on GitHub, not Markdown
                "path": path, "start_line": line, "end_line": line,
                "annotation_level": level,
                "title": _plain(f"{finding.kind.value} at {finding.op}")[:255],
                "message": _plain(f"{_verdict(finding)}: {finding.message}")[:4000],
            })
    return result


def _failure(ctx: CheckContext) -> str | None:
    if ctx.failure is None and ctx.report is None:
        return "the engine produced no report"
    return ctx.failure


def grouped(findings: list[EngineFinding]) -> tuple[list[Cause], dict[str, EngineFinding]]:
    """The causes of a report's findings, grouped here from the findings as validated (the
    report's own list is never trusted), and the findings by fingerprint."""
    entries = [cast(FindingEntry, f.model_dump(mode="json")) for f in findings]
    return group_causes(entries), {f.fingerprint: f for f in findings}


def _number(value: float | int | bool | str) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def numbers_of(findings: list[EngineFinding]) -> dict[str, dict[str, str]]:
    """Each finding's numbers as the texts a template shows
    (``alignbot.bot.engine_report.Numbers``):
    the value's name, shape, the first elements on each side, the largest difference and
    where, with both values there."""
    shown: dict[str, dict[str, str]] = {}
    for finding in findings:
        n = finding.numbers
        if n is None:
            continue
        more = ", …" if len(n.expected) < _elements(n.shape) else ""
        shown[finding.fingerprint] = {
            "name": n.name, "shape": "[" + ", ".join(map(str, n.shape)) + "]",
            "expected": "[" + ", ".join(map(_number, n.expected)) + more + "]",
            "actual": "[" + ", ".join(map(_number, n.actual)) + more + "]",
            "largest": _number(n.largest_difference),
            "at": n.name + ("[" + ", ".join(map(str, n.at)) + "]" if n.at else ""),
            "expected_at": _number(n.expected_at), "actual_at": _number(n.actual_at)}
    return shown


def _elements(shape: list[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def cases_of(findings: list[EngineFinding]) -> dict[str, str]:
    """Each finding's case (the inputs and the call of its repro), by fingerprint, where
    its repro has one short enough to read before the whole script."""
    cases = {}
    for finding in findings:
        case = case_source(finding.repro) if finding.repro else None
        if case is not None:
            cases[finding.fingerprint] = case
    return cases


def _packages(report: EngineReport | None) -> str:
    return packages_line(report.candidate_packages or {}) if report else ""


def shown_layers(layers: list[str]) -> list[str]:
    """The sandbox's layers as a reader wants them: which uid a sandbox ran as changes with
    every sandbox and says nothing to the pull request, that it had its own uid does."""
    return ["own-uid" if layer.startswith("uid:") else layer for layer in layers]


def check_output(ctx: CheckContext) -> CheckOutput:
    env = environment()
    findings = shown(ctx)
    by_verdict = Counter(_verdict(f) for f in findings)
    causes, by_print = grouped(findings)
    packages = _packages(ctx.report)
    summary = env.get_template("check_run_summary.md.j2").render(
        failure=_failure(ctx), advice=ctx.advice, report=ctx.report, by_verdict=dict(by_verdict),
        seconds=ctx.seconds, specs=ctx.specs, candidate=ctx.candidate, packages=packages,
        causes=causes, isolation=shown_layers(ctx.isolation), limits=ctx.limits,
        findings=findings, changes=ctx.classified)
    text = env.get_template("check_run_text.md.j2").render(
        causes=causes, by_print=by_print, numbers=numbers_of(findings),
        cases=cases_of(findings))
    return CheckOutput(conclusion(ctx), inline(headline(ctx), 200).replace("\\", "")[:255],
                       fit(summary, CHECK_TEXT_LIMIT, ctx.full_report_url, in_bytes=True),
                       fit(text, CHECK_TEXT_LIMIT, ctx.full_report_url, in_bytes=True),
                       annotations_for(ctx))


def comment_body(ctx: CheckContext) -> str:
    findings = shown(ctx)
    causes, by_print = grouped(findings)
    body = environment().get_template("pr_comment.md.j2").render(
        marker=Trusted(MARKER), headline=headline(ctx), failure=_failure(ctx),
        advice=ctx.advice, report=ctx.report, head_sha=ctx.head_sha, tracker=ctx.tracker,
        causes=causes, by_print=by_print, packages=_packages(ctx.report), findings=findings,
        changes=ctx.classified, known_path=KNOWN_PATH, numbers=numbers_of(findings),
        cases=cases_of(findings),
        links={key: new_issue_link(ctx.tracker, f) for key, f in by_print.items()})
    return fit(body, COMMENT_LIMIT, ctx.full_report_url)


def batches(items: list[dict[str, Any]], size: int = ANNOTATION_BATCH
            ) -> list[list[dict[str, Any]]]:
    return [items[i:i + size] for i in range(0, len(items), size)] or [[]]


def safe_title(text: str) -> str:
    return defuse(" ".join(text.split()))[:255]
