"""The worker process: starts from a prelude, survives crashes and hangs, rejects bad setups."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from alignbot.checks import CandidateConfig, CandidateProcess, CandidateStartError
from alignbot.checks.installs import PINS
from alignbot.checks.runtime.wire import WireError, read_message, write_message

PROGRAM = {
    "version": 1, "spec": "t.relu", "seed": 0, "choices": [],
    "nodes": [
        {"id": "v0", "op": "input", "dtype": "float32", "shape": [2, 3],
         "recipe": {"kind": "uniform", "low": -1.0, "high": 1.0, "seed": 5},
         "requires_grad": True},
        {"id": "v1", "op": "call", "target": "torch.nn.functional.relu",
         "args": [{"ref": "v0"}], "kwargs": {}},
    ],
    "backward": {"outputs": ["v1"], "wrt": ["v0"],
                 "seeds": [{"kind": "uniform", "low": -1.0, "high": 1.0, "seed": 1}]},
}


def test_wire_round_trips_arrays_without_pickle() -> None:
    stream = io.BytesIO()
    message = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": [np.int64(3), None],
               "zero_d": np.array(7, dtype=np.int64)}
    write_message(stream, message)
    stream.seek(0)
    back = read_message(stream)
    assert back["a"].shape == (2, 3) and back["a"].dtype == np.float32
    assert back["zero_d"].shape == () and int(back["zero_d"]) == 7
    assert back["b"] == [3, None]
    with pytest.raises(WireError):
        read_message(io.BytesIO(b"\x05\x00"))


def test_worker_replays_and_returns_values_and_gradients(torch_candidate: Any) -> None:
    outcome = torch_candidate.run(PROGRAM)
    obs = outcome.observations
    assert obs is not None
    assert obs["v1"]["shape"] == [2, 3]
    assert (obs["v1"]["data"] >= 0).all()
    assert obs["grad:v0"]["shape"] == [2, 3]


@pytest.mark.slow
def test_complex32_and_unsigned_inputs_replay_as_the_reference_does(torch_candidate: Any) -> None:
    from alignbot.checks.oracle import reference_observations

    program = {
        "version": 1, "spec": "t.dtypes", "seed": 0, "choices": [], "backward": None,
        "nodes": [
            {"id": "v0", "op": "input", "dtype": "complex32", "shape": [2, 3],
             "recipe": {"kind": "uniform", "low": -1.0, "high": 1.0, "seed": 5}},
            {"id": "v1", "op": "input", "dtype": "uint32", "shape": [4],
             "recipe": {"kind": "uniform", "low": 0.0, "high": 4e9, "seed": 6}},
            {"id": "v2", "op": "call", "target": "torch.mul",
             "args": [{"ref": "v0"}, {"ref": "v0"}], "kwargs": {}},
            {"id": "v3", "op": "call", "target": "torch.clone",
             "args": [{"ref": "v1"}], "kwargs": {}},
        ],
    }
    ref = reference_observations(program)
    obs = torch_candidate.run(program).observations
    assert obs is not None
    assert obs["v2"]["dtype"] == ref["v2"]["dtype"] == "complex32"
    assert obs["v2"]["data"].dtype == np.complex64  # travels widened
    np.testing.assert_array_equal(obs["v2"]["data"], ref["v2"]["data"])
    assert obs["v3"]["dtype"] == "uint32" and obs["v3"]["data"].max() > 2**31
    np.testing.assert_array_equal(obs["v3"]["data"], ref["v3"]["data"])


@pytest.mark.slow
def test_candidate_prints_do_not_corrupt_the_stream(make_candidate: Any) -> None:
    prelude = "import torch\nprint('hello from the candidate')\n" \
              "_relu = torch.nn.functional.relu\n" \
              "def relu(x):\n    print('noisy kernel')\n    return _relu(x)\n" \
              "torch.nn.functional.relu = relu\n"
    outcome = make_candidate(prelude).run(PROGRAM)
    assert outcome.observations is not None and "v1" in outcome.observations


@pytest.mark.slow
def test_the_prelude_is_a_real_module(make_candidate: Any) -> None:
    """Code that finds a function's module by its ``__module__`` (pickle, Dynamo's guards)
    must find the prelude's: a kernel defined in the prelude is pickled here."""
    prelude = ("import pickle, torch\n_relu = torch.nn.functional.relu\n"
               "def relu(x):\n    return _relu(x)\n"
               "assert pickle.loads(pickle.dumps(relu)) is relu\n"
               "torch.nn.functional.relu = relu\n")
    outcome = make_candidate(prelude).run(PROGRAM)
    assert outcome.observations is not None and "v1" in outcome.observations


