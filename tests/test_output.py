"""bot/output.py: conclusions, GitHub's size limits, Markdown that untrusted text cannot break,
annotations and their batches, and what a pull request with a bad or no config gets."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import jinja2
import pytest
from github import GithubException
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from service import open_pull

from alignbot.bot.alignment import CONFIG_PATH, JOB_KIND, _op_files_for
from alignbot.bot.check_run import complete_run
from alignbot.bot.config import load_config
from alignbot.bot.demo import (
    INSTALLATION,
    NUMBER,
    OWNER,
    REPO,
    _files,
    deliver,
    free_port,
    running,
    settings_for,
    wait_for,
)
from alignbot.bot.engine_report import EngineReport, parse_report
from alignbot.bot.github import ApiOptions, GitHubApp
from alignbot.bot.output import (
    ANNOTATION_BATCH,
    CHECK_NAME,
    CHECK_TEXT_LIMIT,
    COMMENT_LIMIT,
    MARKER,
    CheckContext,
    CheckOutput,
    Conclusion,
    annotations_for,
    check_output,
    comment_body,
    conclusion,
    fit,
    shown_layers,
)
from alignbot.bot.queue import JobState, SqlJobQueue
from alignbot.bot.testing.github import GitHubServer
from alignbot.checks.markdown import ZWSP, Trusted, folded, link, marker
from alignbot.checks.report import ENGINE_TEMPLATES, environment, templates_dir

ROOT = Path(__file__).resolve().parent.parent

HEAD = "e" * 40
CUT_NOTE = "**Cut here:**"
REPORT_URL = "https://alignbot.example.com/reports/1234"
HOSTILE = ("@octocat and @org/team see #123 ``` <img src=x onerror=alert(1)> "
           "[link](javascript:alert(1))\nsecond line | with | pipes\n```\n~~~\n````")
HOSTILE_REPRO = f"import torch\n# {HOSTILE}\nraise SystemExit(1)\n"


def finding(index: int = 0, **fields: Any) -> dict[str, Any]:
    """A finding as the engine's JSON report holds it (after triage and minimizing)."""
    base: dict[str, Any] = {
        "fingerprint": f"{index:012x}", "kind": "grad-mismatch",
        "op": "torch.nn.functional.softplus", "spec": "activations.softplus",
        "message": "gradient w.r.t. input differs: max abs diff 0.5 at [3]", "count": 1,
        "observation": "grad:v0", "node": "v1", "program": {"nodes": []},
        "verdict": "candidate-bug", "verdict_reason": "float64 agrees with the reference",
        "repro": "import torch\nprint(torch.ones(1))\n", "repro_verified": True,
        "upstream_url": None, "upstream_draft": None}
    return {**base, **fields}


def report_data(findings: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"report_version": 1, "candidate": "fastops", "specs": ["activations.softplus"],
            "specs_run": 2, "programs_run": 24, "seed": 7, "reference": "2.5.1",
            "findings": findings, **fields}


def report(findings: list[dict[str, Any]], **fields: Any) -> EngineReport:
    return parse_report(report_data(findings, **fields))


def context(findings: list[dict[str, Any]] | None = None, **fields: Any) -> CheckContext:
    return CheckContext(HEAD, "fastops", report=report(findings or []), specs=["activations.*"],
                        **fields)


# -- conclusions -----------------------------------------------------------------------------


@pytest.mark.parametrize(("verdicts", "expected"), [
    ([], Conclusion.SUCCESS),
    (["reference-suspect"], Conclusion.NEUTRAL),
    (["tolerance-noise"], Conclusion.NEUTRAL),
    (["reference-suspect", "tolerance-noise"], Conclusion.NEUTRAL),
    (["candidate-bug"], Conclusion.FAILURE),
    (["undetermined"], Conclusion.FAILURE),
    ([None], Conclusion.FAILURE),  # not triaged counts as undetermined
    (["reference-suspect", "candidate-bug"], Conclusion.FAILURE),
    (["tolerance-noise", "undetermined"], Conclusion.FAILURE),
])
def test_conclusion_from_verdicts(verdicts: list[str | None], expected: Conclusion) -> None:
    ctx = context([finding(i, verdict=v) for i, v in enumerate(verdicts)])
    assert conclusion(ctx) is expected
    assert check_output(ctx).conclusion is expected


def test_the_sandbox_line_is_the_same_whichever_uid_a_sandbox_had() -> None:
    ctx = [CheckContext("a" * 40, "paddle", failure="setup failed",
                        isolation=["user-namespace", f"uid:{uid}", "seccomp"])
           for uid in (1900982654, 1900029537)]
    assert shown_layers(ctx[0].isolation) == ["user-namespace", "own-uid", "seccomp"]
    first, second = (check_output(c).summary for c in ctx)
    assert first == second and "own-uid" in first and "1900" not in first


