"""`alignbot check`: exit statuses, one-line errors, byte-identical reports for one seed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from checks.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
PLANTED = str(FIXTURES / "planted_specs.py")


def _alignbot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "checks.cli", *args], capture_output=True,
                          text=True, timeout=300)


def test_same_seed_gives_byte_identical_json_reports(tmp_path: Path) -> None:
    prelude = (FIXTURES / "planted_prelude.py").read_text()
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path in paths:
        proc = _alignbot("check", "--prelude", prelude, "--spec-file", PLANTED, "--seed", "5",
                         "--ops", "softplus*,tanh*,batchnorm*,mean*", "--json", str(path),
                         "--no-timings")
        assert proc.returncode == 1, proc.stderr
    assert paths[0].read_bytes() == paths[1].read_bytes()
    report = json.loads(paths[0].read_text())
    assert report["seed"] == 5 and report["specs_run"] == 4
    assert report["programs_run"] == 22
    assert {f["kind"] for f in report["findings"]} == {"value-mismatch", "grad-mismatch",
                                                       "shape-mismatch"}
    for finding in report["findings"]:
        assert set(finding) >= {"fingerprint", "kind", "op", "spec", "message", "program",
                                "count", "repro", "repro_verified", "repro_reference_only",
                                "verdict", "evidence", "upstream_draft", "upstream_url",
                                "shrink"}
        assert finding["shrink"]["seconds"] is None and finding["shrink"]["calls"] >= 1


def test_clean_run_exits_zero_and_writes_markdown(tmp_path: Path, capsys: Any) -> None:
    md = tmp_path / "r.md"
    code = main(["check", "--candidate", "torch", "--spec-file", PLANTED, "--ops",
                 "matmul_clean", "--n", "3", "--markdown", str(md)])
    assert code == 0
    assert "0 findings" in capsys.readouterr().out
    assert "No mismatch" in md.read_text()


@pytest.mark.parametrize(("args", "message"), [
    (["check", "--candidate", "nope"], "unknown candidate preset 'nope'"),
    (["check"], "--candidate PRESET or --prelude CODE"),
    (["check", "--prelude", "raise SystemError('no device')"], "prelude failed: SystemError"),
    (["check", "--candidate", "torch", "--python", "/no/python"], "cannot start the candidate"),
    (["check", "--candidate", "torch", "--spec-file", str(FIXTURES / "broken_specs.py")],
     "spec broken_specs.typo raised on the reference: AttributeError"),
    (["check", "--candidate", "torch", "--spec-file", PLANTED, "--ops", "zzz*"],
     "no spec matches"),
    (["check", "--candidate", "torch", "--n", "0"], "--n must be at least 1"),
    (["check", "--candidate", "torch", "--spec-file", "/no/specs.py"], "no such file"),
    (["check", "--candidate", "torch", "--override", "relu"], "expected torch.API=module:attr"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_exits_2_with_one_line(args: list[str], message: str, capsys: Any) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_real_entry_point_exit_status_and_no_traceback() -> None:
    proc = _alignbot("check", "--candidate", "nope")
    assert proc.returncode == 2
    assert proc.stderr.startswith("alignbot: error:") and "Traceback" not in proc.stderr
