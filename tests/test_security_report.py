"""A pull request that forges the engine's report: its spec runs inside the engine process and
rewrites the JSON report after the engine wrote it; what GitHub sees stays inert and final."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from service import NUMBER, OWNER, REPO, Service, completed, open_pull
from test_output import markdown_problems, prose_lines, without_code_spans
from test_security_faults import assert_no_traceback

from alignbot.bot.alignment import CONFIG_PATH
from alignbot.bot.demo import _files, wait_for
from alignbot.bot.output import MARKER

ROOT = Path(__file__).resolve().parent.parent

TIMEOUT = 300
EVIL = "https://evil.example"
HOSTILE = (f"@octocat @org/team #123 GH-7 <img src=x onerror=alert(1)> [x]({EVIL}) "
           f"![i]({EVIL}/i.png) <{EVIL}/a> {EVIL}/bare www.evil.example &#64;octocat "
           f"{MARKER} \u202egnp.exe\u202c "
           "`` ` ``\n```\n~~~\n</details>\n# heading")
FORGED_LINK = f"{EVIL}/pytorch/pytorch/issues/new?title=looks+legit"
CONFIG = b"""\
candidate:
  preset: torch
ops:
  - paths: ["fastops.py"]
    specs: ["hostile.*"]
specs: ["hostile.py"]
draws: 1
"""
# The pull request's spec: it runs inside the engine process, so it can register an atexit
# hook that replaces the report (`--json PATH` on the engine's command line) once written.
SPEC = '''\
import atexit, json, sys
from alignbot.checks import autotest, random_tensor

FORGED = json.loads({forged!r})
PATH = sys.argv[sys.argv.index("--json") + 1]


def forge():
    with open(PATH, "w") as handle:
        handle.write(json.dumps(FORGED))


atexit.register(forge)


@autotest(n=1, backward=False)
def relu(torch):
    return torch.relu(random_tensor(ndim=1))
'''


def forged_finding(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "fingerprint": "0123456789ab", "kind": "value-mismatch", "op": "torch.relu",
        "spec": "hostile.relu", "message": "result v1 differs", "count": 1,
        "observation": "v1", "node": "v1", "program": {"nodes": []},
        "verdict": "reference-suspect", "verdict_reason": "float64 sides with the candidate",
        "repro": "import torch\n", "repro_verified": True,
        "upstream_title": "torch.relu is wrong", "upstream_draft": "### 🐛 Describe the bug\n",
        "upstream_url": None}
    return {**base, **fields}


def forged_report(findings: list[Any], **fields: Any) -> dict[str, Any]:
    return {"report_version": 1, "reference": "2.5.1", "candidate": "torch", "seed": 1,
            "specs_run": 1, "specs": ["hostile.relu"], "programs_run": 1,
            "findings": findings, **fields}


CONCLUSIONS = {"hostile-strings": "neutral", "hostile-enums": "failure", "malformed": "failure",
               "forged-upstream-link": "neutral", "marker-in-message": "failure"}
CASES: dict[str, Any] = {
    # hostile text in every free-text field, valid kinds and verdicts: rendered, defused
    "hostile-strings": forged_report([forged_finding(
        op=HOSTILE, spec=HOSTILE, message=HOSTILE, observation=HOSTILE, node=HOSTILE,
        verdict_reason=HOSTILE, repro=HOSTILE, repro_output=HOSTILE,
        upstream_title=HOSTILE, upstream_draft=HOSTILE, upstream_url=HOSTILE,
        cause=f"raised: {HOSTILE}",
        program={"nodes": [{"id": "v0", "op": "input", "dtype": HOSTILE}]})],
        reference=HOSTILE, candidate=HOSTILE, specs=[HOSTILE]),
    # hostile text where the engine writes enums and numbers: refused
    "hostile-enums": forged_report([forged_finding(kind=HOSTILE, verdict=HOSTILE)],
                                   specs_run=HOSTILE, programs_run="24"),
    "malformed": {"findings": [1, "two"]},
    # a link to another site, labelled by the bot as a prefilled PyTorch issue
    "forged-upstream-link": forged_report([forged_finding(upstream_url=FORGED_LINK)]),
    "marker-in-message": forged_report([forged_finding(
        verdict="candidate-bug", upstream_draft=None, upstream_title=None,
        message=f"{MARKER} @octocat <img src=x> cc @octocat")]),
}


def seed_forged_pull(github: Any, forged: Any) -> str:
    base = _files(ROOT / "examples" / "fastops")
    head = {**base, CONFIG_PATH: CONFIG,
            "hostile.py": SPEC.format(forged=json.dumps(forged)).encode(),
            "fastops.py": base["fastops.py"] + b"\n# faster\n"}
    return open_pull(github, base, head, title="Speed up relu", author="mallory")


_LINK_TARGET = re.compile(r"(?<!\\)\]\(([^)\s]*)")
_BARE_URL = re.compile(r"(?i)(?:https?://|www\.)[^\s)>\]]*")


def live_problems(markdown: str) -> list[str]:
    """What would be live on GitHub: mentions, references, raw HTML, links other than the
    bot's own to github.com, and any copy of a hidden marker."""
    problems = markdown_problems(markdown)
    problems = [p for p in problems if not p.startswith("live link")]  # checked below
    for line in map(without_code_spans, prose_lines(markdown)):
        problems += [f"link to {url!r}" for url in _LINK_TARGET.findall(line)
                     if not url.startswith("https://github.com/")]
        problems += [f"bare URL {url!r}" for url in _BARE_URL.findall(line)
                     if not url.startswith("https://github.com/")]
        problems += [f"<img in {line[:80]!r}" for _ in re.findall(r"(?<!\\)<img", line)]
    problems += [f"hidden marker copy at {m.start()}" for m in re.finditer("<!--", markdown)]
    return problems


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_forged_report_posts_nothing_live_and_completes_the_check(
        case: str, github_server: Any, make_service: Any) -> None:
    github = github_server
    head = seed_forged_pull(github, CASES[case])
    service: Service = make_service()
    service.deliver(github, "pull_request",
                    github.webhook("pull_request.opened", OWNER, REPO, number=NUMBER))
    wait_for(lambda: completed(github, head), TIMEOUT, "the check run and the comment")

    (run,) = github.check_runs_for(OWNER, REPO, head)
    assert run.status == "completed" and run.conclusion == CONCLUSIONS[case]
    (comment,) = github.comments_on(OWNER, REPO, NUMBER)
    assert comment.body.startswith(MARKER), "the sticky comment lost its marker"
    body = comment.body[len(MARKER):]
    problems = [f"comment: {p}" for p in live_problems(body)]
    for name in ("title", "summary", "text"):
        text = str(run.output.get(name) or "")
        problems += [f"check run {name}: {p}" for p in live_problems(text)]
    for note in run.annotations:  # plain text on GitHub: no Markdown, but no marker either
        problems += [f"annotation: {p}" for p in ["<!--"] if p in json.dumps(note)]
    assert problems == [], "\n".join(problems)

    # the forged link never reached GitHub, in any request the bot made
    sent = json.dumps([e.request for e in github.exchanges if e.method in ("POST", "PATCH")])
    assert FORGED_LINK not in sent
    if case in ("hostile-enums", "malformed"):
        assert "the engine's report was invalid" in run.output["summary"]
        assert "the engine's report was invalid" in comment.body
    if case == "forged-upstream-link":  # the bot's own link, from the configured tracker
        links = _LINK_TARGET.findall(body)
        assert any(u.startswith("https://github.com/pytorch/pytorch/issues/new?") for u in links)
    if case == "marker-in-message":  # shown, as inert text
        assert "alignbot:sticky-comment" in run.output["text"]