@pytest.mark.slow
def test_crash_is_reported_with_the_running_node_and_the_worker_restarts(
        make_candidate: Any) -> None:
    prelude = "import os, torch\ntorch.nn.functional.relu = lambda x: os.abort()\n"
    candidate = make_candidate(prelude)
    outcome = candidate.run(PROGRAM)
    assert outcome.died == "crash" and outcome.node_index == 1
    assert "SIGABRT" in outcome.detail
    again = candidate.run(PROGRAM)
    assert again.died == "crash"
    assert candidate.starts == 2


def test_segfault_is_a_crash(make_candidate: Any) -> None:
    prelude = ("import ctypes, torch\n"
               "torch.nn.functional.relu = lambda x: ctypes.string_at(0)\n")
    outcome = make_candidate(prelude).run(PROGRAM)
    assert outcome.died == "crash" and "SIGSEGV" in outcome.detail


@pytest.mark.slow
def test_hang_is_killed_at_the_timeout(make_candidate: Any) -> None:
    prelude = "import time, torch\ntorch.nn.functional.relu = lambda x: time.sleep(600)\n"
    candidate = make_candidate(prelude, timeout=1.0)
    outcome = candidate.run(PROGRAM)
    assert outcome.died == "timeout" and outcome.node_index == 1


@pytest.mark.slow
def test_per_op_override_replaces_one_api(make_candidate: Any, tmp_path: Any,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "myops.py").write_text("import torch\ndef relu(x):\n    return x.abs()\n")
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    candidate = make_candidate("import torch\n", env=env,
                               overrides={"torch.nn.functional.relu": "myops:relu"})
    obs = candidate.run(PROGRAM).observations
    assert obs is not None and (obs["v1"]["data"] > 0).all()


def test_prelude_that_raises_is_a_start_error() -> None:
    with pytest.raises(CandidateStartError, match="ZeroDivisionError"):
        CandidateProcess(CandidateConfig("bad", "1/0")).start()


def test_prelude_must_bind_torch() -> None:
    with pytest.raises(CandidateStartError, match="did not bind the name 'torch'"):
        CandidateProcess(CandidateConfig("bad", "import math")).start()


def test_missing_interpreter_is_a_start_error() -> None:
    with pytest.raises(CandidateStartError, match="cannot start"):
        CandidateProcess(CandidateConfig("bad", "import torch",
                                         python="/no/such/python")).start()


def test_worker_that_exits_during_start_is_a_start_error() -> None:
    with pytest.raises(CandidateStartError, match="exited while starting"):
        CandidateProcess(CandidateConfig("bad", "import os\nos._exit(3)")).start()


