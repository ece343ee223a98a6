"""The verdict follows the change (bot/baseline.py): a pull request of the example library,
pushed three times, checked by the real service against its merge base and the repository's
known divergences. The base has two long-broken ops: mish (pre-existing) and softsign (in
``.github/alignbot-known.yml``)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from service import NUMBER, OWNER, REPO, Service, completed, open_pull

from alignbot.bot.baseline import classify
from alignbot.bot.demo import EXAMPLES, _files, _sha, wait_for
from alignbot.bot.engine_report import empty_report, parse_report
from alignbot.bot.storage import BASELINES, make_engine, transaction
from alignbot.bot.testing.github import GitHubServer
from alignbot.checks.known import load_known

EXAMPLE = _files(EXAMPLES / "fastops")
FASTOPS = EXAMPLE["fastops.py"].decode()
# mish computes its own softplus here, so that breaking softplus leaves it alone
LONG_BROKEN = FASTOPS.replace(
    "return x * torch.tanh(torch.nn.functional.softplus(x))",
    "return x * torch.tanh(torch.log1p(torch.exp(x))) * 1.001  # long broken"
).replace("def enable() -> None:", '''def softsign(x: torch.Tensor) -> torch.Tensor:
    return x / (1 + x.abs()) * 1.001  # long broken, and known


def enable() -> None:''').replace("    functional.mish = mish\n",
                                  "    functional.mish = mish\n"
                                  "    functional.softsign = softsign\n")
CONFIG = EXAMPLE[".github/alignbot.yml"].decode().replace("draws: 12", "draws: 3").replace(
    '"activations.mish"]', '"activations.mish", "activations.softsign"]')
KNOWN = """\
known:
  - op: "torch.nn*[Ss]oftsign"
    reason: softsign is scaled on purpose
    upstream: https://github.com/demo-org/fastops/issues/3
"""
BASE = {**EXAMPLE, "fastops.py": LONG_BROKEN.encode(), ".github/alignbot.yml": CONFIG.encode(),
        ".github/alignbot-known.yml": KNOWN.encode()}
PUSHES = {
    # touches the long-broken op's file without changing what it computes
    "touch": LONG_BROKEN.replace("# long broken\n", "# long broken (still)\n"),
    # breaks another op: the softplus backward forgets beta
    "break": LONG_BROKEN.replace("sig = torch.sigmoid(scaled)", "sig = torch.sigmoid(x)"),
    # fixes the known one
    "fix": LONG_BROKEN.replace("x / (1 + x.abs()) * 1.001", "x / (1 + x.abs())"),
}
# the broken code pushed twice more, as new commits that change only a note
PUSHES["again"] = PUSHES["third"] = PUSHES["break"]


@pytest.fixture(scope="module")
def pushes(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Each push's check run and comment, in order, and the baselines table's rows."""
    folder = tmp_path_factory.mktemp("baseline")
    with GitHubServer() as github:
        heads = {name: {**BASE, "fastops.py": code.encode(), "NOTES.md": name.encode()}
                 for name, code in PUSHES.items()}
        shas = {"touch": open_pull(github, BASE, heads["touch"])}
        service = Service(github, folder, ALIGNBOT_BASELINE="true")
        service.start()
        results: dict[str, Any] = {}
        try:
            for index, name in enumerate(PUSHES):
                if index:
                    shas[name] = _sha(heads[name])
                    github.push(OWNER, REPO, NUMBER, shas[name], tree=heads[name])
                action = "pull_request.synchronize" if index else "pull_request.opened"
                reply = service.deliver(github, "pull_request",
                                        github.webhook(action, OWNER, REPO, number=NUMBER))
                assert reply.status_code == 202, reply.text
                wait_for(lambda name=name: completed(github, shas[name]), 600, name)  # type: ignore[misc]
                (run,) = github.check_runs_for(OWNER, REPO, shas[name])
                (comment,) = github.comments_on(OWNER, REPO, NUMBER)
                results[name] = (run, comment.body)
        finally:
            service.stop()
        engine = make_engine(f"sqlite:///{folder / 'alignbot.db'}")
        with transaction(engine) as conn:
            rows = conn.execute(BASELINES.select()).all()
        engine.dispose()
        return results, rows, service.log_text()


