"""checks/pytest_plugin.py: a repository's spec files run by pytest, in a real pytest process
(the plugin is found through its ``pytest11`` entry point, as a team's pytest finds it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PRELUDE = "import torch\nimport fastops\nfastops.enable()\n"
FINGERPRINT = re.compile(r"\[([0-9a-f]{12}), ")


def repository(tmp_path: Path, fastops: Path) -> Path:
    """A team's repository: its kernel library and its spec file."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(fastops, repo / "fastops.py")
    shutil.copy(EXAMPLES / "fastops" / "align_fastops.py", repo / "align_fastops.py")
    return repo


REPRO_LINE = re.compile(r"repro \(verified: exits 1 while the bug is there\): python (\S+)")


def run_pytest(repo: Path, *args: str, opinfo: bool = False
               ) -> tuple[int, str, dict[str, str | None]]:
    """pytest's exit status, its output, and each test's failure text (None: passed). The
    OpInfo tests are left out unless ``opinfo``: these tests are about the spec files."""
    report = repo / "report.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={report}",
         "--alignbot-draws=4", *([] if opinfo else ["--alignbot-no-opinfo"]), *args],
        cwd=repo, capture_output=True, text=True, timeout=900)
    outcomes: dict[str, str | None] = {}
    if report.exists():
        for case in ET.parse(report).getroot().iter("testcase"):
            failure = case.find("failure")
            outcomes[case.get("name", "")] = None if failure is None else (
                failure.text or failure.get("message", ""))
    return proc.returncode, proc.stdout + proc.stderr, outcomes


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the demo's pull request: fastops' softplus backward is broken (mish calls it)
    return repository(tmp_path_factory.mktemp("broken"),
                      EXAMPLES / "pull-request" / "fastops.py")


@pytest.fixture(scope="module")
def serial(broken: Path) -> tuple[int, str, dict[str, str | None]]:
    return run_pytest(broken, f"--alignbot-prelude={PRELUDE}")


@pytest.mark.slow
def test_each_spec_is_a_test_and_a_finding_fails_it_with_its_repro(
        serial: tuple[int, str, dict[str, str | None]]) -> None:
    code, output, outcomes = serial
    assert code == 1, output
    assert set(outcomes) == {"softplus", "mish"}, output
    failure = outcomes["softplus"]
    assert failure is not None
    assert "grad-mismatch at torch.nn.functional.softplus" in failure
    # a short message: the case, and the script written to a file, not pasted in
    assert "the case, run on PyTorch and on the candidate:\ndef case(torch):" in failure
    assert REPRO_LINE.search(failure) and '"""alignbot repro ' not in failure
    assert len(failure.splitlines()) <= 25, failure


