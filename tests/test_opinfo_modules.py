"""PyTorch's ModuleInfo database as a source of specs (checks/opinfo/module_adapter.py,
checks/opinfo/modules.py): the adapter's contract with torch.testing._internal, programs that
build, convert, set the mode of and call a module, randomness left out honestly, and a bug
that shows only in evaluation mode found with a verified repro."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from alignbot.checks import CandidateProcess, check
from alignbot.checks.cli import main
from alignbot.checks.engine import draw_programs
from alignbot.checks.opinfo import module_adapter, modules, opinfo_specs
from alignbot.checks.opinfo.adapter import OpInfoChanged
from alignbot.checks.spec import Spec

FIXTURES = Path(__file__).parent / "fixtures"
HANDFUL = ("moduleinfo.nn.BatchNorm2d", "moduleinfo.nn.LSTM", "moduleinfo.nn.LazyConv2d",
           "moduleinfo.nn.MultiheadAttention", "moduleinfo.nn.TransformerEncoderLayer",
           "moduleinfo.nn.CrossEntropyLoss")


def specs_named(*names: str) -> list[Spec]:
    by_name = {s.name: s for s in modules.catalog().specs}
    return [by_name[n] for n in names]


def entry(name: str) -> module_adapter.ModuleEntry:
    return next(e for e in module_adapter.database().entries if e.name == name)


def programs_of(spec: Spec, n: int, seed: int = 0) -> list[dict[str, Any]]:
    drawn: list[dict[str, Any]] = []
    draw_programs(spec, n, seed, lambda program, ref: drawn.append(dict(program)))
    return drawn


def test_the_database_is_read_whole_and_classes_resolve() -> None:
    data = module_adapter.database()
    assert data.total >= 110
    assert len(data.entries) + len(data.skipped) == data.total
    lstm = entry("nn.LSTM")
    assert lstm.target == "torch.nn.LSTM" and lstm.train_and_eval_differ
    assert {"float32", "float64"} <= set(lstm.dtypes)
    assert not entry("nn.Linear").train_and_eval_differ


def test_a_changed_database_fails_loudly_naming_what_changed(monkeypatch: Any) -> None:
    real = module_adapter.module_db()[0]

    class Renamed:  # an entry of a future PyTorch: module_inputs_func renamed
        def __getattr__(self, name: str) -> Any:
            if name == "module_inputs_func":
                raise AttributeError(name)
            return getattr(real, name)

    monkeypatch.setattr(module_adapter, "module_db", lambda: [Renamed()])
    with pytest.raises(OpInfoChanged, match=r"module_db\[0\] .* has no module_inputs_func"):
        module_adapter.database.__wrapped__()
    with pytest.raises(OpInfoChanged, match="has no constructor_input, forward_input, desc"):
        module_adapter._sample(object())


def test_module_specs_come_with_opinfo_and_select_by_glob() -> None:
    names = {s.name for s in opinfo_specs(["moduleinfo.nn.LSTM*"])}
    assert names == {"moduleinfo.nn.LSTM", "moduleinfo.nn.LSTMCell", "moduleinfo.nn.LSTM.errors",
                     "moduleinfo.nn.LSTMCell.errors"}
    assert {s.source for s in opinfo_specs(["torch.nn.GRU"])} == {"ModuleInfo"}


def test_programs_build_convert_set_the_mode_and_call() -> None:
    (spec,) = specs_named("moduleinfo.nn.BatchNorm1d")
    seen = set()
    for program in programs_of(spec, 10):
        ops = [(n["op"], n.get("name")) for n in program["nodes"] if n["op"] != "input"]
        assert ops[0] == ("module", None) and ops[-1] == ("invoke", None)
        assert set(ops[1:-1]) <= {("method", "to"), ("method", "eval")}
        dtype = next(n["dtype"] for n in program["nodes"] if n["op"] == "input")
        assert (("method", "to") in ops) == (dtype == "float64")
        seen.add((dtype, ("method", "eval") in ops))
    assert len(seen) >= 3  # both dtypes, both modes


def test_error_inputs_are_programs_the_reference_rejects() -> None:
    (spec,) = specs_named("moduleinfo.nn.LSTM.errors")
    assert spec.raises and not spec.backward
    for program in programs_of(spec, 4):
        raised = [n for n in program["nodes"] if n.get("raises")]
        assert raised and raised[-1] is program["nodes"][-1]
        assert raised[-1]["op"] in ("module", "invoke")


def test_a_random_forward_is_left_out_in_training_mode_only() -> None:
    """No module_db sample draws dropout today (their dropout is 0): an entry of our own."""
    import torch

    dropout = module_adapter.ModuleEntry("nn.Dropout", -1, "torch.nn.Dropout", ("float32",),
                                         True)
    planned = modules.plan_module(module_adapter.ModuleSample(
        (0.5,), {}, (torch.rand(8, 8),), {}, "dropout"))
    assert modules._check(dropout, planned, "float32", True) == modules.RANDOM_IN_TRAINING
    assert modules._check(dropout, planned, "float32", False) is None


def test_a_module_instance_argument_is_left_out_with_its_reason() -> None:
    made = modules.pool(entry("nn.TransformerEncoder"), "float32", 0, True)
    assert not made.plans
    assert made.left_out["a module instance as a constructor argument"] > 0


@pytest.mark.slow
def test_a_handful_of_modules_align_with_torch_itself(torch_candidate: CandidateProcess
                                                       ) -> None:
    result = check(specs_named(*HANDFUL), torch_candidate, seed=0, n=3)
    assert result.specs_run == sorted(HANDFUL) or result.specs_run == list(HANDFUL)
    assert [f"{f.spec}: {f.message}" for f in result.findings] == []


@pytest.mark.slow
# Draws enough for one buggy draw in evaluation mode among draws that must agree (an
# InstanceNorm, a BatchNorm in training mode): one finding, one repro to verify.
@pytest.mark.parametrize(("ops", "n"), [("training.norm_modes", "4"),
                                        ("moduleinfo.nn.BatchNorm1d", "3")])
def test_a_bug_only_in_eval_mode_is_found_with_a_verified_repro(ops: str, n: str,
                                                                 tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    code = main(["check", "--prelude", (FIXTURES / "eval_mode_prelude.py").read_text(),
                 "--opinfo", "--library", "--ops", ops, "--n", n, "--seed", "1",
                 "--json", str(report), "--no-progress", "--jobs", "1"])
    assert code == 1
    findings = json.loads(report.read_text())["findings"]
    assert findings and {f["op"] for f in findings} <= {"torch.nn.BatchNorm1d",
                                                         "torch.nn.BatchNorm2d"}
    assert all(f["repro_verified"] for f in findings), [f.get("minimize_error")
                                                        for f in findings]
    assert all(".eval()" in f["repro"] for f in findings)


@pytest.mark.slow
def test_specs_lists_module_specs_and_the_classes_left_out(capsys: Any) -> None:
    assert main(["specs", "--opinfo", "--ops", "moduleinfo.nn.LSTM"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("moduleinfo.nn.LSTM "))
    assert row.split() == ["moduleinfo.nn.LSTM", "ModuleInfo", "float32,float64",
                           "torch.nn.LSTM"]
    total = module_adapter.database().total
    exercised = int(out.split("ModuleInfo: ", 1)[1].split(" of ", 1)[0])
    assert exercised >= 0.95 * total
    assert "  nn.TransformerEncoder: a module instance as a constructor argument" in out


@pytest.mark.slow
def test_a_bug_in_a_tuple_within_the_result_gets_a_verified_repro(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    code = main(["check", "--prelude", (FIXTURES / "lstm_state_prelude.py").read_text(),
                 "--opinfo", "--ops", "moduleinfo.nn.LSTM", "--n", "1", "--seed", "1",
                 "--json", str(report), "--no-progress", "--jobs", "1"])
    assert code == 1
    findings = json.loads(report.read_text())["findings"]
    assert findings and {f["op"] for f in findings} == {"torch.nn.LSTM"}
    assert all(f["observation"].endswith(".1.1") for f in findings)  # c of (out, (h, c))
    assert all(f["repro_verified"] and "[1][1]" in f["repro"] for f in findings)
