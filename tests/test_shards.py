"""Shards of a check, merged, give the report of the whole check; what is not shards of one
run is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from alignbot.checks import shards
from alignbot.checks.cli import main

SPECS = '''
from alignbot.checks import autotest, random_tensor


@autotest(n=4, ops=["torch.nn.functional.softplus"])
def softplus_small(torch):
    return torch.nn.functional.softplus(random_tensor(ndim=1, dim0=3))


@autotest(n=4, ops=["torch.nn.functional.softplus"])
def softplus_wide(torch):
    return torch.nn.functional.softplus(random_tensor(ndim=2))


@autotest(n=4, ops=["torch.tanh"])
def tanh_plain(torch):
    return torch.tanh(random_tensor())


@autotest(n=4, ops=["torch.sigmoid"])
def sigmoid_clean(torch):
    return torch.sigmoid(random_tensor())


@autotest(n=4, ops=["torch.exp"])
def exp_clean(torch):
    return torch.exp(random_tensor())
'''

# softplus is off in both softplus specs (one fingerprint, two specs); tanh is off in one.
PRELUDE = '''
import torch

F = torch.nn.functional
_softplus, _tanh = F.softplus, torch.tanh


def softplus(x, beta=1.0, threshold=20.0):
    return _softplus(x, beta=beta, threshold=threshold) * 1.01


def tanh(x):
    return _tanh(x) + 0.01


F.softplus = softplus
torch.tanh = tanh
'''


def _check(folder: Path, *extra: str) -> tuple[int, bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "specs.py").write_text(SPECS)
    report = folder / "report.json"
    code = main(["check", "--prelude", PRELUDE, "--spec-file", str(folder / "specs.py"),
                 "--seed", "3", "--jobs", "1", "--no-minimize", "--no-timings",
                 "--no-progress", "--json", str(report), *extra])
    return code, report.read_bytes()


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    code, report = _check(tmp_path_factory.mktemp("whole"))
    assert code == 1
    data = json.loads(report)
    softplus = [f for f in data["findings"] if f["op"] == "torch.nn.functional.softplus"]
    assert len(softplus) == 1 and softplus[0]["count"] == 8  # both specs' draws, one finding
    assert {f["op"] for f in data["findings"]} == {"torch.nn.functional.softplus",
                                                   "torch.tanh"}
    return report


@pytest.mark.slow
@pytest.mark.parametrize("count", [2, 3])
def test_merged_shards_are_the_whole_report_byte_for_byte(
        whole: bytes, tmp_path: Path, count: int, capsys: pytest.CaptureFixture[str]) -> None:
    parts = []
    for index in range(1, count + 1):
        code, report = _check(tmp_path / f"shard{index}", "--shard", f"{index}/{count}")
        assert code in (0, 1)
        parts.append(tmp_path / f"shard{index}" / "report.json")
        assert len(json.loads(report)["specs"]) in (5 // count, 5 // count + 1)
    merged, markdown = tmp_path / "merged.json", tmp_path / "merged.md"
    capsys.readouterr()
    assert main(["merge", *map(str, parts), "--json", str(merged),
                 "--markdown", str(markdown)]) == 1
    assert merged.read_bytes() == whole
    assert "torch.tanh" in markdown.read_text()
    assert "5 specs from" in capsys.readouterr().out


def test_specs_are_dealt_out_in_order() -> None:
    names = [f"s{i}" for i in range(7)]
    assert shards.select(names, 1, 3) == ["s0", "s3", "s6"]
    assert shards.select(names, 3, 3) == ["s2", "s5"]
    dealt = [name for k in (1, 2, 3) for name in shards.select(names, k, 3)]
    assert sorted(dealt) == names
    assert shards.select(names, 9, 9) == []


@pytest.mark.parametrize("text", ["0/2", "3/2", "1/0", "a/b", "2", "1/2/3", "-1/2"])
def test_a_bad_shard_is_one_line(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--candidate", "torch", f"--shard={text}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("alignbot: error: --shard: expected K/N") and err.count("\n") == 1


def _report(**changes: Any) -> dict[str, Any]:
    report: dict[str, Any] = {"report_version": 1, "reference": "2.13.0", "candidate": "x",
                              "candidate_packages": {}, "seed": 0, "specs_run": 1,
                              "specs": ["a"], "programs_run": 4, "complete": True,
                              "findings": [], "causes": [], "exploration": []}
    report.update(changes)
    return {k: v for k, v in report.items() if v is not None}


@pytest.mark.parametrize(("second", "message"), [
    (_report(seed=1, specs=["b"]), "report 2 has seed 1, report 1 0: not shards of one run"),
    (_report(candidate="y", specs=["b"]), "report 2 has candidate 'y'"),
    (_report(), "spec a is in reports 1 and 2"),
    (_report(specs=None), "report 2 lacks specs"),
    (_report(specs=["b"], timings={}), "report 2 has keys this alignbot does not know: timings"),
    (_report(specs=["b"], findings=[{"spec": "b"}]), "a finding is not one alignbot wrote"),
])
def test_reports_that_are_not_shards_of_one_run_are_refused(
        tmp_path: Path, second: dict[str, Any], message: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    paths = []
    for number, report in enumerate((_report(), second)):
        paths.append(tmp_path / f"{number}.json")
        paths[-1].write_text(json.dumps(report))
    out = tmp_path / "merged.json"
    assert main(["merge", *map(str, paths), "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"alignbot: error: cannot merge: {message}\n" or \
        (err.startswith("alignbot: error: cannot merge: ") and message in err)
    assert not out.exists()


def test_a_report_that_cannot_be_read_is_named(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.json").write_text("{")
    assert main(["merge", str(tmp_path / "bad.json"), str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err.startswith(f"alignbot: error: cannot read {tmp_path}")
