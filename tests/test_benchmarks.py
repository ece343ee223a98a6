"""benchmarks/engine_overhead.py runs end to end on a tiny setting and writes its figures."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from alignbot.checks.spec import Spec

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "engine_overhead.py"


@pytest.fixture(scope="module")
def overhead() -> ModuleType:
    spec = importlib.util.spec_from_file_location("engine_overhead", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_tiny_run_writes_positive_figures(overhead: ModuleType, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "figures.json"
    code = overhead.main(["--ops", "activations.gelu", "--n", "2", "--repeat", "1",
                          "--json", str(out)])
    assert code == 0
    data = json.loads(out.read_text())
    assert data["programs"] >= 1
    for name in ("direct", "calls", "engine", "trace", "candidate", "judge", "check"):
        assert data["per_program_ms"][name] > 0, name
    assert data["per_program_ms"]["draw_overhead"] >= 0
    for name in ("engine_over_direct", "engine_over_calls", "check_over_direct"):
        assert data["ratio"][name] > 0, name
    for name in ("engine_process", "worker"):
        assert data["peak_rss_mib"][name] > 0, name
    assert data["problems"]["direct_failures"] == 0
    assert data["problems"]["engine_findings"] == 0
    assert "ratio engine/direct" in capsys.readouterr().out


def test_direct_source_is_a_hand_written_test(overhead: ModuleType) -> None:
    program = {
        "seed": 0, "nodes": [
            {"id": "v0", "op": "input", "dtype": "float32", "shape": [2],
             "recipe": {"kind": "uniform", "seed": 1}, "requires_grad": True},
            {"id": "v1", "op": "call", "target": "torch.nn.functional.gelu",
             "args": [{"ref": "v0"}], "kwargs": {"approximate": "tanh"}},
        ],
        "backward": {"outputs": ["v1"], "wrt": ["v0"],
                     "seeds": [{"kind": "uniform", "seed": 2}]},
    }
    ref = {"v0": {"t": "tensor"}, "v1": {"t": "tensor"}, "grad:v0": {"t": "tensor"}}
    source = overhead.direct_source(program, ref)
    assert "r_v1 = ref.nn.functional.gelu(r_v0, approximate='tanh')" in source
    assert "c_v1 = cand.nn.functional.gelu(c_v0, approximate='tanh')" in source
    assert "close(c_v1, r_v1)" in source
    assert "close(c_grads0, r_grads0)" in source
    overhead.compile_direct(program, ref, Spec("gelu", fn=lambda torch: None))()


def _load(name: str) -> ModuleType:
    path = SCRIPT.with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_yardstick_counts_entries_by_kind_and_op_and_flags_unconfirmed_findings() -> None:
    yardstick = _load("paddle_yardstick")
    table = yardstick.load_table()
    first, second = table.TABLE[0], table.TABLE[1]

    def finding(kind: str, op: str, **extra: object) -> dict[str, object]:
        return {"kind": kind, "op": op, "spec": "s", "message": "m", "observation": "v1",
                **extra}

    report = {"findings": [
        finding(first.kind, first.op),  # an entry, reported
        finding(second.kind, "torch.other"),  # right kind, wrong op: the entry is missed
        finding("grad-mismatch", "torch.Tensor.add_", judged_alone=True,
                downstream_of=[{"kind": "value-mismatch", "op": "torch.mul", "node": "v1"}]),
        finding("grad-mismatch", "torch.Tensor.mul_"),  # blamed, never confirmed alone
        finding("grad-mismatch", "torch.Tensor.fill_",
                downstream_of=[{"kind": "candidate-error", "op": "torch.mul", "node": "v1"}]),
    ]}
    result = yardstick.score(table, report)
    reported = {row["id"] for row in result["rows"] if row["reported"]}
    assert first.id in reported and second.id not in reported
    assert result["findings"] == 5 and result["downstream"] == 2
    assert [f["op"] for f in result["unconfirmed"]] == ["torch.Tensor.mul_", "torch.Tensor.fill_"]
    assert result["consequences"] == 1


@pytest.mark.slow
def test_jobs_speedup_compares_one_and_two_workers(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = SCRIPT.with_name("jobs_speedup.py")
    spec = importlib.util.spec_from_file_location("jobs_speedup", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "figures.json"
    assert module.main(["--ops", "activations.relu,activations.gelu", "--n", "2",
                        "--repeat", "1", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["identical_reports"] is True and data["programs"] == 4
    assert data["ratio"] > 0 and set(data["median_seconds"]) == {"1", "2"}
    assert "reports byte-identical" in capsys.readouterr().out


@pytest.mark.slow
def test_opinfo_coverage_counts_entries_names_and_draws(tmp_path: Path) -> None:
    # its own process: reading PyTorch's OpInfo database leaves state behind in this one
    out = tmp_path / "coverage.json"
    subprocess.run([sys.executable, str(SCRIPT.with_name("opinfo_coverage.py")), "--draw", "1",
                    "--ops", "opinfo.abs", "--json", str(out)], check=True, capture_output=True)
    data = json.loads(out.read_text())
    assert data["entries"] >= 600 and data["op_names"] >= 550
    assert data["entries_with_a_spec"] + sum(data["entries_skipped"].values()) == data["entries"]
    assert data["names_library"] <= data["names_either"] <= data["op_names"]
    assert data["names_opinfo"] <= data["names_either"]
    assert data["draw"]["drew_a_call"] == 1 and data["draw"]["failed"] == {}
    assert data["entry_dtype_pairs_drawable"] > data["entries_with_a_spec"]
    assert 1 <= data["draw"]["entry_dtype_pairs_exercised"] <= len(
        data["draw"]["dtypes_drawn"]["opinfo.abs"])
    assert data["module_classes_exercised"] >= 0.95 * data["module_classes"]
    assert data["module_classes_exercised"] + len(data["module_classes_left_out"]) \
        == data["module_classes"]


@pytest.mark.slow
@pytest.mark.services
def test_workers_benchmark_times_checks_and_acknowledgements(postgres_url: str,
                                                             tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    subprocess.run([sys.executable, str(SCRIPT.with_name("workers.py")), "--checks", "2",
                    "--counts", "1", "--setup-seconds", "0.2", "--json", str(out)],
                   env={**os.environ, "ALIGNBOT_TEST_POSTGRES_URL": postgres_url},  # this worker's
                   check=True, timeout=300)
    (row,) = json.loads(out.read_text())
    assert row["workers"] == 1 and row["checks"] == 2 and row["checks_per_minute"] > 0
    assert row["probes"] > 0 and row["probe_failures"] == 0 and row["ack_p99_ms"] > 0


def test_metrics_scrape_times_a_scrape_over_a_filled_queue(tmp_path: Path) -> None:
    out = tmp_path / "scrape.json"
    subprocess.run([sys.executable, str(SCRIPT.with_name("metrics_scrape.py")), "--active",
                    "30", "--finished", "30", "--repeat", "2", "--json", str(out)], check=True,
                   capture_output=True)
    data = json.loads(out.read_text())
    assert data["active"] == 30 and data["scrape_ms"]["median"] > 0
    assert data["bytes"] > 1000


@pytest.mark.slow
def test_exploration_counts_what_free_and_steered_draws_exercise(tmp_path: Path) -> None:
    out = tmp_path / "exploration.json"
    subprocess.run([sys.executable, str(SCRIPT.with_name("exploration.py")), "--specs",
                    "reductions.var_std", "--json", str(out)], check=True, capture_output=True)
    data = json.loads(out.read_text())
    free, steered = data["free"], data["steered"]
    assert data["specs"] == 1 and free["failed"] == steered["failed"] == {}
    assert free["drawn"] < free["seen"] and steered["drawn"] == steered["seen"]
    assert steered["specs_missing"] == 0 and list(free["missed"]) == ["reductions.var_std"]



def test_real_candidates_figures_come_from_the_report() -> None:
    real = _load("real_candidates")
    from alignbot.checks.spec_loading import library_specs

    # a misspelt name would silently check one spec less
    assert set(real.SAMPLE) <= {s.name for s in library_specs()}
    assert len(set(real.SAMPLE)) == len(real.SAMPLE) == 15

    def finding(op: str, shrink: float, **extra: object) -> dict[str, object]:
        return {"kind": "candidate-error", "op": op, "count": 2, "repro_verified": True,
                "verdict": "candidate-bug", "shrink": {"calls": 3, "seconds": shrink}, **extra}

    report = {"programs_run": 30, "complete": True, "findings": [
        finding("torch.topk", 2.0), finding("torch.topk", 4.0, repro_verified=False),
        finding("torch.cos", 9.0, phases={"verify": 20.0, "triage": 11.0}),
    ]}
    result = real.figures(report, seconds=120.0, plain_seconds=30.0)
    assert (result["findings"], result["distinct_ops"], result["draws"]) == (3, 2, 6)
    assert result["repros_verified"] == 2 and result["causes"] is None
    assert (result["seconds_per_finding"], result["minimizing_seconds_per_finding"]) == (
        40.0, 30.0)
    # per finding: 2, 4 and 9 + 20 + 11 recorded seconds
    assert result["median_recorded_seconds_per_finding"] == 4.0
    assert result["median_phase_seconds"] == {"shrink": 4.0, "triage": 11.0, "verify": 20.0}
    assert real.figures({**report, "causes": [{}, {}]}, 1.0, None)["causes"] == 2


def test_real_candidates_needs_the_interpreters(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    real = _load("real_candidates")
    assert real.main(["--candidate", "torchax", "--torchax-python",
                      str(tmp_path / "none")]) == 2
    assert "no torchax interpreter at" in capsys.readouterr().err


def test_suite_time_sums_a_real_junit_file_per_file(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_slow.py").write_text(
        "import time\n\ndef test_sleeps():\n    time.sleep(0.3)\n\ndef test_quick():\n    pass\n")
    (tests / "test_other.py").write_text("def test_nothing():\n    pass\n")
    xml = tmp_path / "results.xml"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", f"--junitxml={xml}", "--rootdir", str(tmp_path),
                           str(tests)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    suite_time = _load("suite_time")
    seconds = suite_time.durations(xml)
    assert set(seconds) == {"tests/test_slow.py::test_sleeps", "tests/test_slow.py::test_quick",
                            "tests/test_other.py::test_nothing"}
    assert seconds["tests/test_slow.py::test_sleeps"] >= 0.3
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "suite_time.py"
    printed = subprocess.run([sys.executable, str(script), str(xml), "--top", "2"],
                             capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0, printed.stderr
    lines = printed.stdout.splitlines()
    assert lines[0].startswith("3 tests, ")
    assert lines[3].endswith("tests/test_slow.py")  # the slower file first
    missing = subprocess.run([sys.executable, str(script), str(tmp_path / "none.xml")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


def test_baseline_cache_needs_paddle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load("baseline_cache")
    assert bench.main(["--python", str(tmp_path / "no-python")]) == 2
    assert "ALIGNBOT_PADDLE_PYTHON" in capsys.readouterr().err


@pytest.mark.slow
def test_worker_restart_compares_fresh_interpreters_and_forks(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path = SCRIPT.with_name("worker_restart.py")
    spec = importlib.util.spec_from_file_location("worker_restart", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", ["worker_restart.py", "--restarts", "1", "--no-check"])
    monkeypatch.setenv("ALIGNBOT_FRESH_WORKERS", "")
    assert module.main() == 0
    out = capsys.readouterr().out
    figures = [float(f) for f in re.findall(r"(\d+\.\d+) s", out)]
    assert out.startswith("restart after a crash, median of 1: fresh interpreter ")
    assert len(figures) == 2 and figures[1] < figures[0]  # the fork comes up sooner


def test_default_run_times_a_check_and_counts_the_cells_it_exercises(tmp_path: Path) -> None:
    # a library spec of tile-crossing, non-contiguous inputs: its cells are this test's claim
    # (a whole default run takes minutes: docs/measured.md)
    out = tmp_path / "default.json"
    subprocess.run([sys.executable, str(SCRIPT.with_name("default_run.py")), "--ops",
                    "tiles.tile_crossing", "--json", str(out)], check=True, capture_output=True)
    data = json.loads(out.read_text())
    assert data["seconds"] > 0 and data["cpu_seconds"] > 0 and data["findings"] == 0
    assert data["specs"] == 1 and data["programs"] == 12
    assert 0 < data["cells_exercised"] <= data["cells_possible"]
    assert data["share"] == round(data["cells_exercised"] / data["cells_possible"], 4)
    by_variant = data["exercised_by_variant"]
    assert by_variant["non-contiguous tile-crossing"] >= 1
    assert by_variant["contiguous tile-crossing"] >= 1
