"""The known-divergences file: entries matched by fingerprint and by pattern, a malformed or
hostile file refused naming its line, the file written from findings and read back alike."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from alignbot.checks.cli import main
from alignbot.checks.known import KnownFileError, load_known, write_known


def _finding(fingerprint: str = "0123456789ab", op: str = "torch.erfinv",
             kind: str = "value-mismatch", spec: str = "library.unary.erfinv",
             signature: str = "value float16 mismatch kw=[out]") -> dict[str, Any]:
    return {"fingerprint": fingerprint, "kind": kind, "op": op, "spec": spec,
            "signature": signature, "node": "", "program": {"nodes": []}}


TEXT = """\
version: 1
known:
  - fingerprint: 0123456789ab
    reason: rounded once
    upstream: https://github.com/example/candidate/issues/1
  - op: torch.nn.functional.*
    kind: grad-*
    dtype: float16
    reason: float16 gradients
  - signature: "value float16 mismatch kw=[[]out]"
    spec: library.*
    reason: out= is written twice
"""


def test_entries_match_by_fingerprint_then_by_pattern() -> None:
    known = load_known(TEXT, "known.yml")
    first = known.match(_finding())
    assert first is not None and first.line == 3 and str(first.upstream).endswith("/issues/1")
    grad = _finding("ffffffffffff", op="torch.nn.functional.gelu", kind="grad-mismatch",
                    signature="grad float16 x")
    assert known.match(grad) is known.entries[1]
    assert known.match({**grad, "signature": "grad float32 x"}) is None  # dtype narrows
    by_signature = known.match(_finding("eeeeeeeeeeee"))
    assert by_signature is known.entries[2] and by_signature.upstream is None
    assert known.match(_finding("eeeeeeeeeeee", op="torch.sin", signature="other")) is None
    ran = ["library.unary.erfinv"]
    assert known.fixed([_finding()], ran) == [known.entries[2]]
    assert known.fixed([_finding()], ["opinfo.sin"]) == []  # its spec did not run


@pytest.mark.parametrize(("text", "line", "words"), [
    ("known:\n  - op: torch.mm\n", 2, "no `reason:`"),
    ("known:\n  - reason: x\n    kind: value-mismatch\n", 2, "needs a `fingerprint:`"),
    ("known:\n  - reason: x\n    fingerprint: abc\n", 2, "12 hexadecimal"),
    ("known:\n  - reason: x\n    op: a\n    opp: b\n", 4, "did you mean `op`"),
    ("known:\n  - reason: x\n    op: a\n    kind: value-mismatsh\n", 2, "no kind"),
    ("known:\n  - reason: x\n    op: a\n    upstream: javascript:alert(1)\n", 2, "URL"),
    ("known:\n  - reason: x\n    op: [a, b]\n", 3, "needs a string"),
    ("known:\n  - &a {reason: x, op: y}\n  - *a\n", 2, "aliases"),
    ("known:\n  - reason: x\n    op: 'unclosed\n", 4, "started on line 3"),
    ("known: " + "[" * 20 + "]" * 20 + "\n", 1, "nest deeper"),
    ("- op: a\n", 1, "needs a mapping"),
    ("known:\n  - reason: x\n    op: a\n    op: b\n", 4, "given twice"),
])
def test_a_malformed_file_names_its_line(text: str, line: int, words: str) -> None:
    with pytest.raises(KnownFileError) as caught:
        load_known(text, "k.yml")
    assert caught.value.line == line and words in str(caught.value)
    assert str(caught.value).startswith(f"k.yml:{line}: ")


def test_size_is_bounded_before_parsing() -> None:
    with pytest.raises(KnownFileError, match="larger than"):
        load_known("# x\n" * 100_000, "k.yml")
    assert load_known("# nothing known yet\n", "k.yml").entries == ()


def test_written_file_reads_back_keeps_reasons_and_is_stable() -> None:
    findings = [_finding("bbbbbbbbbbbb", op="torch.Tensor.__getitem__[x]"), _finding(),
                _finding("cccccccccccc", op="torch.add")]
    previous = load_known("known:\n  - fingerprint: '0123456789ab'\n    reason: kept\n"
                          "  - op: gone\n    reason: fixed since\n")
    text = write_known(findings, previous)
    assert text == write_known(list(reversed(findings)), previous)
    known = load_known(text)
    assert known.entries[0].reason == "kept"
    assert all(known.match(f) is not None for f in findings)
    assert [e.op for e in known.entries[1:]] == ["torch.Tensor.__getitem__[[]x]", "torch.add"]
    assert known.match(_finding("dddddddddddd")) is None
    assert "gone" not in text


PADDLE_PYTHON = os.environ.get("ALIGNBOT_PADDLE_PYTHON", "")
# one planted bug, in a prelude override of one module's forward (its functional agrees)
PLANTED_PADDLE = """\
import paddle
paddle.enable_compat()
import torch
_forward = torch.nn.Softplus.forward
torch.nn.Softplus.forward = lambda self, input: _forward(self, input) * 1.001
"""


@pytest.mark.slow
@pytest.mark.paddle
@pytest.mark.skipif(not os.path.exists(PADDLE_PYTHON),
                    reason="set ALIGNBOT_PADDLE_PYTHON (make test does)")
def test_paddle_written_known_file_leaves_only_a_planted_bug_new(tmp_path: Path) -> None:
    """Paddle's pre-existing divergences written into the file: the same code checked
    against it has no new finding; a bug planted in one op is the one new finding."""
    known = tmp_path / ".github" / "alignbot-known.yml"
    common = ["check", "--python", PADDLE_PYTHON, "--n", "4", "--jobs", "1", "--no-progress",
              "--ops", "activations.leaky_relu,activations.threshold,activations.softplus"]
    assert main([*common, "--candidate", "paddle", "--write-known", str(known)]) == 0
    written = load_known(known.read_text())
    assert len(written.entries) >= 3  # leaky_relu's gradients, threshold missing
    fixed = len(known.read_text().splitlines()) + 1
    known.write_text(known.read_text() + '  - fingerprint: "0123456789ab"\n'
                     '    spec: activations.softplus\n    reason: was wrong\n')

    def new_findings(*who: str) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
        report = tmp_path / "report.json"
        code = main([*common, *who, "--known", str(known), "--no-minimize",
                     "--json", str(report)])
        data = json.loads(report.read_text())
        return code, [f for f in data["findings"] if "known" not in f], data

    code, new, data = new_findings("--candidate", "paddle")
    assert (code, new) == (0, [])
    assert len(data["findings"]) == len(written.entries)
    assert data["known_fixed"] == [{"entry": "0123456789ab", "reason": "was wrong",
                                    "upstream": None, "line": fixed}]
    code, new, data = new_findings("--prelude", PLANTED_PADDLE)
    assert code == 1 and [(f["op"], f["kind"]) for f in new] == \
        [("torch.nn.Softplus", "value-mismatch")]
