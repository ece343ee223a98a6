"""PyTorch's OpInfo database as a source of specs (checks/opinfo): the adapter's contract with
torch.testing._internal, specs that draw valid, replayable programs, and a planted bug found
through its OpInfo spec."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from alignbot.checks import CandidateProcess, check
from alignbot.checks.cli import main
from alignbot.checks.dsl import DrawContext
from alignbot.checks.engine import draw_programs, evaluate, trace_program
from alignbot.checks.opinfo import adapter, opinfo_specs
from alignbot.checks.opinfo.modules import catalog as module_catalog
from alignbot.checks.opinfo.specs import (
    DTYPES,
    LOW_PRECISION,
    SAMPLE_DRAWS,
    UNCOMPARED,
    catalog,
    entry_dtypes,
    random_values,
    render_not_carried,
)
from alignbot.checks.runtime.dtypes import FLOAT_DTYPES
from alignbot.checks.spec import Spec

FIXTURES = Path(__file__).parent / "fixtures"
HANDFUL = ("opinfo.add", "opinfo.softmax", "opinfo.nn.functional.relu", "opinfo.sum",
           "opinfo.view", "opinfo.cat.errors")


def specs_named(*names: str) -> list[Spec]:
    by_name = {s.name: s for s in catalog().specs}
    return [by_name[n] for n in names]


def test_the_database_is_read_whole_and_named_entries_resolve() -> None:
    data = adapter.database()
    assert data.total >= 600 and len(data.names) >= 550
    assert len(data.entries) + len(data.skipped) == data.total
    assert len(data.entries) >= 0.8 * data.total
    entries = {e.key: e for e in data.entries}
    assert (entries["add"].target, entries["add"].method) == ("torch.add", False)
    assert entries["nn.functional.relu"].target == "torch.nn.functional.relu"
    assert (entries["view"].target, entries["view"].method) == ("torch.Tensor.view", True)
    assert {"float32", "float64", "int64", "bool"} <= set(entries["add"].dtypes)
    assert entries["softmax"].autograd and entries["cat"].has_errors
    reasons = {s.reason for s in data.skipped}
    assert "a test wrapper (lambda) that computes an argument" in reasons  # linalg.pinv


@pytest.mark.slow
def test_wrappers_dunders_and_random_ops_become_specs_that_say_what_they_compare() -> None:
    data = adapter.database()
    entries = {e.key: e for e in data.entries}
    assert entries["einsum"].call is not None and entries["einsum"].call.positions == (1, 0)
    assert (entries["mT"].target, entries["__radd__"].target) == (
        "torch.Tensor.mT", "torch.Tensor.__radd__")
    # op_db's rand_like wrapper calls randn_like: not counted as rand_like
    assert "rand_like" not in entries and any(
        s.name == "rand_like" and "torch.randn_like" in s.reason for s in data.skipped)
    (cauchy, add) = specs_named("opinfo.cauchy", "opinfo.add")
    assert cauchy.rtol == cauchy.atol == UNCOMPARED and add.rtol is None
    # an error input that bernoulli takes after all draws random values like its samples
    (bernoulli_errors,) = specs_named("opinfo.bernoulli.errors")
    assert bernoulli_errors.rtol == bernoulli_errors.atol == UNCOMPARED
    assert "float16" in entries["cauchy"].dtypes and "float16" not in entry_dtypes(
        entries["cauchy"])
    for name in ("opinfo.einsum", "opinfo.mT", "opinfo.__rdiv__",
                 "opinfo.polygamma.polygamma_n_0"):
        calls: list[int] = []
        draw_programs(specs_named(name)[0], 3, 0, lambda program, ref, calls=calls: calls.append(
            sum(node["op"] != "input" for node in program["nodes"])))
        assert any(calls), name


def test_a_changed_database_fails_loudly_naming_what_changed(monkeypatch: Any) -> None:
    real = adapter.op_db()[0]

    class Stripped:  # an entry of a future PyTorch: error_inputs renamed
        def __getattr__(self, name: str) -> Any:
            if name in ("error_inputs", "error_inputs_func"):
                raise AttributeError(name)
            return getattr(real, name)

    monkeypatch.setattr(adapter, "op_db", lambda: [Stripped()])
    with pytest.raises(adapter.OpInfoChanged, match=r"has no error_inputs, error_inputs_func"):
        adapter.database.__wrapped__()


def test_samples_keep_the_shape_the_adapter_reads() -> None:
    entry = next(e for e in adapter.database().entries if e.key == "cat")
    assert adapter.samples(entry, "float32", 0, reference=False, requires_grad=True)
    assert adapter.error_samples(entry, 0)
    with pytest.raises(adapter.OpInfoChanged, match="has no input, args, kwargs"):
        adapter.check_attrs(object(), adapter.SAMPLE_ATTRS, "a sample input")


def test_the_private_module_is_imported_only_when_opinfo_specs_are_asked_for() -> None:
    code = ("import sys, alignbot.checks.cli, alignbot.checks.opinfo, alignbot.checks.engine; "
            f"print({adapter.OP_DB_MODULE!r} in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_every_entry_with_a_carried_dtype_becomes_a_spec() -> None:
    made = catalog()
    names = [s.name for s in made.specs]
    assert len(names) == len(set(names))
    assert len([n for n in names if not n.endswith(".errors")]) >= 550
    assert all(s.ops and s.ops[0].startswith("torch.") for s in made.specs)
    assert all(s.raises and not s.backward for s in made.specs if s.name.endswith(".errors"))
    assert "float8_e4m3fn: the Program format does not carry it" in render_not_carried(
        Counter({"float8_e4m3fn": 1}))
    assert render_not_carried(made.dtypes_left_out).startswith("CPU dtypes not drawn: none")
    by_name = {s.name: s for s in made.specs}
    assert by_name["opinfo.mul"].n == max(SAMPLE_DRAWS, 13 + 2)  # every carried dtype, +2


def test_every_cpu_dtype_every_entry_declares_is_drawn() -> None:
    # an entry's dtype the Program format does not carry is counted here, by name
    for made in (catalog(), module_catalog()):
        assert not made.dtypes_left_out, made.dtypes_left_out
    for entry in adapter.database().entries:
        assert set(entry_dtypes(entry)) == set(entry.dtypes) - (
            set(LOW_PRECISION) if random_values(entry) else set()), entry.key


@pytest.mark.slow
def test_eye_draws_every_float8_dtype_and_an_e5m2_only_bug_is_found_with_a_repro(
        tmp_path: Path) -> None:
    (spec,) = specs_named("opinfo.eye")
    programs: list[dict[str, Any]] = []
    draw_programs(spec, spec.n, 0, lambda program, ref: programs.append(program))
    drawn = {n["kwargs"].get("dtype", {}).get("dtype") for p in programs for n in p["nodes"]
             if n["op"] == "call"}
    assert {name for name in FLOAT_DTYPES if name.startswith("float8")} <= drawn
    prelude = (
        "import torch\n\n\ndef alignbot_wrap(target, fn):\n"
        "    def call(*args, **kwargs):  # the identity's diagonal negated, in e5m2 alone\n"
        "        out = fn(*args, **kwargs)\n"
        "        if out.dtype != torch.float8_e5m2:\n"
        "            return out\n"
        "        return out.float().neg().to(out.dtype)\n"
        "    return call if target == 'torch.eye' else fn\n")
    path = tmp_path / "report.json"
    assert main(["check", "--opinfo", "--prelude", prelude, "--ops", "opinfo.eye",
                 "--json", str(path), "--no-progress"]) == 1
    findings = json.loads(path.read_text())["findings"]
    assert len(findings) == 1 and findings[0]["op"] == "torch.eye"
    assert findings[0]["repro_verified"], findings[0]["repro_output"]
    assert "dtype=torch.float8_e5m2)" in findings[0]["repro"]


def test_ops_globs_select_opinfo_specs() -> None:
    names = {s.name for s in opinfo_specs(["relu"])}
    assert "opinfo.nn.functional.relu" in names
    assert {s.name for s in opinfo_specs(["opinfo.cat*"])} == {"opinfo.cat", "opinfo.cat.errors"}


def test_programs_hold_the_samples_as_literal_inputs_and_one_call() -> None:
    (spec,) = specs_named("opinfo.softmax")
    programs: list[dict[str, Any]] = []
    draw_programs(spec, 6, 0, lambda program, ref: programs.append(program))
    dtypes = set()
    for program in programs:
        *before, call = program["nodes"]
        inputs = [n for n in before if n["op"] == "input"]
        views = [n["target"] for n in before if n["op"] != "input"]  # a non-contiguous variant
        assert inputs and all(n["recipe"]["kind"] == "literal" for n in inputs)
        assert set(views) <= {"torch.Tensor.transpose", "torch.Tensor.__getitem__"}
        assert len(views) <= 1
        assert call["target"] == "torch.softmax"
        dtypes.add(inputs[0]["dtype"])
    # a draw may take the samples without gradients (checks/opinfo/specs.py: sample_pool)
    assert any(program["backward"] is not None for program in programs)
    assert dtypes <= {"float32", "float64", "float16", "bfloat16"}


@pytest.mark.slow
@pytest.mark.parametrize(("name", "dtype"), [("opinfo.mul", "complex32"),
                                             ("opinfo.unique", "uint16")])
def test_entries_declaring_complex32_or_uint16_draw_them_and_replay_on_torch(
        name: str, dtype: str, torch_candidate: CandidateProcess) -> None:
    (spec,) = specs_named(name)
    programs: list[dict[str, Any]] = []
    draw_programs(spec, spec.n, 0, lambda program, ref: programs.append(program))
    assert dtype in {n["dtype"] for p in programs for n in p["nodes"] if n["op"] == "input"}
    result = check([spec], torch_candidate, seed=0, n=spec.n)
    assert result.programs_run == spec.n and result.findings == []


def test_the_same_seed_draws_the_same_programs_and_choices_redraw_them() -> None:
    (spec,) = specs_named("opinfo.add")

    def draw(seed: int) -> list[dict[str, Any]]:
        programs: list[dict[str, Any]] = []
        draw_programs(spec, 5, seed, lambda program, ref: programs.append(program))
        return programs

    first = draw(3)
    assert json.dumps(first, sort_keys=True) == json.dumps(draw(3), sort_keys=True)
    assert json.dumps(first, sort_keys=True) != json.dumps(draw(4), sort_keys=True)
    for program in first:
        again, _ = trace_program(spec, DrawContext(choices=program["choices"]))
        assert again["nodes"] == program["nodes"]


@pytest.mark.slow
def test_a_handful_of_entries_align_with_torch_itself(torch_candidate: CandidateProcess) -> None:
    specs = specs_named(*HANDFUL)
    result = check(specs, torch_candidate, seed=0, n=4)
    assert result.specs_run == list(HANDFUL)
    assert result.programs_run == 4 * len(HANDFUL)
    assert result.findings == []


@pytest.mark.slow
def test_a_planted_bug_is_found_through_its_opinfo_spec(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    # one job: the specs run here, on the database this process has read already (a worker
    # process reads it again)
    code = main(["check", "--prelude", (FIXTURES / "opinfo_prelude.py").read_text(),
                 "--opinfo", "--ops", "opinfo.nn.functional.relu,opinfo.softmax", "--n", "6",
                 "--json", str(report), "--no-progress", "--jobs", "1"])
    assert code == 1
    findings = json.loads(report.read_text())["findings"]
    assert findings and {f["op"] for f in findings} == {"torch.nn.functional.relu"}
    assert all(f["spec"] == "opinfo.nn.functional.relu" for f in findings)
    assert all(f["repro_verified"] for f in findings)


@pytest.mark.slow
def test_opinfo_alone_leaves_the_library_out_unless_asked(capsys: Any) -> None:
    def specs_run(*flags: str) -> int:
        code = main(["check", "--candidate", "torch", "--opinfo", *flags, "--ops",
                     "opinfo.abs,tanh", "--n", "1", "--no-progress", "--jobs", "1"])
        assert code == 0
        out = capsys.readouterr().out
        return int(out.split("alignbot: ", 1)[1].split(" specs", 1)[0])

    assert specs_run() == 2  # opinfo.abs and opinfo.tanh
    assert specs_run("--library") > 2  # and the library's tanh specs


@pytest.mark.slow
def test_every_declared_dtype_is_drawn_by_its_oneof_choice() -> None:
    (spec,) = specs_named("opinfo.mul")
    entry = next(e for e in adapter.database().entries if e.key == "mul")
    carried = [d for d in DTYPES if d in entry.dtypes]
    assert {"float16", "bfloat16", "complex64", "complex128", "uint8", "int8"} <= set(carried)
    for index, dtype in enumerate(carried):  # choices: the program's seed, then the dtype
        program, ref = trace_program(spec, DrawContext(choices=[0, index]))
        inputs = [n for n in program["nodes"] if n["op"] == "input"]
        assert inputs and inputs[0]["dtype"] == dtype
        grads = [k for k in ref if k.startswith("grad:")]
        assert bool(grads) == (dtype in entry.grad_dtypes), dtype
        assert all(ref[k]["t"] == "tensor" for k in grads)


@pytest.mark.slow
def test_every_dtype_of_a_few_entries_aligns_with_torch_itself(
        torch_candidate: CandidateProcess) -> None:
    found: list[Any] = []
    drawn: set[tuple[str, str]] = set()
    for name in ("opinfo.add", "opinfo.softmax", "opinfo.matmul", "opinfo.sum", "opinfo.mT"):
        (spec,) = specs_named(name)
        entry = next(e for e in adapter.database().entries if f"opinfo.{e.key}" == name)
        for index, dtype in enumerate(entry_dtypes(entry)):
            program, ref = trace_program(spec, DrawContext(choices=[0, index]))
            assert program["nodes"][0]["dtype"] == dtype
            drawn.add((name, dtype))
            found += evaluate(spec, program, ref, torch_candidate)
    assert found == []
    assert {("opinfo.matmul", "complex64"), ("opinfo.softmax", "bfloat16"),
            ("opinfo.add", "uint8"), ("opinfo.sum", "float16")} <= drawn
