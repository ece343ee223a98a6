"""`alignbot specs`: each spec's name, source, the dtypes it draws and its ops."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from alignbot.checks.catalog import CatalogEntry, render
from alignbot.checks.cli import main

PLANTED = str(Path(__file__).parent / "fixtures" / "planted_specs.py")


def test_specs_lists_name_source_dtypes_and_ops(capsys: Any) -> None:
    assert main(["specs", "--no-opinfo", "--ops", "relu*"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "SOURCE", "DTYPES", "OPS"]
    rows = {line.split()[0]: line.split(None, 3) for line in lines[1:-1]}
    assert lines[-1] == f"{len(rows)} specs"
    assert rows["activations.relu"] == ["activations.relu", "DSL", "float32,float64",
                                        "torch.nn.functional.relu, torch.nn.ReLU"]
    assert all("relu" in row[3] for row in rows.values())


def test_specs_json_lists_the_spec_files_specs(capsys: Any) -> None:
    assert main(["specs", "--spec-file", PLANTED, "--ops", "sum*,silu*", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed == [
        {"name": "planted_specs.silu_missing", "ops": ["torch.nn.functional.silu"],
         "source": "DSL", "dtypes": ["float32"], "draws": 4},
        {"name": "planted_specs.sum_dtype", "ops": ["torch.sum"], "source": "DSL",
         "dtypes": ["float32"], "draws": 6}]


def test_a_spec_that_draws_no_tensor_shows_a_dash() -> None:
    table = render([CatalogEntry("x.scalar", (), "DSL", (), 1)])
    assert table.splitlines()[1].split() == ["x.scalar", "DSL", "-", "-"]
    assert table.endswith("\n1 spec\n")