def test_a_failure_reason_fails_the_check() -> None:
    assert conclusion(CheckContext(HEAD, "?", failure="the sandbox ran out of time")) \
        is Conclusion.FAILURE
    assert conclusion(context([], failure="setup failed")) is Conclusion.FAILURE
    assert conclusion(CheckContext(HEAD, "?")) is Conclusion.FAILURE  # no report at all


# -- fitting GitHub's limits -----------------------------------------------------------------


def numbered_lines(count: int, width: int = 50) -> str:
    return "".join(f"{i:06d} " + "x" * (width - 8) + "\n" for i in range(count))


@pytest.mark.parametrize("more", [None, REPORT_URL])
@pytest.mark.parametrize("limit", [400, 1000, 4321, CHECK_TEXT_LIMIT])
def test_fit_cuts_at_a_line_boundary_with_a_note(limit: int, more: str | None) -> None:
    text = numbered_lines(3000)
    fitted = fit(text, limit, more)
    assert len(fitted) <= limit
    kept, note = fitted.split(f"\n\n{CUT_NOTE}")
    assert text.startswith(kept) and text[len(kept)] == "\n"  # whole lines only
    assert kept.count("\n") >= 1
    dropped = len(text) - len(kept)
    assert f"{dropped} more characters" in note
    assert "The full report" in note and (more is None or more in note)


def test_fit_leaves_short_text_alone() -> None:
    text = numbered_lines(10)
    assert fit(text, len(text), REPORT_URL) == text
    assert fit("", 10, None) == ""
    one_line = "y" * 5000  # no line to cut at: still within the limit
    assert len(fit(one_line, 1000, REPORT_URL)) <= 1000


def big_report_context(message: str) -> CheckContext:
    findings = [finding(i, op=f"torch.op{i}", message=message) for i in range(300)]
    return context(findings, full_report_url=REPORT_URL)


def test_300_long_findings_fit_every_limit() -> None:
    ctx = big_report_context("m" * 1000)
    output, body = check_output(ctx), comment_body(ctx)
    assert len(output.summary) <= CHECK_TEXT_LIMIT and len(output.text) <= CHECK_TEXT_LIMIT
    assert len(body) <= COMMENT_LIMIT
    assert CUT_NOTE in output.text and REPORT_URL in output.text
    assert CUT_NOTE in body and REPORT_URL in body
    assert body.startswith(MARKER)  # the sticky comment can still be found again
    assert output.conclusion is Conclusion.FAILURE and "300 findings" in output.title


def test_cut_note_is_not_swallowed_by_an_open_code_fence() -> None:
    ctx = big_report_context("m" * 1000)
    for name, rendered in [("check run text", check_output(ctx).text),
                           ("comment", comment_body(ctx))]:
        note = rendered.index(CUT_NOTE)
        blocks = fenced_blocks(rendered)
        assert all(block.closed for block in blocks if block.start < note), (
            f"{name}: fit() cut inside a fenced code block, so the cut note and the full "
            f"report link render as code: …{rendered[note - 60:note + 40]!r}")


def test_check_run_text_fits_githubs_byte_limit() -> None:
    # GitHub (and the test server) measure output.summary and output.text in bytes
    ctx = big_report_context("é" * 1000)
    output = check_output(ctx)
    assert len(output.text) <= CHECK_TEXT_LIMIT
    size = len(output.text.encode())
    assert size <= CHECK_TEXT_LIMIT, (
        f"check run text is {size} bytes; GitHub rejects more than {CHECK_TEXT_LIMIT} bytes "
        "(fit() counts characters)")


_MD = MarkdownIt("commonmark")
# what fit() may add after the kept text: fence and HTML block ends, end tags
_CLOSERS = re.compile(r"(?:\n+(?:`{3,}|~{3,}|-->|\?>|\]\]>|>|<!-- -->|(?:</[a-z]+>)+))+$")


def note_problems(cut: str) -> list[str]:
    """How ``cut`` (a ``fit`` result) renders wrongly: the cut note is not a paragraph of its
    own at the top, as the last block, or HTML elements opened before it are still open."""
    tokens = _MD.parse(cut)
    top = [t for t in tokens if t.level == 0 and t.nesting >= 0]
    last = top[-1] if top else None
    problems = []
    if last is None or last.type != "paragraph_open":
        problems.append(f"the note is swallowed by {last.type if last else 'nothing'}")
    else:
        inline = tokens[tokens.index(last) + 1]
        if not inline.content.startswith(CUT_NOTE):
            problems.append(f"the last paragraph is not the note: {inline.content[:60]!r}")
    where = _WhereIsTheNote()
    where.feed(_MD.render(cut))  # not closed: an unfinished comment then hides the rest
    if where.inside != ["p", "strong"]:
        problems.append(f"the note renders inside {where.inside}" if where.inside is not None
                        else "the note does not render as text (inside a comment?)")
    return problems


class _WhereIsTheNote(HTMLParser):
    """The HTML elements open around the cut note's text, as a browser's tokenizer reads the
    rendered Markdown (stray end tags ignored)."""

    VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "wbr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.inside: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:
            del self.open[len(self.open) - 1 - self.open[::-1].index(tag):]

    def handle_data(self, data: str) -> None:
        if "Cut here:" in data and self.inside is None:
            self.inside = list(self.open)