# The spec writes the report as text: a report nested this deep cannot go through json.dumps.
DEEP_SPEC = '''\
import atexit, sys
from alignbot.checks import autotest, random_tensor

PATH = sys.argv[sys.argv.index("--json") + 1]
TEXT = {report!r}.replace('"DEEP"', "[" * {depth} + "]" * {depth})


def forge():
    with open(PATH, "w") as handle:
        handle.write(TEXT)


atexit.register(forge)


@autotest(n=1, backward=False)
def relu(torch):
    return torch.relu(random_tensor(ndim=1))
'''


@pytest.mark.slow
@pytest.mark.parametrize("depth", [600, 100_000])
def test_a_report_nested_deep_fails_the_check_saying_it_is_invalid(
        depth: int, github_server: Any, make_service: Any) -> None:
    github = github_server
    report = json.dumps(forged_report([forged_finding(program={"nodes": "DEEP"})]))
    base = _files(ROOT / "examples" / "fastops")
    head = open_pull(github, base, {
        **base, CONFIG_PATH: CONFIG, "fastops.py": base["fastops.py"] + b"\n# faster\n",
        "hostile.py": DEEP_SPEC.format(report=report, depth=depth).encode()},
        title="Speed up relu", author="mallory")
    service: Service = make_service()
    service.deliver(github, "pull_request",
                    github.webhook("pull_request.opened", OWNER, REPO, number=NUMBER))
    wait_for(lambda: completed(github, head), TIMEOUT, "the check run and the comment")

    (run,) = github.check_runs_for(OWNER, REPO, head)
    assert run.status == "completed" and run.conclusion == "failure"
    said = "its report is invalid: it nests deeper than 64 levels"
    assert said in run.output["summary"], run.output["summary"]
    (comment,) = github.comments_on(OWNER, REPO, NUMBER)
    assert said in comment.body
    assert_no_traceback(service)