def _venv(where: Path, *, numpy: bool) -> str:
    """A fresh virtual environment's interpreter: nothing installed, or NumPy alone (this
    interpreter's, reached through a .pth file)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    if numpy:
        (where / "numpy-only").mkdir()
        (where / "numpy-only" / "numpy").symlink_to(Path(np.__file__).parent)
        (site,) = (where / "lib").glob("python3*/site-packages")
        (site / "numpy-only.pth").write_text(str(where / "numpy-only") + "\n")
    return str(where / "bin" / "python")


def test_an_interpreter_without_numpy_or_torch_is_one_line_with_its_fix(tmp_path: Path
                                                                        ) -> None:
    for numpy, failed, missing in ((False, "worker cannot start", "numpy"),
                                   (True, "prelude failed", "torch")):
        python = _venv(tmp_path / missing, numpy=numpy)
        with pytest.raises(CandidateStartError) as raised:
            CandidateProcess(CandidateConfig("lacking", "import torch", python=python)).start()
        index = " --extra-index-url https://download.pytorch.org/whl/cpu" * (missing == "torch")
        assert str(raised.value) == (
            f"the candidate's {failed}: {python} has no {missing}; install it there (pip "
            f"install {PINS[missing]}{index}) or point --python at an interpreter that has it")
        # what --verbose shows
        assert f"No module named '{missing}'" in raised.value.detail


def test_the_worker_needs_the_numpy_this_project_requires() -> None:
    project = (Path(__file__).parent.parent / "pyproject.toml").read_text()
    pin = PINS["numpy"].strip("'")
    assert f'"{pin}",' in project


def test_worker_runs_in_the_interpreter_it_is_given() -> None:
    config = CandidateConfig("self", "import torch, sys\n", python=sys.executable)
    with CandidateProcess(config) as candidate:
        assert candidate.version.startswith("2.")


@pytest.mark.slow
def test_crash_message_is_the_same_on_every_run(make_candidate: Any) -> None:
    # Only what the crashing program wrote to stderr, with addresses (which differ from run
    # to run, as a thread id in a fatal error's dump) masked; not what earlier programs wrote.
    prelude = ("import os, sys, threading, torch\n"
               "_relu = torch.nn.functional.relu\n"
               "def relu(x):\n    print('earlier program', file=sys.stderr)\n"
               "    return _relu(x)\n"
               "def gelu(x):\n"
               "    print(f'thread {threading.get_ident():#x} aborts', file=sys.stderr)\n"
               "    os.abort()\n"
               "torch.nn.functional.relu, torch.nn.functional.gelu = relu, gelu\n")
    nodes: list[dict[str, Any]] = PROGRAM["nodes"]  # type: ignore[assignment]
    crash = {**PROGRAM, "nodes": [nodes[0], {**nodes[1], "target": "torch.nn.functional.gelu"}]}
    candidate = make_candidate(prelude)
    details = []
    for _ in range(2):
        assert candidate.run(PROGRAM).observations is not None
        outcome = candidate.run(crash)
        assert outcome.died == "crash" and outcome.node_index == 1
        details.append(outcome.detail)
    assert candidate.starts == 2
    assert details[0] == details[1]
    assert details[0] == "the worker was killed by SIGABRT; stderr: thread 0x… aborts"


def _package(root: Any, name: str, init: str = "", dist_version: str | None = None) -> None:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text(init)
    if dist_version is not None:  # installed, without a __version__ of its own
        dist = root / f"{name}-{dist_version}.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {dist_version}\n")
        (dist / "top_level.txt").write_text(f"{name}\n")


@pytest.mark.slow
def test_the_packages_the_prelude_imports_are_recorded_with_their_versions(
        make_candidate: Any, tmp_path: Any) -> None:
    """Read in the worker, from the modules the prelude imported (``__version__``, else the
    installed distribution); the standard library and what looks like no version are left
    out: the prelude is the candidate's code."""
    import torch

    _package(tmp_path, "fastops", "__version__ = '1.2.3'\n")
    _package(tmp_path, "plainops", dist_version="0.4.post1")
    _package(tmp_path, "evilops", "__version__ = '1.0 <img src=x onerror=alert(1)>'\n")
    _package(tmp_path, "buildops", "__version__ = '2.1.0-5-e213a1-releases/2/1'\n",
             dist_version="2.1.0")  # its own says more than a version: the distribution's
    _package(tmp_path, "oddops", "class V(str):\n    def strip(self):\n        return '@all'\n"
             "__version__ = V('2.0')\n")
    prelude = ("import json, os.path\nimport torch\nimport fastops\nfrom plainops import *\n"
               "import evilops\nimport oddops\nimport buildops\n")
    candidate = make_candidate(prelude, sys_path=(str(tmp_path),))
    assert candidate.packages == {"torch": str(torch.__version__), "fastops": "1.2.3",
                                  "plainops": "0.4.post1", "oddops": "2.0",
                                  "buildops": "2.1.0"}


def test_what_the_worker_says_it_imported_is_bounded_and_checked() -> None:
    from alignbot.checks.candidate import MAX_PACKAGES, packages

    assert packages("torchax 0.0.13") == {}
    assert packages([["torchax", "0.0.13"], ["a b", "1"], ["x", "1\n2"], ["y", 3],
                     ["torchax", "9"], ["z" * 65, "1"]]) == {"torchax": "0.0.13"}
    many = packages([[f"p{i}", "1.0"] for i in range(100)])
    assert len(many) == MAX_PACKAGES


@pytest.mark.slow
def test_the_report_shows_the_candidates_line_and_packages(make_candidate: Any,
                                                          tmp_path: Any) -> None:
    from alignbot.checks.engine import check
    from alignbot.checks.report import render_markdown, to_json
    from alignbot.checks.spec import Spec

    _package(tmp_path, "fastops", "__version__ = '1.2.3'\n")
    prelude = '"""Fast ops."""\nimport torch\nimport fastops\nfastops.enable = True\n'
    candidate = make_candidate(prelude, sys_path=(str(tmp_path),))
    result = check([Spec(name="t.relu", fn=lambda torch: torch.relu(torch.ones(2)), n=1)],
                   candidate)
    report = to_json(result, prelude)
    assert report["candidate"] == prelude  # what was checked, whole
    assert list(report["candidate_packages"]) == ["fastops", "torch"]
    text = render_markdown(report)
    assert "Candidate `import fastops` (fastops 1.2.3, torch " in text


@pytest.mark.slow
@pytest.mark.parametrize(("also", "works"), [
    ("'torch.optim.*'", True), ("['torch.optim.SGD', 'torch.Tensor.backward']", True),
    ("lambda name: name.startswith('torch.optim.')", True), ("5", False), ("[1, 2]", False)])
def test_alignbot_wrap_also_is_a_predicate_or_names(make_candidate: Any, also: str,
                                                    works: bool) -> None:
    prelude = f"import torch\nalignbot_wrap = lambda name, fn: fn\nalignbot_wrap_also = {also}\n"
    if works:
        assert make_candidate(prelude).run(PROGRAM).observations is not None
        return
    with pytest.raises(CandidateStartError, match="alignbot_wrap_also must be a function"):
        make_candidate(prelude)