def test_a_backtick_line_that_is_no_fence_gets_no_lone_fence() -> None:
    # an outsider's `/align ```` x…` echoed as inline code: a line that starts with five
    # backticks but holds backticks after them, which no fence does
    text = "Unknown command:\n\n````` ```` x" + "y" * 40_000 + " `````\n\n" + "more\n" * 8000
    cut = fit(text, COMMENT_LIMIT, None)
    assert len(cut) <= COMMENT_LIMIT
    assert note_problems(cut) == [], cut[-300:]
    assert "\n`````\n" not in cut


@pytest.mark.parametrize(("text", "closer"), [
    ("intro\n\n````python\n" + "code\n" * 20_000, "\n````\n\n" + CUT_NOTE),
    ("intro\n\n   ~~~~~\n" + "code ```\n" * 20_000, "\n~~~~~\n\n" + CUT_NOTE),
    ("<details><summary>repro</summary>\n\n```python\n" + "x = 1\n" * 20_000 + "```\n\n"
     "</details>\n", "\n```\n\n</details>\n\n" + CUT_NOTE),
    ("<!-- a comment\n" + "x\n" * 40_000 + "-->\n", "\n-->\n\n" + CUT_NOTE),
    ("<pre>\n" + "x\n" * 40_000 + "</pre>\n", "\n</pre>\n\n" + CUT_NOTE),
    ("- item\n\n  ```\n" + "  code\n" * 20_000, "\n\n" + CUT_NOTE),  # the list ends it
    ("> ```\n" + "> code\n" * 20_000, "\n\n" + CUT_NOTE),  # the quote ends it
    ("    indented\n" * 10_000, "\n\n" + CUT_NOTE),
])
def test_exactly_what_the_cut_left_open_is_closed(text: str, closer: str) -> None:
    cut = fit(text, COMMENT_LIMIT, None)
    assert len(cut) <= COMMENT_LIMIT
    assert closer in cut, cut[-200:]
    assert note_problems(cut) == []


# No `--`: Python's HTML tokenizer, which checks the result, ends a comment at `--\n>` (a
# browser's does not), and a raw HTML block left open holds the lines after it.
@pytest.mark.slow
@pytest.mark.parametrize("depth", [600, 100_000])
@pytest.mark.parametrize("nest", ["> ", "- ", "1. "])
def test_markdown_nested_deep_is_cut_without_a_traceback(depth: int, nest: str) -> None:
    # a fence opened 600 or 100,000 levels deep, then more lines of the same containers: the
    # parser stops at 20 levels and drops what is deeper
    text = nest * depth + "```\n" + (nest.strip() + " code\n") * 20_000
    cut = fit(text, COMMENT_LIMIT, None)
    assert len(cut) <= COMMENT_LIMIT
    assert note_problems(cut) == [], cut[-300:]


_WORDS = st.sampled_from(["word", "`code`", "```` x", "``` not a fence ```", "~~~ y", "<b>",
                          "é", "\\", "*", "> q", "- l", "1. n", "#", "***", "===",
                          "</details>"])
_PLAIN = st.sampled_from(["word", "`code`", "```` x", "~~~ y", "é", "1. n", "#", "* l"])


@st.composite
def markdown_blocks(draw: st.DrawFn, depth: int = 0) -> list[str]:
    """Lines of a random Markdown block: paragraphs, fences of varied characters, lengths,
    indents and info strings (closed, unclosed, closed too short), indented code, HTML blocks
    of every kind, and lists and quotes holding more blocks."""
    kinds = ["paragraph", "fence", "indented", "html"] + (["list", "quote"] if depth < 3 else [])
    kind = draw(st.sampled_from(kinds))
    body = draw(st.lists(st.lists(_WORDS, min_size=1, max_size=8).map(" ".join),
                         min_size=1, max_size=30))
    if kind == "paragraph":
        return body
    if kind == "fence":
        char = draw(st.sampled_from("`~"))
        length = draw(st.integers(3, 6))
        fence = " " * draw(st.integers(0, 3)) + char * length
        info = draw(st.sampled_from(["", "python", "a ` b", "x~y"]))
        end = draw(st.sampled_from(["", char * length, char * (length - 1), char * (length + 2)]))
        return [fence + info, *body, *([end] if end else [])]
    if kind == "indented":
        return ["    " + line for line in body]
    if kind == "html":  # raw HTML's own text in plain words (see _PLAIN)
        body = draw(st.lists(st.lists(_PLAIN, min_size=1, max_size=8).map(" ".join),
                             min_size=1, max_size=30))
        opener, closer = draw(st.sampled_from([
            ("<details><summary>s</summary>", "</details>"), ("<pre>", "</pre>"),
            ("<!--", "-->"), ("<div>", "</div>"), ("<?php", "?>"), ("<!X", ">")]))
        # not <![CDATA[: Python's HTML tokenizer, which checks the result, ends it at ]]>,
        # a browser's (and GitHub's) at the first >, as fit() does
        inner = draw(markdown_document(depth + 1)) if opener.startswith("<details") else body
        # a comment is always closed: an open one would hold later `<!--`, whose `--\n>`
        # ends it for Python's tokenizer (a cut still leaves comments open, and fit() closes)
        closed = opener == "<!--" or draw(st.booleans())
        return [opener, "", *inner, *([closer] if closed else [])]
    inner = draw(markdown_document(depth + 1))
    if kind == "quote":
        return ["> " + line if line else ">" for line in inner]
    marker = draw(st.sampled_from(["- ", "* ", "1. ", "10) "]))
    pad = " " * len(marker)
    return [marker + inner[0], *[pad + line if line else "" for line in inner[1:]]]


