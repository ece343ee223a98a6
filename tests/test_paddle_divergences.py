"""The known-divergence table of Paddle's torch-compat mode still holds, probed directly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fixtures import paddle_divergences

PADDLE_PYTHON = os.environ.get("ALIGNBOT_PADDLE_PYTHON", "")
TABLE_FILE = Path(__file__).parent / "fixtures" / "paddle_divergences.py"
PADDLE_PRELUDE = "import paddle; paddle.enable_compat(); import torch"

pytestmark = [
    pytest.mark.paddle,
    pytest.mark.skipif(not os.path.exists(PADDLE_PYTHON),
                       reason="set ALIGNBOT_PADDLE_PYTHON (make test does)"),
]


table = paddle_divergences  # plain data, imported like any module


def _probe(python: str, prelude: str) -> dict[str, Any]:
    done = subprocess.run([python, str(TABLE_FILE), prelude], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def probed() -> tuple[dict[str, Any], dict[str, Any]]:
    return _probe(sys.executable, "import torch"), _probe(PADDLE_PYTHON, PADDLE_PRELUDE)


def test_table_is_wide_and_well_formed() -> None:
    entries = table.TABLE
    assert len(entries) >= 30
    assert len({e.id for e in entries}) == len(entries)
    assert len({e.family for e in entries}) >= 6
    assert len({e.kind for e in entries}) >= 4
    assert {e.kind for e in entries} <= set(table.KINDS)
    assert all(e.op.startswith("torch.") and "out" in e.probe for e in entries)


@pytest.mark.slow
def test_every_entry_still_diverges(probed: tuple[dict[str, Any], dict[str, Any]]) -> None:
    ref, cand = probed
    agreeing = [e.id for e in table.TABLE if table.difference(ref[e.id], cand[e.id]) is None]
    assert agreeing == [], f"Paddle now agrees with PyTorch on {agreeing}: update the table"


def test_reference_runs_every_probe(probed: tuple[dict[str, Any], dict[str, Any]]) -> None:
    ref, _ = probed
    raised = [e.id for e in table.TABLE if isinstance(ref[e.id], dict) and "error" in ref[e.id]]
    assert raised == []


def test_divergence_matches_the_declared_kind(
        probed: tuple[dict[str, Any], dict[str, Any]]) -> None:
    ref, cand = probed
    expected = {"candidate-error": "error", "missing-api": "error", "shape-mismatch": "shape",
                "dtype-mismatch": "dtype", "value-mismatch": "value", "grad-mismatch": "value",
                "state-mismatch": "value"}
    wrong = {e.id: table.difference(ref[e.id], cand[e.id]) for e in table.TABLE
             if table.difference(ref[e.id], cand[e.id]) != expected[e.kind]}
    assert wrong == {}
    missing = [e.id for e in table.TABLE if e.kind == "missing-api"
               and cand[e.id].get("error") != "AttributeError"]
    assert missing == []
    spread = Counter(e.kind for e in table.TABLE)
    assert spread["missing-api"] < len(table.TABLE) // 2
