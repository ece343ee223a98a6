"""`alignbot check`: exit statuses, one-line errors, byte-identical reports for one seed."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from checks.cli import _source, build_parser, main
from checks.opinfo import OPINFO_DRAWS
from checks.spec import SpecSource

FIXTURES = Path(__file__).parent / "fixtures"
PLANTED = str(FIXTURES / "planted_specs.py")


def _alignbot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "checks.cli", *args], capture_output=True,
                          text=True, timeout=300)


def test_same_seed_gives_byte_identical_json_reports(tmp_path: Path) -> None:
    # the second run shares the machine with a process that keeps a core busy: shrinking is
    # bounded by oracle calls, not seconds, so the load changes nothing in the report
    prelude = (FIXTURES / "planted_prelude.py").read_text()
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path in paths:
        busy = None if path.name == "a.json" else subprocess.Popen(
            [sys.executable, "-c", "while True: pass"])
        try:
            proc = _alignbot("check", "--prelude", prelude, "--spec-file", PLANTED, "--seed",
                             "5", "--ops", "softplus*,tanh*,batchnorm*,mean*", "--json",
                             str(path), "--no-timings")
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
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
        assert "seconds_limit" not in finding["shrink"]  # the calls, not the clock, bound it


def test_clean_run_exits_zero_and_writes_markdown(tmp_path: Path, capsys: Any) -> None:
    md = tmp_path / "r.md"
    code = main(["check", "--candidate", "torch", "--spec-file", PLANTED, "--ops",
                 "matmul_clean", "--n", "3", "--markdown", str(md)])
    assert code == 0
    assert "0 findings" in capsys.readouterr().out
    assert "No mismatch" in md.read_text()


@pytest.mark.parametrize(("flags", "source"), [
    ([], SpecSource(library=True, opinfo=True)),  # the default: library and OpInfo
    (["--no-opinfo"], SpecSource(library=True)),
    (["--library"], SpecSource(library=True, opinfo=True)),
    (["--ops", "softplus*"], SpecSource(library=True, opinfo=True)),
    (["--opinfo"], SpecSource(library=False, opinfo=True)),
    (["--opinfo", "--library"], SpecSource(library=True, opinfo=True)),
    # a spec file selects exactly itself; the other sources come only when named
    (["--spec-file", PLANTED], SpecSource(library=False, files=(Path(PLANTED),))),
    (["--spec-file", PLANTED, "--library"],
     SpecSource(library=True, files=(Path(PLANTED),))),
    (["--spec-file", PLANTED, "--opinfo"],
     SpecSource(library=False, files=(Path(PLANTED),), opinfo=True)),
    # globs that can match no OpInfo spec leave PyTorch's database unread
    (["--ops", "activations.softplus,steal.*"], SpecSource(library=True)),
    (["--ops", "activations.softplus,*.softplus"], SpecSource(library=True, opinfo=True)),
    (["--ops", "torch.nn.functional.*"], SpecSource(library=True, opinfo=True)),
])
def test_which_sources_the_flags_select(flags: list[str], source: SpecSource) -> None:
    for command in ("check", "specs"):
        selected = _source(build_parser().parse_args([command, *flags]))
        assert dataclasses.replace(selected, opinfo_draws=None) == source


def test_the_opinfo_draws_are_bounded_by_default_and_the_bound_can_be_lifted() -> None:
    def source(*flags: str) -> SpecSource:
        return _source(build_parser().parse_args(["check", "--opinfo", *flags]))

    assert source().opinfo_draws == OPINFO_DRAWS == 5  # a run of every spec
    assert source("--ops", "sqrt").opinfo_draws is None  # a selection: each entry's own
    assert source("--opinfo-draws", "8", "--ops", "sqrt").opinfo_draws == 8
    assert source("--opinfo-draws", "0").opinfo_draws is None


@pytest.mark.parametrize(("args", "message"), [
    (["check", "--candidate", "nope"], "unknown candidate preset 'nope'"),
    (["check"], "--candidate PRESET or --prelude CODE"),
    (["check", "--no-opinfo", "--prelude", "raise SystemError('no device')"],
     "prelude failed: SystemError"),
    (["check", "--candidate", "torch", "--no-opinfo", "--python", "/no/python"],
     "cannot start the candidate"),
    (["check", "--candidate", "torch", "--opinfo", "--no-opinfo"], "not allowed with"),
    (["check", "--candidate", "torch", "--spec-file", str(FIXTURES / "broken_specs.py")],
     "spec broken_specs.typo raised on the reference: AttributeError"),
    (["check", "--candidate", "torch", "--spec-file", PLANTED, "--ops", "zzz*"],
     "no spec matches"),
    (["check", "--candidate", "torch", "--n", "0"], "--n must be at least 1"),
    (["check", "--candidate", "torch", "--spec-file", "/no/specs.py"], "no such file"),
    (["check", "--candidate", "torch", "--override", "relu"], "expected torch.API=module:attr"),
    (["frobnicate"], "invalid choice"),
    (["check", "--candidate", "torch", "--jobs", "0"], "argument --jobs: expected a number"),
    (["check", "--candidate", "torch", "--jobs", "x"], "argument --jobs: expected a number"),
    (["specs", "--no-opinfo", "--ops", "zzz*"], "no spec matches --ops 'zzz*'"),
    (["specs", "--spec-file", "/no/specs.py"], "--spec-file /no/specs.py: no such file"),
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


@pytest.mark.parametrize("flag", ["--json", "--markdown"])
@pytest.mark.parametrize("where", ["missing-folder", "folder-is-a-file", "a-folder"])
def test_unwritable_output_exits_2_before_any_drawing(flag: str, where: str, tmp_path: Path,
                                                      capsys: Any,
                                                      monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    (tmp_path / "file").write_text("")
    path = {"missing-folder": tmp_path / "nope" / "r.out",
            "folder-is-a-file": tmp_path / "file" / "r.out", "a-folder": tmp_path}[where]

    def no_run(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the run started")

    monkeypatch.setattr("checks.cli.CandidateProcess", no_run)
    monkeypatch.setattr("checks.cli.check", no_run)
    started = time.monotonic()
    assert main(["check", "--candidate", "torch", "--spec-file", PLANTED, flag, str(path)]) == 2
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err
    assert err.startswith(f"alignbot: error: cannot write {flag} {path}: ")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_reports_are_written_atomically(tmp_path: Path, capsys: Any) -> None:
    report = tmp_path / "r.json"
    report.write_text("old")
    code = main(["check", "--candidate", "torch", "--spec-file", PLANTED, "--ops",
                 "matmul_clean", "--n", "2", "--json", str(report), "--no-progress"])
    assert code == 0
    assert json.loads(report.read_text())["complete"] is True
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left
    err = capsys.readouterr().err
    assert f"alignbot: report in {report}\n" in err and "alignbot: 0 findings\n" in err


def _planted_run(path: Path) -> subprocess.CompletedProcess[str]:
    prelude = (FIXTURES / "planted_prelude.py").read_text()
    # One worker: a repro's limit on the candidate (5 s with --timeout 2) includes importing
    # torch, which two workers verifying repros at once on two busy cores can exceed.
    return _alignbot("check", "--prelude", prelude, "--spec-file", PLANTED, "--seed", "5",
                     "--ops", "elu*,selu*", "--timeout", "2", "--json", str(path),
                     "--markdown", str(path.with_suffix(".md")), "--no-timings", "--jobs", "1")


def test_crash_and_hang_give_byte_identical_reports_and_a_summary(tmp_path: Path) -> None:
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    runs = [_planted_run(path) for path in paths]
    assert [proc.returncode for proc in runs] == [1, 1], runs[0].stderr
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert paths[0].with_suffix(".md").read_bytes() == paths[1].with_suffix(".md").read_bytes()
    report = json.loads(paths[0].read_text())
    assert report["complete"] is True
    by_kind = {f["kind"]: f for f in report["findings"]}
    assert set(by_kind) == {"candidate-crash", "candidate-timeout"}
    assert by_kind["candidate-crash"]["message"].startswith("the worker was killed by SIGABRT")
    assert by_kind["candidate-timeout"]["message"] == "no answer within 2 s"
    assert all(f["minimize_error"] is None and f["repro_verified"] for f in report["findings"])
    # the summary: where the report is, what is verified, and a command that prints a repro
    lines = runs[0].stderr.splitlines()[-3:]
    prints = [f["fingerprint"] for f in report["findings"]]  # in report order
    assert lines[0] == f"alignbot: report in {paths[0]} and {paths[0].with_suffix('.md')}"
    assert lines[1] == f"alignbot: 2 findings; repro verified for 2 ({', '.join(prints)})"
    command = lines[2].split("alignbot: print a repro: ", 1)[1].split()
    assert command[:3] == ["alignbot", "repro", str(paths[0])]
    shown = _alignbot(*command[1:])
    assert shown.returncode == 0
    assert shown.stdout == next(f["repro"] for f in report["findings"]
                                if f["fingerprint"] == command[3])
    # off a terminal a plain progress line shows the run is alive; no bar, no traceback
    assert runs[0].stderr.startswith("alignbot: ") and "\r" not in runs[0].stderr
    assert "Traceback" not in runs[0].stderr


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_mid_run_writes_a_partial_report(jobs: str, tmp_path: Path) -> None:
    marker, report = tmp_path / "hanging", tmp_path / "r.json"
    prelude = (FIXTURES / "planted_prelude.py").read_text() + (
        "\ndef selu(*args, **kwargs):  # tell the test that the run is stuck here\n"
        f"    open({str(marker)!r}, 'w').write(str(os.getpid()))\n"
        "    time.sleep(3600)\n"
        "F.selu = selu\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "checks.cli", "check", "--prelude", prelude, "--spec-file",
         PLANTED, "--ops", "leaky*,selu*", "--timeout", "300", "--json", str(report),
         "--no-progress", "--jobs", jobs], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,  # Ctrl-C reaches it even when pytest runs in the background, ignoring it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), proc.communicate(timeout=60)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert f"alignbot: partial report (interrupted) in {report}" in err
    data = json.loads(report.read_text())
    assert data["complete"] is False
    assert _gone(int(marker.read_text())), "the hanging candidate was left behind"
    assert "planted_specs.selu_hang" not in data["specs"]
    if jobs == "2":  # the two specs run side by side: leaky_relu may be cut short too
        assert data["programs_run"] <= 8
        assert {f["op"] for f in data["findings"]} <= {"torch.nn.functional.leaky_relu"}
        return
    assert [f["op"] for f in data["findings"]] == ["torch.nn.functional.leaky_relu"]
    assert data["programs_run"] == 8  # the leaky_relu draws; the stuck program is not judged
    assert "repro" not in data["findings"][0]
    assert "1 finding" in out


def _gone(pid: int, wait: float = 10.0) -> bool:
    """Whether process ``pid`` has exited (a zombie counts as exited) within ``wait``."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


def test_a_report_without_minimizing_renders_as_markdown(tmp_path: Path) -> None:
    # Findings as drawn lack every key minimizing adds (verdict, repro, shrink, upstream).
    prelude = ("import torch\nF = torch.nn.functional\n_softplus = F.softplus\n"
               "F.softplus = lambda x, beta=1.0, threshold=20.0: _softplus(x) * 1.01\n")
    markdown = tmp_path / "report.md"
    assert main(["check", "--prelude", prelude, "--ops", "softplus*", "--n", "2", "--jobs", "1",
                 "--no-opinfo", "--no-minimize", "--no-progress", "--markdown", str(markdown)]) == 1
    text = markdown.read_text()
    assert "torch.nn.functional.softplus" in text and "not triaged" in text
    assert "Minimized repro" not in text