@st.composite
def markdown_document(draw: st.DrawFn, depth: int = 0) -> list[str]:
    blocks = draw(st.lists(markdown_blocks(depth), min_size=1, max_size=6 if depth else 12))
    return [line for block in blocks for line in [*block, ""]][:-1]


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(lines=markdown_document(), share=st.floats(0.05, 0.95), in_bytes=st.booleans(),
       more=st.sampled_from([None, REPORT_URL]))
def test_a_cut_of_any_markdown_leaves_the_note_outside_every_block(
        lines: list[str], share: float, in_bytes: bool, more: str | None) -> None:
    text = "\n".join(lines) + "\n"
    size = len(text.encode()) if in_bytes else len(text)
    limit = max(400, int(size * share))
    cut = fit(text, limit, more, in_bytes=in_bytes)
    if size <= limit:
        assert cut == text
        return
    assert (len(cut.encode()) if in_bytes else len(cut)) <= limit
    kept = _CLOSERS.sub("", cut[:cut.rindex(f"\n\n{CUT_NOTE}")])
    assert text.startswith(kept), "the cut text is not the start of the text"
    assert note_problems(cut) == [], cut


def test_a_cut_that_ends_in_html_in_a_quote_in_a_list_is_closed() -> None:
    """Found by the test above: markdown-it-py raised IndexError rendering a head that ends
    inside an HTML block nested in a quote in a list, without a final newline."""
    case = json.loads((ROOT / "tests" / "fixtures" / "markdown_cut_crash.json").read_text())
    text = "\n".join(case["lines"]) + "\n"
    limit = max(400, int(len(text.encode()) * case["share"]))
    cut = fit(text, limit, None, in_bytes=True)
    assert len(cut.encode()) <= limit and note_problems(cut) == [], cut


# -- untrusted text in Markdown --------------------------------------------------------------


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_ALLOWED_TAG = r"(?:/?(?:details|summary|code|sub)>|!-- alignbot:)"


@dataclass
class Block:
    start: int  # character offset of the opening fence line
    first: int  # line index of the opening fence
    last: int  # line index of the closing fence (the last line when unclosed)
    content: str
    closed: bool


def fenced_blocks(markdown: str) -> list[Block]:
    """CommonMark fenced code blocks: a run of ≥3 backticks (or tildes) opens one; a line of
    the same character, at least as long and with nothing else, closes it."""
    blocks, lines, i = [], markdown.split("\n"), 0
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if not opened or (opened[1][0] == "`" and "`" in opened[2]):
            i += 1
            continue
        first, fence = i, opened[1]
        closer = re.compile(rf" {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*")
        i += 1
        while i < len(lines) and not closer.fullmatch(lines[i]):
            i += 1
        closed = i < len(lines)
        last = i if closed else len(lines) - 1
        blocks.append(Block(starts[first], first, last, "\n".join(lines[first + 1:i]), closed))
        i += 1
    return blocks


def prose_lines(markdown: str) -> list[str]:
    """The lines outside fenced code blocks."""
    inside = {n for block in fenced_blocks(markdown) for n in range(block.first, block.last + 1)}
    return [line for n, line in enumerate(markdown.split("\n")) if n not in inside]


def without_code_spans(line: str) -> str:
    """A line with its inline code spans (`x`, ``x``, …) replaced by a placeholder."""
    out, pos = [], 0
    opener = re.compile(r"(?<![\\`])`+")
    while found := opener.search(line, pos):
        out.append(line[pos:found.start()])
        closer = re.compile(rf"(?<!`)`{{{len(found[0])}}}(?!`)").search(line, found.end())
        if closer is None:
            out.append(found[0])
            pos = found.end()
        else:
            out.append("CODE")
            pos = closer.end()
    out.append(line[pos:])
    return "".join(out)


