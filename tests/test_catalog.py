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


SLOW_SECOND = '''import os
import time
from pathlib import Path

from alignbot.checks import autotest, random_tensor

HERE = Path(os.environ["LISTING_DIR"])


@autotest(n=1, ops=["torch.relu"])
def first(torch):
    return torch.relu(random_tensor(ndim=1))


@autotest(n=1, ops=["torch.tanh"])
def second(torch):
    # drawn only once the test has read the first row (or after 180 s)
    deadline = time.monotonic() + 180
    while not (HERE / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return torch.tanh(random_tensor(ndim=1, dtype="float64"))
'''


def test_each_row_is_written_as_soon_as_its_spec_is_drawn(tmp_path: Path) -> None:
    """Into a pipe too: the first row arrives while the second spec is still being drawn."""
    import os
    import queue
    import subprocess
    import sys
    import threading

    (tmp_path / "slow_specs.py").write_text(SLOW_SECOND)
    proc = subprocess.Popen(
        [sys.executable, "-m", "alignbot.checks.cli", "specs", "--spec-file",
         str(tmp_path / "slow_specs.py")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "LISTING_DIR": str(tmp_path)})
    assert proc.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or []],
                     daemon=True).start()
    try:
        # a listing written at the end would come after the second spec's 180 s
        header = lines.get(timeout=120)
        row = lines.get(timeout=30)
    finally:
        (tmp_path / "go").write_text("")
    assert header.split() == ["NAME", "SOURCE", "DTYPES", "OPS"]
    assert row.split() == ["slow_specs.first", "DSL", "float32", "torch.relu"]
    assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    rest = [lines.get(timeout=10) for _ in range(2)]
    assert rest[0].split() == ["slow_specs.second", "DSL", "float64", "torch.tanh"]
    assert rest[1] == "2 specs\n"


def test_a_long_dtypes_list_wraps_under_its_column() -> None:
    dtypes = ("float16", "bfloat16", "float32", "float64", "complex64", "int64")
    table = render([CatalogEntry("opinfo.add", ("torch.add",), "OpInfo", dtypes, 8)])
    header, first, *more, count = table.splitlines()
    start = header.index("DTYPES")
    assert first[start:].split()[1:] == ["torch.add"] and count == "1 spec"
    assert more and all(line[:start].strip() == "" for line in more)
    listed = ",".join(line[start:].split()[0] for line in [first, *more])
    assert listed == ",".join(dtypes)
