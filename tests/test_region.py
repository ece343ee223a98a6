"""A program's forward as one region: fusion-only bugs are found, and what a region cannot
hold runs call by call and says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from alignbot.checks.cli import main
from alignbot.checks.engine import check, draw_programs
from alignbot.checks.runtime.region import replay_program
from alignbot.checks.runtime.replay import Hooks
from alignbot.checks.spec import Spec
from alignbot.checks.spec_loading import load_file

FIXTURES = Path(__file__).parent / "fixtures"


def _fusion_specs() -> list[Spec]:
    return load_file(FIXTURES / "fusion_specs.py")


@pytest.mark.slow
def test_a_bug_only_across_calls_of_one_region_is_found_at_the_right_op(
        make_candidate: Any) -> None:
    prelude = (FIXTURES / "fusion_prelude.py").read_text()
    candidate = make_candidate(prelude)
    findings = check(_fusion_specs(), candidate, seed=0).findings
    assert {(f.kind.value, f.op) for f in findings} == {("value-mismatch", "torch.add")}
    # the same wrapper without the region: every call is right
    alone = make_candidate(prelude.replace("def alignbot_program", "def unused_program"))
    assert check(_fusion_specs(), alone, seed=0).findings == []


@pytest.mark.slow
def test_a_fusion_bug_minimizes_to_a_verified_repro_that_keeps_both_calls(
        tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    code = main(["check", "--prelude", (FIXTURES / "fusion_prelude.py").read_text(),
                 "--spec-file", str(FIXTURES / "fusion_specs.py"), "--jobs", "1",
                 "--json", str(path), "--no-progress"])
    assert code == 1
    [finding] = json.loads(path.read_text())["findings"]
    assert finding["op"] == "torch.add" and finding["repro_verified"], finding["repro_output"]
    # alone, add is right: the repro runs mul and add as one program, as the worker did
    assert "torch.mul" in finding["repro"] and "program=alignbot_program" in finding["repro"]


def _first_program(spec: Spec) -> Any:
    drawn: list[Any] = []
    draw_programs(spec, 1, 0, lambda program, ref: drawn.append(program))
    return drawn[0]


def test_an_in_place_program_runs_call_by_call_and_says_why() -> None:
    import torch

    def spec(torch: Any) -> Any:
        y = torch.ones(3) * 2
        y.add_(torch.ones(3))
        return y

    program = _first_program(Spec(name="inplace", fn=spec, n=1))
    regions: list[Any] = []
    obs = replay_program(torch, program, Hooks(program=lambda f: regions.append(f) or f))
    assert obs["program"] == {"t": "program", "mode": "eager", "reason": "an in-place call"}
    assert regions == []
    mutated = [obs[k]["data"].tolist() for k in obs if k.endswith("!self")]
    assert mutated == [[3.0, 3.0, 3.0]]  # observed right after the in-place call


def test_a_region_gives_the_call_by_call_observations_and_gradients() -> None:
    import torch

    from alignbot.checks.program import reference_observations

    program = _first_program(_fusion_specs()[0])
    regions: list[Any] = []
    obs = replay_program(torch, program, Hooks(program=lambda f: regions.append(f) or f))
    ref = reference_observations(program)
    # the region as drawn, then once more with probes for the intermediates' gradients
    assert len(regions) == 2 and obs.pop("program")["mode"] == "region"
    grads = [k for k in ref if k.startswith("grad:")]
    assert len(grads) >= 4  # the inputs' and the intermediates' (through their probes)
    for key, want in ref.items():
        if want.get("t") == "tensor":
            assert (obs[key]["data"] == want["data"]).all(), key


def test_a_region_that_raises_runs_call_by_call_and_names_the_error() -> None:
    import torch

    from alignbot.checks.program import reference_observations

    def refuse(forward: Any) -> Any:
        def run(tensors: Any) -> Any:
            raise NotImplementedError("no kernel for this fusion")
        return run

    program = _first_program(_fusion_specs()[0])
    obs = replay_program(torch, program, Hooks(program=refuse))
    note = obs.pop("program")
    assert note["mode"] == "eager"
    assert note["reason"] == "the region raised NotImplementedError: no kernel for this fusion"
    ref = reference_observations(program)
    assert all((obs[k]["data"] == v["data"]).all() for k, v in ref.items() if "data" in v)


@pytest.mark.slow
def test_a_compiler_that_compiles_nothing_is_a_finding_not_a_pass(tmp_path: Path) -> None:
    """Each region raises and the calls, run one by one, agree: the compiler's failure is a
    finding of its own, counted in the report, its Markdown and the check run, with a repro
    that shows it; the exit status is 1."""
    from alignbot.bot.engine_report import parse_report
    from alignbot.bot.output import CheckContext, check_output

    path, markdown = tmp_path / "report.json", tmp_path / "report.md"
    code = main(["check", "--prelude", (FIXTURES / "never_compiles_prelude.py").read_text(),
                 "--spec-file", str(FIXTURES / "fusion_specs.py"), "--jobs", "1",
                 "--json", str(path), "--markdown", str(markdown), "--no-progress"])
    assert code == 1
    report = json.loads(path.read_text())
    [finding] = report["findings"]
    assert (finding["kind"], finding["op"]) == ("region-error", "alignbot_program")
    assert finding["count"] == report["programs_run"] == 4
    assert finding["signature"] == "BackendCompilerFailed: backend '#' failed: no lowering " \
        "for aten.mul"
    assert "torch.mul, torch.add" in finding["message"]
    assert finding["verdict"] == "candidate-bug" and finding["repro_verified"], \
        finding["repro_output"]
    [cause] = report["causes"]
    assert cause["form"] == "region" and "aten.mul" in cause["summary"]
    assert "region-error at `alignbot_program`" in markdown.read_text()
    output = check_output(CheckContext("a" * 40, "never", report=parse_report(report)))
    assert output.title.startswith("1 finding in 1 cause") and output.conclusion == "failure"


def test_a_region_that_fails_where_a_call_raises_too_is_that_calls_finding() -> None:
    import torch

    def spec(torch: Any) -> Any:
        return torch.exp(torch.ones(3) * 2)

    program = _first_program(Spec(name="exp", fn=spec, n=1))

    def failing(forward: Any) -> Any:
        def compiled(tensors: Any) -> Any:
            raise RuntimeError("cannot compile")
        return compiled

    region_fails = replay_program(torch, program, Hooks(program=failing))
    assert region_fails["program"]["error"]["type"] == "RuntimeError"
    exp_raises = Hooks(program=failing, overrides={"torch.exp": _raise})
    note = replay_program(torch, program, exp_raises)["program"]
    assert note["mode"] == "eager" and "error" not in note


def _raise(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("exp is broken")


def test_gradients_a_later_backward_changes_run_call_by_call_and_match_the_reference() -> None:
    """The leaves' ``.grad`` is observed after each backward the program runs: a region
    could only show them after its last call, so a program with two backwards runs call by
    call and gives the reference's gradients after each."""
    import torch

    from alignbot.checks import random_tensor
    from alignbot.checks.program import reference_observations

    def spec(torch: Any) -> Any:
        x = random_tensor(shape=(3,))
        (x * 2).sum().backward()
        (x * 3).sum().backward()
        return x * 1

    program = _first_program(Spec(name="two_backwards", fn=spec, n=1))
    obs = replay_program(torch, program, Hooks(program=lambda f: f))
    assert obs.pop("program") == {"t": "program", "mode": "eager",
                                  "reason": "gradients that a later call of the program changes"}
    ref = reference_observations(program)
    grads = [k for k in ref if "!grad." in k]
    assert len(grads) == 2
    for key in grads:
        assert (obs[key]["data"] == ref[key]["data"]).all(), key