def markdown_problems(markdown: str, untouched: Sequence[str] = ()) -> list[str]:
    """What untrusted text did to rendered Markdown: live mentions or issue references, raw
    HTML, live links, table rows with extra cells, and code blocks closed early. Each string
    in ``untouched`` must be the whole content of one closed fenced block."""
    problems = []
    blocks = fenced_blocks(markdown)
    problems += [f"unclosed code fence at offset {b.start}" for b in blocks if not b.closed]
    contents = [b.content for b in blocks if b.closed]
    problems += [f"not one intact code block: {text[:40]!r}" for text in untouched
                 if text.rstrip() not in contents]
    lines = prose_lines(markdown)
    for line in map(without_code_spans, lines):
        problems += [f"live mention {m!r} in {line[:80]!r}"
                     for m in re.findall(r"(?<![\w`])@[A-Za-z0-9][\w/-]*", line)]
        problems += [f"live reference {m!r} in {line[:80]!r}"
                     for m in re.findall(r"(?<![\w&])#\d+", line)]
        problems += [f"raw HTML in {line[:80]!r}"
                     for _ in re.findall(rf"(?<!\\)<(?!{_ALLOWED_TAG})[A-Za-z/!?]", line)]
        problems += [f"live link in {line[:80]!r}" for _ in re.findall(r"(?<!\\)\]\(", line)]
    table: list[str] = []
    for line in [*lines, ""]:
        if line.startswith("|"):
            table.append(line)
            continue
        cells = [len(re.findall(r"(?<!\\)\|", row)) - 1 for row in table]
        problems += [f"table row with {n} cells under a {cells[0]}-cell header: {row[:90]!r}"
                     for row, n in zip(table, cells, strict=True) if n != cells[0]]
        table = []
    return problems


def hostile_context() -> CheckContext:
    findings = [
        finding(0, op=f"torch.ops.{HOSTILE}", message=f"grad differs: {HOSTILE}",
                verdict_reason=HOSTILE, repro=HOSTILE_REPRO, judged_alone=True,
                downstream_of=[{"kind": "value-mismatch", "op": f"torch.{HOSTILE}",
                                "node": f"v1 {HOSTILE}"}]),
        finding(1, kind="candidate-error", verdict="undetermined", op="torch.add",
                message=f"the candidate raised ValueError: {HOSTILE}",
                verdict_reason=f"RuntimeError: {HOSTILE}", repro=HOSTILE_REPRO,
                cause=f"raised: ValueError: {HOSTILE}",
                program={"nodes": [{"id": "v0", "op": "input", "dtype": HOSTILE}]}),
    ]
    return CheckContext(HEAD, f"import fastops {HOSTILE}", report=report(
        findings, reference=f"2.5.1 {HOSTILE}"), specs=[f"ops.{HOSTILE}"], seconds=3.0)


def test_hostile_helper_sees_what_it_should() -> None:
    # the checker itself: it must flag each kind of breakage it is meant to find
    bad = ("@octocat #12 <img src=x> [a](javascript:x)\n\n| a | b |\n| --- | --- |\n"
           "| `x|y` | z |\n\n```\nopen")
    found = " ".join(markdown_problems(bad, ["never there"]))
    for kind in ("live mention '@octocat'", "live reference '#12'", "raw HTML", "live link",
                 "table row with 3 cells", "unclosed code fence", "not one intact"):
        assert kind in found
    assert markdown_problems(f"`@x` ``a`b`` @{ZWSP}x #{ZWSP}1 \\<b\\> \\[a\\](b)\n"
                             "```\n@x <b> #1\n```") == []


def test_a_finding_downstream_of_another_says_so_in_the_comment_and_check_run() -> None:
    ctx = context([finding(0, op="torch.nn.functional.log_softmax", kind="value-mismatch"),
                   finding(1, op="torch.nn.functional.nll_loss", kind="value-mismatch",
                           judged_alone=True, downstream_of=[
                               {"kind": "value-mismatch", "node": "v1",
                                "op": "torch.nn.functional.log_softmax"}])])
    mark = "Downstream of value-mismatch at `torch.nn.functional.log_softmax`"
    for text in (comment_body(ctx), check_output(ctx).text):
        assert text.count(mark) == 1
        assert text.index(mark) > text.index("at `torch.nn.functional.nll_loss`")


def test_the_check_run_and_comment_show_the_candidates_packages() -> None:
    ctx = CheckContext(HEAD, "import torchax", report=report(
        [finding(0)], candidate_packages={"torch": "2.13.0", "torchax": "0.0.13"}))
    assert "| packages | torchax 0.0.13, torch 2.13.0 |" in check_output(ctx).summary
    assert "candidate torchax 0.0.13, torch 2.13.0: 1 finding in 1 cause." in comment_body(ctx)


def test_comment_keeps_untrusted_text_inert() -> None:
    ctx = hostile_context()
    body = comment_body(ctx)
    messages = [folded(f.message) for f in ctx.report.findings] if ctx.report else []
    problems = markdown_problems(body, [HOSTILE_REPRO, *messages])
    assert problems == [], "the comment breaks on untrusted text:\n" + "\n".join(problems)
    assert f"@{ZWSP}octocat" in body  # defused, not dropped
    table = [line for line in body.split("\n") if line.startswith("| ")]
    assert len(table) == 2 + 2  # header, delimiter, one row per finding