@pytest.mark.slow
def test_the_repro_in_the_failure_runs_and_shows_the_bug(
        serial: tuple[int, str, dict[str, str | None]], broken: Path) -> None:
    failure = serial[2]["softplus"]
    assert failure is not None
    written = REPRO_LINE.search(failure)
    assert written is not None, failure
    path = broken / "repro.py"  # run from the repository, as a user would
    path.write_text(Path(written[1]).read_text())
    assert '"""alignbot repro ' in path.read_text()
    run = subprocess.run([sys.executable, str(path)], cwd=broken, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    control = subprocess.run([sys.executable, str(path), "--control"], cwd=broken,
                             capture_output=True, text=True, timeout=300)
    assert control.returncode == 0, control.stdout + control.stderr


@pytest.mark.slow
def test_xdist_workers_give_the_same_findings(
        serial: tuple[int, str, dict[str, str | None]], broken: Path) -> None:
    code, output, outcomes = run_pytest(broken, f"--alignbot-prelude={PRELUDE}", "-n", "2")
    assert code == 1, output
    assert "2 workers" in output
    assert {name: sorted(FINGERPRINT.findall(text or "")) for name, text in outcomes.items()} \
        == {name: sorted(FINGERPRINT.findall(text or "")) for name, text in serial[2].items()}
    assert FINGERPRINT.findall(outcomes["softplus"] or "")


@pytest.fixture(scope="module")
def aligned(tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[Path, tuple[int, str, dict[str, str | None]]]:
    """The aligned library, checked once with its prelude in a file (``@candidate.py``)."""
    repo = repository(tmp_path_factory.mktemp("aligned"), EXAMPLES / "fastops" / "fastops.py")
    (repo / "candidate.py").write_text(PRELUDE)
    return repo, run_pytest(repo, "--alignbot-prelude=@candidate.py")


@pytest.mark.slow
def test_an_aligned_library_passes(
        aligned: tuple[Path, tuple[int, str, dict[str, str | None]]]) -> None:
    code, output, outcomes = aligned[1]
    assert code == 0, output
    assert outcomes == {"softplus": None, "mish": None}


@pytest.mark.slow
def test_a_preset_and_a_prelude_file(
        aligned: tuple[Path, tuple[int, str, dict[str, str | None]]]) -> None:
    repo, (code, output, outcomes) = aligned
    assert code == 0 and set(outcomes) == {"softplus", "mish"}, output
    code, output, outcomes = run_pytest(repo, "--alignbot-candidate=torch")
    assert code == 0 and set(outcomes) == {"softplus", "mish"}, output


@pytest.mark.slow
def test_the_plugin_is_idle_without_a_candidate(tmp_path: Path) -> None:
    repo = repository(tmp_path, EXAMPLES / "fastops" / "fastops.py")
    code, output, outcomes = run_pytest(repo)
    assert code == 5 and outcomes == {}, output  # pytest: no tests collected


@pytest.mark.slow
@pytest.mark.parametrize(("args", "message"), [
    (["--alignbot-candidate=torch", f"--alignbot-prelude={PRELUDE}"],
     "give --alignbot-candidate or --alignbot-prelude, not both"),
    (["--alignbot-candidate=nope"], "unknown candidate preset 'nope'"),
    (["--alignbot-prelude=@missing.py"], "--alignbot-prelude missing.py: No such file"),
    (["--alignbot-candidate=torch", "--alignbot-draws=0"],
     "--alignbot-draws 0: expected a whole number of draws, 1 or more"),
    # the command line refuses the same values in the same words (checks/options.py)
    (["--alignbot-candidate=torch", "--alignbot-timeout=0"],
     "--alignbot-timeout 0: expected a number of seconds above 0"),
    (["--alignbot-candidate=torch", "--alignbot-timeout=-5"],
     "--alignbot-timeout -5: expected a number of seconds above 0"),
    # pytest's interpreter has no Paddle: the plugin's own options name the fix
    (["--alignbot-candidate=paddle"],
     f"ERROR: --alignbot-candidate paddle: {sys.executable} has no paddle; install it there "
     f"(pip install paddlepaddle==3.3.1) or point --alignbot-python at an interpreter that "
     f"has it"),
])
def test_bad_options_are_one_readable_line(tmp_path: Path, args: list[str], message: str
                                           ) -> None:
    repo = repository(tmp_path, EXAMPLES / "fastops" / "fastops.py")
    code, output, _ = run_pytest(repo, *args)
    assert code == 4, output  # pytest's usage error
    assert message in output and "Traceback" not in output, output


@pytest.mark.slow
def test_a_candidate_that_does_not_start_fails_each_test_readably(tmp_path: Path) -> None:
    repo = repository(tmp_path, EXAMPLES / "fastops" / "fastops.py")
    code, output, outcomes = run_pytest(repo, "--alignbot-prelude=import not_installed_lib")
    assert code == 1, output
    assert all(text and "the candidate did not start" in text for text in outcomes.values())
    assert set(outcomes) == {"softplus", "mish"}


KNOWN = """\
known:
  - op: torch.nn.functional.softplus
    spec: "*softplus"
    reason: the backward is rewritten for speed
    upstream: https://github.com/example/fastops/issues/7
  - fingerprint: "0123456789ab"
    spec: "*mish"
    reason: mish was off once
"""


@pytest.mark.slow
def test_known_divergences_xfail_and_a_fixed_one_is_a_strict_xpass(
        broken: Path, tmp_path: Path) -> None:
    """The repository's known-divergences file: the broken softplus is an xfail with its
    reason; on the aligned library the softplus entry and the mish entry no longer
    reproduce, each a strict XPASS (a failure: remove the entry)."""
    known = tmp_path / "known.yml"
    known.write_text(KNOWN)
    # what is claimed is which finding is known, not its repro: no minimizing
    code, output, outcomes = run_pytest(broken, f"--alignbot-prelude={PRELUDE}",
                                        f"--alignbot-known={known}", "-rxX",
                                        "--alignbot-no-minimize")
    assert code == 1, output  # mish's finding is new
    assert "XFAIL" in output and "the backward is rewritten for speed" in output, output
    assert outcomes["softplus"] is None and outcomes["mish"], output
    aligned = repository(tmp_path, EXAMPLES / "fastops" / "fastops.py")
    (aligned / ".github").mkdir()
    (aligned / ".github" / "alignbot-known.yml").write_text(KNOWN)  # found by default
    code, output, outcomes = run_pytest(aligned, f"--alignbot-prelude={PRELUDE}")
    assert code == 1, output
    assert all(text and "XPASS(strict)" in text for text in outcomes.values()), output
    known.write_text("known:\n  - op: x\n")
    code, output, _ = run_pytest(aligned, f"--alignbot-prelude={PRELUDE}",
                                 f"--alignbot-known={known}")
    assert code == 4 and f"{known}:2: the entry has no `reason:`" in output, output


@pytest.mark.slow
def test_the_opinfo_specs_are_tests_too_unless_left_out(broken: Path) -> None:
    # fastops' broken softplus fails PyTorch's own OpInfo spec of softplus as well
    code, output, outcomes = run_pytest(broken, f"--alignbot-prelude={PRELUDE}",
                                        "--alignbot-draws=3", "-k",
                                        "nn.functional.softplus and not errors",
                                        opinfo=True)
    assert code == 1, output
    assert outcomes.get("opinfo.nn.functional.softplus"), (outcomes, output[-3000:])
    assert set(outcomes) == {"opinfo.nn.functional.softplus"}, outcomes
    assert "repro (verified" in str(outcomes["opinfo.nn.functional.softplus"])
    # a spec file named on the command line selects exactly its specs
    code, output, outcomes = run_pytest(broken, f"--alignbot-prelude={PRELUDE}",
                                        "align_fastops.py", "-k", "softplus",
                                        "--alignbot-no-minimize", opinfo=True)
    assert outcomes and not any(name.startswith("opinfo.") for name in outcomes), outcomes