@pytest.mark.slow
def test_a_push_touching_a_long_broken_op_has_no_new_divergence(pushes: Any) -> None:
    (run, body), rows, log = pushes[0]["touch"], pushes[1], pushes[2]
    assert run.conclusion == "success", (run.output, log[-3000:])
    title = run.output["title"]
    assert title.startswith("no new divergences (") and "pre-existing" in title, title
    assert "known" in title and "fixed" not in title, title
    assert "pre-existing (on the merge base too)</summary>" in body
    assert "softsign is scaled on purpose" in body and "mish" in body
    assert len(rows) == 1  # the merge base's check, kept for the next pushes


def test_a_push_breaking_another_op_fails_with_that_finding_alone(pushes: Any) -> None:
    run, body = pushes[0]["break"]
    assert run.conclusion == "failure", run.output
    title = run.output["title"]
    assert "new divergence" in title and "pre-existing" in title, title
    new = body.split("pre-existing (on the merge base too)")[0]
    assert "torch.nn.functional.softplus" in new and "grad-mismatch" in new
    assert "**Numbers** (as the repro returns them): `grad " in new, new
    assert "mish" not in new.split("cause")[-1] and "softsign" not in new
    assert len(pushes[1]) == 1  # the same merge base, seed and configuration: cached


def test_a_push_fixing_a_known_divergence_asks_to_remove_its_entry(pushes: Any) -> None:
    run, body = pushes[0]["fix"]
    assert run.conclusion == "success", run.output
    assert "fixed" in run.output["title"] and "known" not in run.output["title"]
    assert "Fixed — remove it from `.github/alignbot-known.yml`:** line 2" in body, body


def test_three_pushes_of_the_same_code_give_the_same_findings(pushes: Any) -> None:
    runs = [pushes[0][name] for name in ("break", "again", "third")]
    assert len({run.head_sha for run, _ in runs}) == 3  # three commits
    assert {(run.conclusion, run.output["title"]) for run, _ in runs} == {
        (runs[0][0].conclusion, runs[0][0].output["title"])}
    # the comments differ in the commit they name, and nowhere else
    bodies = [body.replace(run.head_sha[:12], "HEAD") for run, body in runs]
    assert bodies[0] == bodies[1] == bodies[2]
    assert re.search(r"\b[0-9a-f]{12}\b", bodies[0])  # the findings' fingerprints


def _finding(fingerprint: str, op: str, **extra: Any) -> dict[str, Any]:
    return {"fingerprint": fingerprint, "kind": "value-mismatch", "op": op, "spec": "s.x",
            "message": "m", "count": 1, "observation": "v1", "node": "v1",
            "program": {"nodes": []}, "signature": "value float32", **extra}


def _report(*findings: dict[str, Any], **extra: Any) -> Any:
    return parse_report({**empty_report().dump(), "specs": ["s.x"], "specs_run": 1,
                         "findings": list(findings), **extra})


def test_findings_are_known_then_pre_existing_then_new_and_a_miss_is_no_fix() -> None:
    base = _report(_finding("a" * 12, "torch.mm"), _finding("b" * 12, "torch.add"),
                   _finding("c" * 12, "torch.sub"), _finding("d" * 12, "torch.erf"),
                   _finding("9" * 12, "torch.exp", drawn_fingerprint="e" * 12))
    head = _report(_finding("a" * 12, "torch.mm"), _finding("e" * 12, "torch.exp"),
                   _finding("f" * 12, "torch.mul"), rechecked=[
                       {"fingerprint": "b" * 12, "kind": "value-mismatch", "op": "torch.add",
                        "agrees": True},
                       {"fingerprint": "c" * 12, "kind": "value-mismatch", "op": "torch.sub",
                        "agrees": False},
                       {"fingerprint": "d" * 12, "kind": "value-mismatch", "op": "torch.erf",
                        "agrees": True}])
    known = load_known("known:\n  - op: torch.mm\n    reason: mm is blocked\n"
                       "  - op: torch.erf\n    reason: erf rounds\n")
    got = classify(head, base, known)
    assert [f.op for f, _ in got.known] == ["torch.mm"]
    assert [f.op for f in got.pre_existing] == ["torch.exp"]  # by the fingerprint as drawn
    assert [f.op for f in got.new] == ["torch.mul"]
    assert [f.op for f in got.fixed] == ["torch.add"]  # its program agrees on the head now
    assert [f.op for f in got.undrawn] == ["torch.sub"]  # not drawn, and still failing
    assert [e.op for e in got.known_fixed] == ["torch.erf"]  # fixed: remove the entry
    assert got.counts() == "2 pre-existing, 1 known, 2 fixed"