def test_check_run_output_keeps_untrusted_text_inert() -> None:
    ctx = hostile_context()
    output = check_output(ctx)
    problems = markdown_problems(output.summary) + markdown_problems(output.text, [HOSTILE_REPRO])
    assert problems == [], "the check run breaks on untrusted text:\n" + "\n".join(problems)
    assert "\n" not in output.title and "@octocat" not in output.title


def test_failure_reason_and_advice_stay_inert() -> None:
    ctx = CheckContext(HEAD, "?", failure=f"setup exited 1: {HOSTILE}", advice=HOSTILE)
    body, output = comment_body(ctx), check_output(ctx)
    for rendered in (body, output.summary, output.text):
        assert markdown_problems(rendered) == []
    assert "setup exited 1" in body and "setup exited 1" in output.summary


# -- annotations -----------------------------------------------------------------------------


TWO_FILES_CONFIG = """\
candidate:
  preset: torch
ops:
  - paths: ["kernels/*.py"]
    specs: ["activations.softplus"]
"""
PATCH_AT_41 = "@@ -40,6 +41,7 @@ def softplus(x):\n     y = x\n+    y = y * 2\n     return y\n" \
              "@@ -90,3 +92,4 @@\n+pass\n"


def test_annotations_land_on_the_first_changed_line_of_each_op_file() -> None:
    config = load_config(TWO_FILES_CONFIG)
    changed = ["kernels/softplus.py", "kernels/shared.py", "README.md"]
    ctx = context([
        finding(0, verdict="candidate-bug"),
        finding(1, verdict="reference-suspect", kind="value-mismatch"),
        finding(2, spec="activations.mish", op="torch.nn.functional.mish"),  # no op file
    ], patches={path: PATCH_AT_41 for path in changed},
        op_files_for=_op_files_for(config, changed))
    notes = annotations_for(ctx)
    assert [(a["path"], a["start_line"], a["end_line"], a["annotation_level"]) for a in notes] \
        == [("kernels/softplus.py", 41, 41, "failure"), ("kernels/shared.py", 41, 41, "failure"),
            ("kernels/softplus.py", 41, 41, "warning"), ("kernels/shared.py", 41, 41, "warning")]
    assert notes[0]["title"] == "grad-mismatch at torch.nn.functional.softplus"
    assert notes[2]["message"].startswith("reference-suspect: ")
    assert check_output(ctx).annotations == notes


def test_annotations_are_sent_in_batches_of_50(github_server: GitHubServer) -> None:
    github_server.add_installation(INSTALLATION, OWNER)
    github_server.add_repo(OWNER, REPO, INSTALLATION, files_by_ref={HEAD: {"k.py": "x\n"}})
    gh = GitHubApp(github_server.app_id, github_server.private_key_pem, ApiOptions(
        base_url=github_server.url, seconds_between_writes=0)).client(INSTALLATION)
    run = gh.get_repo(f"{OWNER}/{REPO}").create_check_run(
        name=CHECK_NAME, head_sha=HEAD, status="in_progress", external_id="batch-test")
    annotations = [{"path": "k.py", "start_line": n + 1, "end_line": n + 1,
                    "annotation_level": "failure", "title": f"finding {n}",
                    "message": f"message {n}"} for n in range(120)]
    output = CheckOutput(Conclusion.FAILURE, "120 findings", "summary", "text", annotations)
    github_server.clear_log()

    complete_run(run, output)

    patches = [e for e in github_server.exchanges if e.method == "PATCH"]
    assert [e.status for e in patches] == [200, 200, 200]
    sent = [len(e.request["output"].get("annotations", [])) for e in patches]
    assert sent == [ANNOTATION_BATCH, ANNOTATION_BATCH, 20]
    assert ["conclusion" in e.request for e in patches] == [False, False, True]
    assert patches[-1].request["status"] == "completed"
    assert patches[-1].request["conclusion"] == "failure"
    (stored,) = github_server.check_runs_for(OWNER, REPO, HEAD)
    assert stored.status == "completed" and stored.conclusion == "failure"
    assert [a["title"] for a in stored.annotations] == [f"finding {n}" for n in range(120)]
    # the batches matter: GitHub (and the test server) refuse 51 annotations in one request
    with pytest.raises(GithubException) as refused:
        run.edit(output={"title": "t", "summary": "s", "annotations": annotations[:51]})
    assert refused.value.status == 422


# -- a pull request with a bad config, or none, end to end -----------------------------------


BROKEN_CONFIG = b"""\
# alignbot's configuration, with a typo
candidate:
  preset: torch
draws: 3
drawz: 4
ops:
  - paths: ["fastops.py"]
    specs: ["activations.softplus"]
"""


def seed_pull(server: GitHubServer, config: bytes | None) -> str:
    """examples/fastops and a pull request that changes fastops.py, with ``config`` as the
    head's .github/alignbot.yml (None: no config anywhere)."""
    base = _files(ROOT / "examples" / "fastops")
    base.pop(CONFIG_PATH)
    head = {**base, "fastops.py": (ROOT / "examples" / "pull-request" / "fastops.py")
            .read_bytes()}
    if config is not None:
        head[CONFIG_PATH] = config
    return open_pull(server, base, head, title="Speed up softplus")


