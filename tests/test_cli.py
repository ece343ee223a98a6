"""`alignbot check`: exit statuses, one-line errors, byte-identical reports for one seed."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from alignbot.checks.cli import _source, build_parser, main
from alignbot.checks.opinfo import OPINFO_DRAWS
from alignbot.checks.progress import Progress
from alignbot.checks.spec_loading import SpecSource

FIXTURES = Path(__file__).parent / "fixtures"
PLANTED = str(FIXTURES / "planted_specs.py")
SEED7 = str(FIXTURES / "planted_report_seed7.json")


def _alignbot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "alignbot.checks.cli", *args], capture_output=True,
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
def test_same_seed_gives_byte_identical_reports_on_a_busy_machine(tmp_path: Path) -> None:
    # the second run shares the machine with a process that keeps a core busy: shrinking is
    # bounded by oracle calls, not seconds, so the load changes nothing in the report
    prelude = (FIXTURES / "planted_prelude.py").read_text()
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path in paths:
        busy = None if path.name == "a.json" else subprocess.Popen(
            [sys.executable, "-c", "while True: pass"])
        try:
            proc = _alignbot("check", "--prelude", prelude, "--spec-file", PLANTED, "--seed",
                             "5", "--ops", "softplus*", "--jobs", "1", "--json",
                             str(path), "--no-timings")
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
        assert proc.returncode == 1, proc.stderr
    assert paths[0].read_bytes() == paths[1].read_bytes()
    report = json.loads(paths[0].read_text())
    assert report["findings"] and all(f["repro_verified"] for f in report["findings"])
    for finding in report["findings"]:
        assert finding["shrink"]["seconds"] is None and finding["shrink"]["calls"] >= 1
        assert "seconds_limit" not in finding["shrink"]  # the calls, not the clock, bound it


@pytest.mark.slow
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
    (["check"], "--candidate PRESET, --prelude CODE or --prelude-file FILE"),
    # one job: no worker processes to start first (tests/test_jobs.py has a prelude that fails
    # in the workers)
    (["check", "--prelude", "raise SystemError('no device')", "--jobs", "1",
      "--no-opinfo"],
     "prelude failed: SystemError"),
    (["check", "--candidate", "torch", "--python", "/no/python", "--jobs", "1",
      "--no-opinfo"],
     "cannot start the candidate"),
    (["check", "--candidate", "torch", "--opinfo", "--no-opinfo"], "not allowed with"),
    (["check", "--candidate", "torch", "--opinfo-draws", "-1"],
     "--opinfo-draws -1: expected a whole number of draws, 0 or more"),
    (["check", "--candidate", "torch", "--spec-file", str(FIXTURES / "broken_specs.py")],
     "spec broken_specs.typo raised on the reference: AttributeError"),
    (["check", "--candidate", "torch", "--spec-file", PLANTED, "--ops", "zzz*"],
     "no spec matches"),
    (["check", "--candidate", "torch", "--n", "0"], "--n 0: expected a whole number of draws"),
    (["check", "--candidate", "torch", "--spec-file", "/no/specs.py"], "no such file"),
    (["check", "--candidate", "torch", "--override", "relu"], "expected torch.API=module:attr"),
    (["frobnicate"], "invalid choice"),
    (["check", "--candidate", "torch", "--jobs", "0"], "--jobs 0: expected a whole number"),
    (["check", "--candidate", "torch", "--jobs", "x"], "argument --jobs: invalid int value"),
    (["specs", "--no-opinfo", "--ops", "zzz*"], "no spec matches --ops 'zzz*'"),
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

    monkeypatch.setattr("alignbot.checks.cli.CandidateProcess", no_run)
    monkeypatch.setattr("alignbot.checks.cli.check", no_run)
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
        [sys.executable, "-m", "alignbot.checks.cli", "check", "--prelude", prelude, "--spec-file",
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
        [sys.executable, "-m", "alignbot.checks.cli", "check", "--prelude", prelude, "--spec-file",
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
                 "--no-opinfo", "--no-minimize", "--no-progress", "--markdown", str(markdown)]) == 1
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


def _no_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting a candidate or drawing fails the test: the input is refused before."""
    def no_run(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the run started")

    monkeypatch.setattr("alignbot.checks.cli.CandidateProcess", no_run)
    monkeypatch.setattr("alignbot.checks.cli.check", no_run)


def test_no_command_prints_the_usage_with_every_command() -> None:
    proc = subprocess.run([sys.executable, "-m", "alignbot.bot.cli"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("usage: alignbot ")
    for command in ("check", "specs", "merge", "repro", "upstream", "serve", "demo"):
        assert f"\n    {command} " in proc.stderr, proc.stderr
    assert "required" not in proc.stderr


def test_version_is_the_installed_packages(capsys: Any) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"alignbot {metadata.version('alignbot')}\n"


def _actions(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action]]:
    """Every option and argument of ``parser`` and its commands, with the command's name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from ((f"{name} {where}", a) for where, a in _actions(sub))
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield "", action


def test_every_option_has_help_that_shows_its_default() -> None:
    from alignbot.bot.cli import build_parser as app_parser

    for parser in (build_parser(), app_parser()):
        for where, action in _actions(parser):
            name = f"{where}{'/'.join(action.option_strings) or action.dest}"
            assert action.help, f"{name} has no help"
            default = action.default
            unset = default is None or default is False or default in ([], "", "==SUPPRESS==")
            if action.option_strings and not unset:
                shown = parser._get_formatter()._get_help_string(action) or ""
                assert "default" in shown, f"{name}: the default {default!r} is not shown"
    chk = " ".join(_alignbot("check", "--help").stdout.split())
    assert "--seed S the seed of every spec's draws: the same seed, the same report " \
        "(default: 0)" in chk
    assert "--timeout SECONDS per-program limit before the candidate counts as hung " \
        "(default: 60.0)" in chk
    assert "--no-progress no progress lines" in chk


@pytest.mark.parametrize(("args", "message"), [
    (["--timeout", "0"], "--timeout 0: expected a number of seconds above 0"),
    (["--timeout", "-5"], "--timeout -5: expected a number of seconds above 0"),
    (["--timeout", "nan"], "--timeout nan: expected a number of seconds above 0"),
    (["--n", "-1"], "--n -1: expected a whole number of draws, 1 or more"),
    (["--jobs", "0"], "--jobs 0: expected a whole number of worker processes, 1 or more"),
    (["--shrink-calls", "0"], "--shrink-calls 0: expected a whole number of oracle calls, "
     "1 or more"),
    (["--shrink-seconds", "-1"], "--shrink-seconds -1: expected a number of seconds above 0"),
    (["--rtol", "-1", "--atol", "0"], "--rtol -1: expected a tolerance of 0 or more"),
])
def test_a_number_out_of_range_is_one_line_before_anything_starts(
        args: list[str], message: str, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_candidate(monkeypatch)
    assert main(["check", "--candidate", "torch", "--jobs", "1", *args]) == 2
    assert capsys.readouterr().err == f"alignbot: error: {message}\n"


def test_an_internal_error_exits_3_naming_it_and_its_traceback(
        capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(args: Any) -> Any:
        raise ZeroDivisionError("a bug\nover two lines")

    monkeypatch.setattr("alignbot.checks.cli._specs", broken)
    assert main(["specs"]) == 3
    (line,) = capsys.readouterr().err.splitlines()
    start = ("alignbot: error: internal error (a bug in alignbot, exit status 3): "
             "ZeroDivisionError: a bug over two lines; the traceback is in ")
    assert line.startswith(start), line
    traceback = Path(line.removeprefix(start))
    assert "in broken" in traceback.read_text() and traceback.name.endswith(".txt")
    traceback.unlink()
    assert main(["specs", "-v"]) == 3  # -v: the traceback itself, on stderr
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "in broken" in err
    assert err.splitlines()[-1].endswith("over two lines; the traceback is above")


@pytest.mark.parametrize("flag", ["--json", "--markdown"])
def test_a_report_to_stdout_is_all_that_stdout_gets(flag: str, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "alignbot.checks.cli", "merge", SEED7, flag, "-"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(Path(SEED7).read_text())
    if flag == "--json":
        assert json.loads(proc.stdout) == report
    else:
        assert proc.stdout.startswith("## alignbot: 11 findings")
    assert "alignbot: 14 specs from 1 reports, 69 programs: 11 findings" in proc.stderr
    assert "report in stdout" in proc.stderr and not (tmp_path / "-").exists()


def test_only_one_report_can_go_to_stdout(capsys: Any) -> None:
    assert main(["merge", SEED7, "--json", "-", "--markdown", "-"]) == 2
    assert capsys.readouterr().err == ("alignbot: error: only one report can go to stdout "
                                       "(-)\n")


@pytest.mark.slow
def test_a_check_with_its_report_on_stdout_prints_nothing_else_there(capsys: Any) -> None:
    code = main(["check", "--candidate", "torch", "--spec-file", PLANTED, "--ops",
                 "matmul_clean", "--n", "2", "--jobs", "1", "--markdown", "-"])
    assert code == 0
    out, err = capsys.readouterr()
    assert out.startswith("## alignbot: 0 findings") and "alignbot: 1 specs" not in out
    assert "alignbot: 1 specs, 2 programs, candidate torch" in err


def test_quiet_drops_the_summary_and_the_progress(tmp_path: Path, capsys: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["-q", "merge", SEED7, "--json", str(tmp_path / "a.json")]) == 1
    out, err = capsys.readouterr()
    assert err == "" and out.startswith("alignbot: 14 specs from 1 reports")
    assert main(["merge", SEED7, "--json", str(tmp_path / "b.json")]) == 1
    assert "report in" in capsys.readouterr().err
    shown: list[bool] = []
    real = Progress.for_stream

    def for_stream(total: int, stream: Any, enabled: bool = True, **kwargs: Any) -> Progress:
        shown.append(enabled)
        return real(total, stream, enabled, **kwargs)

    monkeypatch.setattr("alignbot.checks.cli.Progress.for_stream", for_stream)
    for verbosity in (["-q"], []):
        assert main(["check", *verbosity, "--candidate", "torch", "--python", "/no/python",
                     "--jobs", "1", "--spec-file", PLANTED, "--ops", "matmul_clean"]) == 2
    assert shown == [False, True]


def test_verbose_shows_what_a_candidate_that_does_not_start_printed(capsys: Any) -> None:
    args = ["check", "--prelude", "import nowhere_such_module", "--jobs", "1", "--spec-file",
            PLANTED, "--ops", "matmul_clean"]
    assert main(args) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (f"alignbot: error: the candidate's prelude failed: {sys.executable} has "
                    f"no nowhere_such_module; install it there or point --python at an "
                    f"interpreter that has it")
    assert main([*args, "--verbose"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(line) and "Traceback" in err and "<prelude>" in err


def test_a_spec_file_that_is_a_directory_is_said_to_be_one(tmp_path: Path, capsys: Any
                                                           ) -> None:
    assert main(["specs", "--spec-file", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"alignbot: error: --spec-file {tmp_path}: is a directory; expected a Python file of "
        f"@autotest specs (one --spec-file per file)\n")


def test_an_interpreter_without_numpy_is_one_line_with_its_fix(tmp_path: Path, capsys: Any
                                                               ) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True)
    python = str(tmp_path / "bare" / "bin" / "python")
    assert main(["check", "--prelude", "import torch", "--python", python, "--jobs", "1",
                 "--spec-file", PLANTED, "--ops", "matmul_clean"]) == 2
    assert capsys.readouterr().err == (
        f"alignbot: error: the candidate's worker cannot start: {python} has no numpy; install "
        f"it there (pip install 'numpy>=1.26,<3') or point --python at an interpreter that "
        f"has it\n")
