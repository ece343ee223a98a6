"""Workers forked from a zygote that imported torch (checks/zygote.py) behave as fresh ones."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from test_candidate import PROGRAM

from alignbot.checks import CandidateConfig, CandidateProcess, CandidateStartError
from alignbot.checks.zygote import imports_torch_first

CRASHES = ("import ctypes, os, sys, torch\n"
           "def relu(x):\n"
           "    print('going down', file=sys.stderr, flush=True)\n"
           "    if os.environ.get('HOW') == 'exit':\n"
           "        os._exit(3)\n"
           "    ctypes.string_at(0)\n"
           "torch.nn.functional.relu = relu\n")


@pytest.mark.parametrize(("prelude", "first"), [
    ("import torch\n", True),
    ('"""doc"""\nfrom __future__ import annotations\nimport os, time\nimport torch.nn\n', True),
    ("from torch import nn\n", True),
    ("import os\nos.environ['TORCH_LOGS'] = 'x'\nimport torch\n", False),  # set before import
    ("import mylib\nimport torch\n", False),  # its import may do anything first
    ("import paddle\npaddle.enable_compat()\n", False),
    ("import torch as\n", False),  # not Python: the worker will say so
])
def test_torch_is_imported_first_only_when_nothing_else_runs_before(prelude: str,
                                                                    first: bool) -> None:
    assert imports_torch_first(prelude) is first


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def _gone(pid: int, seconds: float = 10.0) -> bool:
    """Whether process ``pid`` is gone (within ``seconds``)."""
    deadline = time.monotonic() + seconds
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    return not os.path.exists(f"/proc/{pid}")


@pytest.mark.parametrize("how", ["exit", "segfault"])
def test_a_crash_reads_the_same_and_the_restart_is_a_fork(make_candidate: Any, how: str,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    outcomes = []
    for fresh in ("1", ""):
        monkeypatch.setenv("ALIGNBOT_FRESH_WORKERS", fresh)
        candidate = make_candidate(CRASHES, env={**os.environ, "HOW": how})
        outcome = candidate.run(PROGRAM)
        outcomes.append((outcome.died, outcome.node_index, outcome.detail))
        started = time.monotonic()
        candidate.start()
        restart = time.monotonic() - started
        zygote = candidate._zygote
        if fresh:
            assert zygote is None
        else:  # the new worker is the zygote's child, and came up without importing torch
            assert zygote is not None and _parent(candidate._proc.pid) == zygote.proc.pid
            assert restart < 1.0, restart
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][2].startswith("the worker exited with status 3" if how == "exit"
                                     else "the worker was killed by SIGSEGV")
    assert "going down" in outcomes[0][2]


def test_a_hang_kills_the_forks_whole_session_and_the_zygote_stays(make_candidate: Any,
                                                                   tmp_path: Any) -> None:
    marker = tmp_path / "grandchild"
    prelude = ("import subprocess, sys, time, torch\n"
               "def relu(x):\n"
               "    child = subprocess.Popen([sys.executable, '-c', 'import time; "
               "time.sleep(600)'])\n"
               f"    open({str(marker)!r}, 'w').write(str(child.pid))\n"
               "    time.sleep(600)\n"
               "torch.nn.functional.relu = relu\n")
    candidate = make_candidate(prelude, timeout=2.0)
    zygote = candidate._zygote
    assert zygote is not None
    outcome = candidate.run(PROGRAM)
    assert outcome.died == "timeout"
    assert _gone(int(marker.read_text())), "the fork's child was left behind"
    assert zygote.alive() and candidate._zygote is zygote


def test_a_candidate_that_kills_its_zygote_goes_with_it(make_candidate: Any,
                                                        tmp_path: Any) -> None:
    """The fork outlives its parent: once the zygote cannot report the exit, the fork is
    killed with its session before it is called killed, not left running."""
    marker = tmp_path / "fork"
    prelude = ("import os, signal, time, torch\n"
               "def relu(x):\n"
               f"    open({str(marker)!r}, 'w').write(str(os.getpid()))\n"
               "    os.kill(os.getppid(), signal.SIGKILL)\n"
               "    time.sleep(600)\n"
               "torch.nn.functional.relu = relu\n")
    candidate = make_candidate(prelude, timeout=2.0)
    zygote = candidate._zygote
    assert zygote is not None
    outcome = candidate.run(PROGRAM)
    assert outcome.died is not None
    assert _gone(int(marker.read_text())), "the fork was left running"
    assert not zygote.alive()


def test_a_zygote_that_cannot_import_torch_leaves_the_error_to_a_fresh_worker(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "torch.py").write_text("raise ImportError('no torch here')\n")
    config = CandidateConfig("broken", "import torch\n",
                             env={**os.environ, "PYTHONPATH": str(tmp_path)})
    errors = []
    for fresh in ("1", ""):
        monkeypatch.setenv("ALIGNBOT_FRESH_WORKERS", fresh)
        candidate = CandidateProcess(config)
        try:
            with pytest.raises(CandidateStartError) as error:
                candidate.start()
            assert candidate._zygote is None and not candidate._warm
            errors.append(str(error.value))
        finally:
            candidate.close()
    assert errors[0] == errors[1]
    assert errors[0] == "the candidate's prelude failed: ImportError: no torch here"