def test_invalid_config_fails_the_check_and_names_the_line(github_server: GitHubServer,
                                                           tmp_path: Path) -> None:
    github = github_server
    head = seed_pull(github, BROKEN_CONFIG)
    port = free_port()
    with running(settings_for(github, tmp_path, port)):
        reply = deliver(github, port, "pull_request",
                        github.webhook("pull_request.opened", OWNER, REPO, number=NUMBER))
        assert reply.status_code == 202

        def posted() -> bool:
            runs = github.check_runs_for(OWNER, REPO, head)
            return bool(runs) and runs[0].status == "completed" \
                and bool(github.comments_on(OWNER, REPO, NUMBER))

        wait_for(posted, 60, "the check run and the comment")
    (run,) = github.check_runs_for(OWNER, REPO, head)
    (comment,) = github.comments_on(OWNER, REPO, NUMBER)
    assert run.conclusion == "failure"
    summary = run.output["summary"]
    for text in (summary, comment.body):
        assert "alignbot.yml:5:" in text and "drawz" in text and "did you mean" in text
        assert "could not run" in text
    assert comment.user.login == "alignbot[bot]" and MARKER in comment.body
    assert not run.annotations


def test_no_config_means_silence(github_server: GitHubServer, tmp_path: Path) -> None:
    github = github_server
    seed_pull(github, None)
    port = free_port()
    with running(settings_for(github, tmp_path, port)) as service:
        queue = SqlJobQueue(service.engine)
        reply = deliver(github, port, "pull_request",
                        github.webhook("pull_request.opened", OWNER, REPO, number=NUMBER))
        assert reply.status_code == 202

        def finished() -> bool:
            jobs = queue.list(kind=JOB_KIND)
            return bool(jobs) and all(j.state not in (JobState.QUEUED, JobState.RUNNING)
                                      for j in jobs)

        wait_for(finished, 60, "the job")
        (job,) = queue.list(kind=JOB_KIND)
    assert job.state is JobState.DONE and job.result == {"skipped": f"no {CONFIG_PATH}"}
    assert github.check_runs_for(OWNER, REPO) == []
    assert github.comments_on(OWNER, REPO, NUMBER) == []
    assert github.count("POST", r"/check-runs|/comments") == 0
    assert github.count("PATCH") == 0


# -- the defusing filters --------------------------------------------------------------------


def filtered(value: str, name: str) -> str:
    """``value`` through one filter of the templates that show untrusted data."""
    return environment(untrusted=True).from_string(f"{{{{ value | {name} }}}}").render(
        value=value)


@pytest.mark.parametrize("name", ["inline", "cell", "inline(40)"])
@pytest.mark.parametrize("value", [
    "@octocat", "cc @octocat.", "@org/team", "#123", "GH-12", "<img src=x onerror=alert(1)>",
    "<b>bold</b>", MARKER, "<!-- alignbot:command issue:1 -->", "[x](https://evil.example)",
    "![img](https://evil.example/i.png)", "<https://evil.example>", "https://evil.example/a",
    "see www.evil.example", "mail me: a@evil.example", "&#64;octocat", "[x]: https://evil",
    "line one\n# heading\r\n```\n~~~", "`a` `` b ``", "1. item", "> quote",
])
def test_untrusted_text_is_inert_through_every_prose_filter(value: str, name: str) -> None:
    out = filtered(value, name)
    assert "\n" not in out and "\r" not in out
    assert markdown_problems(out) == []
    assert not re.search(r"(?<![\\])@[A-Za-z0-9]", out)  # every @ defused
    assert not re.search(r"(?i)(https?:|www)(?=[./])", out)  # no bare URL left to autolink
    assert "<!--" not in out and MARKER not in out
    assert not re.search(r"(?<!\\)[<\[`&]", out)  # no tag, link, code span or entity opens


def test_a_template_that_forgets_a_filter_still_posts_defused_text() -> None:
    env = environment(untrusted=True)
    out = env.from_string("{{ value }} and {{ number }}").render(
        value=f"@octocat <img src=x> {MARKER} [x](https://evil.example)", number=3)
    assert markdown_problems(out) == [] and MARKER not in out and out.endswith(" and 3")
    assert env.from_string("{{ value }}").render(value=Trusted("<b>ok</b>")) == "<b>ok</b>"
    for bad in (None, True, {"a": 1}, ["x"]):
        with pytest.raises(TypeError):
            env.from_string("{{ value }}").render(value=bad)
    # deny by default: every template is strict but the engine's own documents
    assert environment().from_string("{{ value }}").render(value="@a") != "@a"
    names = {p.name for p in templates_dir().glob("*.j2")}
    assert names > ENGINE_TEMPLATES
    macros = {m for name in names
              for m in re.findall(r"{%-? macro (\w+)\(", (templates_dir() / name).read_text())}
    for name in names:  # `static` trusts a macro's output, and nothing else
        for value in re.findall(r"{{-?\s*(.*?)\s*\|\s*static\b",
                                (templates_dir() / name).read_text()):
            assert re.fullmatch(r"(\w+)\([^()]*\)", value)[1] in macros, (name, value)
    # each name, with a body that prints a raw string (an overlay: the shared one stays as is)
    env = environment().overlay(loader=jinja2.DictLoader({name: "{{ value }}" for name in names}))
    for name in names:
        out = env.get_template(name).render(value="@octocat <b>")
        assert (out == "@octocat <b>") == (name in ENGINE_TEMPLATES), name


