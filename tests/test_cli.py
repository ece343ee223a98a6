"""`alignbot check`: exit statuses, one-line errors, byte-identical reports for one seed."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from checks.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
PLANTED = str(FIXTURES / "planted_specs.py")


def _alignbot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "checks.cli", *args], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_a_minimized_report_has_every_field_of_each_finding(planted_report: dict[str, Any]
                                                             ) -> None:
    # that the same seed gives the same bytes in another process (another hash seed) is the
    # stored report's test (tests/test_report.py) and the crash-and-hang pair's below
    assert planted_report["seed"] == 7 and planted_report["complete"] is True
    for finding in planted_report["findings"]:
        assert set(finding) >= {"fingerprint", "kind", "op", "spec", "message", "program",
                                "count", "repro", "repro_verified", "repro_reference_only",
                                "verdict", "evidence", "upstream_draft", "upstream_url",
                                "shrink"}
        assert finding["shrink"]["calls"] >= 1 and finding["shrink"]["seconds"] is not None


@pytest.mark.slow
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
    # one job: no worker processes to start first (tests/test_jobs.py has a prelude that fails
    # in the workers)
    (["check", "--prelude", "raise SystemError('no device')", "--jobs", "1"],
     "prelude failed: SystemError"),
    (["check", "--candidate", "torch", "--python", "/no/python", "--jobs", "1"],
     "cannot start the candidate"),
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
    (["specs", "--ops", "zzz*"], "no spec matches --ops 'zzz*'"),
    (["specs", "--spec-file", "/no/specs.py"], "--spec-file /no/specs.py: no such file"),
])
@pytest.mark.slow
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


@pytest.mark.slow
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


def _planted_args(path: Path) -> list[str]:
    prelude = (FIXTURES / "planted_prelude.py").read_text()
    # One worker: a repro's limit on the candidate (5 s with --timeout 2) includes importing
    # torch, which two workers verifying repros at once on two busy cores can exceed.
    return ["check", "--prelude", prelude, "--spec-file", PLANTED, "--seed", "5", "--ops",
            "elu*,selu*", "--timeout", "2", "--json", str(path), "--markdown",
            str(path.with_suffix(".md")), "--no-timings", "--jobs", "1"]


@pytest.mark.slow
def test_crash_and_hang_give_byte_identical_reports_and_a_summary(tmp_path: Path,
                                                                  capsys: Any) -> None:
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    # one run in its own process (its output is read below), one in this one: two processes
    first = _alignbot(*_planted_args(paths[0]))
    assert first.returncode == 1, first.stderr
    assert main([*_planted_args(paths[1]), "--no-progress"]) == 1, capsys.readouterr().err
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert paths[0].with_suffix(".md").read_bytes() == paths[1].with_suffix(".md").read_bytes()
    report = json.loads(paths[0].read_text())
    assert report["complete"] is True
    by_kind = {f["kind"]: f for f in report["findings"]}
    assert set(by_kind) == {"candidate-crash", "candidate-timeout"}
    assert by_kind["candidate-crash"]["message"].startswith("the worker was killed by SIGABRT")
    assert by_kind["candidate-timeout"]["message"] == "no answer within 2 s"
    assert all(f["minimize_error"] is None and f["repro_verified"] for f in report["findings"])
    assert all(f["shrink"]["seconds"] is None for f in report["findings"])  # --no-timings
    # the summary: where the report is, what is verified, and a command that prints a repro
    lines = first.stderr.splitlines()[-3:]
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
    assert first.stderr.startswith("alignbot: ") and "\r" not in first.stderr
    assert "Traceback" not in first.stderr


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "jobs"), [(signal.SIGTERM, "1"), (signal.SIGHUP, "2")])
def test_a_stop_signal_while_minimizing_writes_the_merged_partial_report(
        signum: signal.Signals, jobs: str, tmp_path: Path) -> None:
    """``timeout`` (SIGTERM) or a closed terminal (SIGHUP) while findings are minimized: the
    report is written, each fingerprint once, the hanging repro killed, exit 128+signal."""
    marker, report = tmp_path / "hanging", tmp_path / "r.json"
    os.mkfifo(marker)  # the candidate says where it hangs through it: no polling
    prelude = (FIXTURES / "planted_prelude.py").read_text() + (
        "\nimport sys\n_selu = torch.selu\n"
        "def selu(x, *args, **kwargs):  # off by 1%; in a repro script it hangs\n"
        "    if sys.argv[0].endswith('repro.py'):\n"
        f"        with open({str(marker)!r}, 'w') as handle:\n"
        "            handle.write(str(os.getpid()))\n"
        "        time.sleep(3600)\n"
        "    return _selu(x, *args, **kwargs) * 1.01\n"
        "F.selu = selu\n")
    reader = os.open(marker, os.O_RDONLY | os.O_NONBLOCK)
    proc = subprocess.Popen(
        [sys.executable, "-m", "checks.cli", "check", "--prelude", prelude, "--spec-file",
         str(FIXTURES / "stop_specs.py"), "--json", str(report), "--markdown",
         str(report.with_suffix(".md")), "--no-progress", "--jobs", jobs,
         "--shrink-seconds", "5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([reader], [], [], 240)
        hanging = int(os.read(reader, 64) or b"0") if ready else 0
        assert hanging, proc.communicate(timeout=60)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(reader)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err
    assert f"alignbot: partial report (interrupted) in {report} and " in err
    data = json.loads(report.read_text())
    assert data["complete"] is False and data["programs_run"] == 3
    assert "**Partial report**" in report.with_suffix(".md").read_text()
    prints = [f["fingerprint"] for f in data["findings"]]
    assert len(prints) == len(set(prints)), prints
    softplus = [f for f in data["findings"] if f["op"].endswith("softplus")]
    assert sum(f["count"] for f in softplus) == 2
    if jobs == "1":  # both draws minimized, to one bug: merged
        (merged,) = softplus
        assert merged["count"] == 2 and merged["repro_verified"]
    selu = next(f for f in data["findings"] if f["op"].endswith("selu"))
    assert "repro" not in selu  # cut short: as drawn
    assert _gone(hanging), "the hanging repro was left behind"


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


@pytest.mark.slow
def test_a_report_without_minimizing_renders_as_markdown(tmp_path: Path) -> None:
    # Findings as drawn lack every key minimizing adds (verdict, repro, shrink, upstream).
    prelude = ("import torch\nF = torch.nn.functional\n_softplus = F.softplus\n"
               "F.softplus = lambda x, beta=1.0, threshold=20.0: _softplus(x) * 1.01\n")
    markdown = tmp_path / "report.md"
    assert main(["check", "--prelude", prelude, "--ops", "softplus*", "--n", "2", "--jobs", "1",
                 "--no-minimize", "--no-progress", "--markdown", str(markdown)]) == 1
    text = markdown.read_text()
    assert "torch.nn.functional.softplus" in text and "not triaged" in text
    assert "Minimized repro" not in text


@pytest.mark.slow
def test_a_relative_interpreter_path_is_the_callers(tmp_path: Path, capsys: Any,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    here = Path(sys.executable)
    monkeypatch.chdir(here.parent.parent)  # the venv: bin/python is relative to it
    code = main(["check", "--candidate", "torch", "--python", f"bin{os.sep}{here.name}",
                 "--spec-file", PLANTED,
                 "--ops", "matmul_clean", "--n", "2", "--jobs", "1", "--no-progress",
                 "--json", str(tmp_path / "r.json")])
    assert code == 0, capsys.readouterr().err


def test_the_summary_names_the_packages_the_candidate_imported(
        tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fastops").mkdir()
    (tmp_path / "fastops" / "__init__.py").write_text("__version__ = '1.2.3'\n")
    monkeypatch.chdir(tmp_path)  # the candidate imports from where alignbot was started
    code = main(["check", "--prelude", "import torch\nimport fastops\n", "--spec-file",
                 PLANTED, "--ops", "matmul_clean", "--n", "2", "--no-progress"])
    assert code == 0
    out = capsys.readouterr().out
    import torch
    assert f"candidate prelude (fastops 1.2.3, torch {torch.__version__}) against torch " in out