@pytest.mark.parametrize("value", [
    "x\n```\n@octocat <img src=x>\n```", "x\n~~~~\ny", "x\r```\r@octocat", "x\u2028```",
    "````\n`````\n", f"{MARKER}\n<!-- a -->", "\u202eevil\u202c code\u200b",
])
def test_a_code_block_cannot_be_closed_from_inside(value: str) -> None:
    out = filtered(value, "block")
    blocks = fenced_blocks(out)
    assert len(blocks) == 1 and blocks[0].closed and blocks[0].last == out.count("\n")
    assert "<!--" not in out and not any(c in out for c in "\u202e\u202c\r\u2028")
    assert out.count(ZWSP) == out.count(f"<{ZWSP}!-")  # the only zero-width space: ours


@pytest.mark.parametrize("value", ["a`b", "``x``", "a\nb\r\nc", "`", "|", "@octocat\u202e",
                                   MARKER])
def test_inline_code_stays_inline(value: str) -> None:
    out = filtered(value, "code")
    assert "\n" not in out and "\r" not in out and "\u202e" not in out
    assert without_code_spans(out) == "CODE"
    assert "<!--" not in out


def test_bidi_and_zero_width_characters_are_dropped_from_identifiers() -> None:
    tricky = "torch.\u202eudf\u202c\u200b.relu\u2066\ufeff"
    for name in ("inline", "code", "cell"):
        out = filtered(tricky, name)
        assert not re.search("[\u202a-\u202e\u2066-\u2069\u200b-\u200f\ufeff]", out), name


def test_markers_and_links_are_checked() -> None:
    assert marker(MARKER) == MARKER and marker("") == ""
    for bad in ("<!-- x -->", "<!-- alignbot:a --> <img>", "<!-- alignbot:a-- -->"):
        with pytest.raises(ValueError):
            marker(bad)
    assert link("https://github.com/o/r/issues/1") == "https://github.com/o/r/issues/1"
    for bad in ("javascript:alert(1)", "https://x.example/a)(b", "https://x y", "http://x"):
        assert link(bad) == "#"


# -- what a maintainer reads -----------------------------------------------------------------


LONG_MESSAGE = ("result v3: Mismatched elements: 4 / 50 (8.0%); greatest absolute difference: "
                "1.07288e-05 at index (0, 0, 2, 1) (up to 1e-05 allowed); greatest relative "
                "difference: 0.00026587 at index (0, 0, 2, 2) (up to 1.3e-06 allowed)")


def test_a_long_message_is_folded_in_its_block_not_behind_a_scroll_bar() -> None:
    ctx = context([finding(0, message=LONG_MESSAGE)])
    for body in (comment_body(ctx), check_output(ctx).text or ""):
        (block,) = [b for b in fenced_blocks(body) if "Mismatched" in b.content]
        assert max(len(line) for line in block.content.splitlines()) <= 100
        assert " ".join(block.content.split()) == LONG_MESSAGE


def test_one_cause_gets_its_section_without_a_table_above_it() -> None:
    one, two = comment_body(context([finding(0)])), comment_body(context([
        finding(0), finding(1, kind="value-mismatch", op="torch.cos")]))
    assert "| | cause | findings | verdicts |" not in one and "## 1. " in one
    assert "| | cause | findings | verdicts |" in two


def test_every_table_of_the_check_run_has_a_header() -> None:
    summary = check_output(context([finding(0)])).summary
    headers = [line for i, line in enumerate(summary.splitlines()[:-1])
               if summary.splitlines()[i + 1].startswith("| ---")]
    assert len(headers) == 2  # the summary, the causes
    assert all(any(cell.strip() for cell in line.strip("|").split("|")) for line in headers)


def test_each_finding_shows_its_case_before_the_whole_script() -> None:
    repro = "import torch\n\n\ndef case(torch):\n    return {'out': torch.ones(1)}\n"
    ctx = context([finding(0, repro=repro), finding(1, op="torch.cos", repro=HOSTILE_REPRO)])
    for body in (comment_body(ctx), check_output(ctx).text or ""):
        case = "def case(torch):\n    return {'out': torch.ones(1)}"
        assert f"The case, run on PyTorch and on the candidate:\n\n```python\n{case}\n```" \
            in body
        assert body.count("The case, run on PyTorch") == 1  # the script without one: none
        assert body.index(case) < body.index("import torch\n\n\ndef case")
