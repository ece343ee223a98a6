"""The engine finds each planted bug with the right kind and op, and nothing else."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest

from alignbot.checks.engine import Merger, check, draw_programs, trace_program
from alignbot.checks.findings import Finding, Kind

EXPECTED = {
    "softplus_scaled": (Kind.VALUE, "torch.nn.functional.softplus"),
    "leaky_relu_kwarg": (Kind.VALUE, "torch.nn.functional.leaky_relu"),
    "tanh_backward": (Kind.GRAD, "torch.tanh"),
    "sum_dtype": (Kind.DTYPE, "torch.sum"),
    "mean_keepdim": (Kind.SHAPE, "torch.Tensor.mean"),
    "add_inplace": (Kind.STATE, "torch.Tensor.add_"),
    "conv1d_kernel_too_large": (Kind.REFERENCE_ERROR, "torch.nn.functional.conv1d"),
    "silu_missing": (Kind.MISSING_API, "torch.nn.functional.silu"),
    "elu_crash": (Kind.CANDIDATE_CRASH, "torch.nn.functional.elu"),
    "selu_hang": (Kind.CANDIDATE_TIMEOUT, "torch.nn.functional.selu"),
    "hardtanh_backward_raises": (Kind.CANDIDATE_ERROR, "torch.nn.functional.hardtanh"),
}
UNTOUCHED = ("matmul_clean", "batchnorm_clean", "conv2d_clean")


@pytest.fixture(scope="module")
def planted_run(planted_specs: dict[str, Any], planted_prelude: str) -> Any:
    from alignbot.checks import CandidateConfig, CandidateProcess

    config = CandidateConfig(name="planted", prelude=planted_prelude, timeout=3.0)
    with CandidateProcess(config) as candidate:
        result = check(list(planted_specs.values()), candidate, seed=7)
        starts = candidate.starts
    return result, starts


@pytest.mark.slow
def test_each_planted_bug_is_found_with_kind_and_op(planted_run: Any) -> None:
    result, _ = planted_run
    found = {f.spec.rsplit(".", 1)[-1]: (f.kind, f.op) for f in result.findings}
    for spec, expected in EXPECTED.items():
        assert found.get(spec) == expected, f"{spec}: {found.get(spec)} != {expected}"


def test_untouched_ops_stay_silent(planted_run: Any) -> None:
    result, _ = planted_run
    noisy = [f for f in result.findings if f.spec.rsplit(".", 1)[-1] in UNTOUCHED]
    assert noisy == []
    assert len(result.findings) == len(EXPECTED)


def test_crash_and_hang_restart_the_worker_and_the_run_goes_on(planted_run: Any) -> None:
    result, starts = planted_run
    crash = next(f for f in result.findings if f.kind is Kind.CANDIDATE_CRASH)
    hang = next(f for f in result.findings if f.kind is Kind.CANDIDATE_TIMEOUT)
    assert "SIGABRT" in crash.message
    assert "3 s" in hang.message
    # one start, plus one per crashed or hung program
    assert starts == 1 + crash.count + hang.count
    assert len(result.specs_run) == len(EXPECTED) + len(UNTOUCHED)


def test_findings_with_one_fingerprint_are_merged_with_a_count(planted_run: Any) -> None:
    result, _ = planted_run
    prints = [f.fingerprint for f in result.findings]
    assert len(prints) == len(set(prints))
    softplus = next(f for f in result.findings if f.op.endswith("softplus"))
    assert softplus.count == 6  # every draw of the spec hits the bug


def test_grad_mismatch_message_names_the_gradient(planted_run: Any) -> None:
    result, _ = planted_run
    grad = next(f for f in result.findings if f.kind is Kind.GRAD)
    assert grad.key.startswith("grad:")
    assert "greatest absolute difference" in grad.message


def test_a_backward_that_raises_is_named_by_its_call(planted_run: Any) -> None:
    result, _ = planted_run
    finding = next(f for f in result.findings if f.spec.endswith(".hardtanh_backward_raises"))
    hardtanh = next(n for n in finding.program["nodes"]
                    if n.get("target") == "torch.nn.functional.hardtanh")
    assert finding.key == "backward" and finding.node == hardtanh["id"]
    assert finding.node != finding.program["nodes"][-1]["id"]  # the call after it ran first
    assert finding.message.startswith("the backward of torch.nn.functional.hardtanh (")
    assert "RuntimeError: planted: hardtanh has no backward on the candidate" in finding.message
    assert finding.count == 4


def test_a_wrong_gradient_is_still_blamed_on_the_call_that_computed_it(planted_run: Any
                                                                       ) -> None:
    result, _ = planted_run
    finding = next(f for f in result.findings if f.spec.endswith(".tanh_backward"))
    nodes = finding.program["nodes"]
    assert finding.node == next(n["id"] for n in nodes if n.get("target") == "torch.tanh")
    assert finding.key == f"grad:{nodes[0]['id']}"


@pytest.mark.slow
def test_a_crash_in_a_backward_names_the_call(make_candidate: Any) -> None:
    from alignbot.checks.spec import Spec

    def spec_fn(torch: Any) -> Any:
        from alignbot.checks import random_tensor

        return torch.exp(torch.tanh(random_tensor(ndim=1))) * 2

    prelude = ("import os, torch\n"
               "class Tanh(torch.autograd.Function):\n"
               "    forward = staticmethod(lambda ctx, x: x.detach().tanh())\n"
               "    backward = staticmethod(lambda ctx, g: os.abort())\n"
               "torch.tanh = Tanh.apply\n")
    result = check([Spec(name="t.crash", fn=spec_fn, n=2)], make_candidate(prelude), seed=1)
    (finding,) = result.findings
    tanh = next(n["id"] for n in finding.program["nodes"] if n.get("target") == "torch.tanh")
    assert (finding.kind, finding.op, finding.node, finding.key) == (
        Kind.CANDIDATE_CRASH, "torch.tanh", tanh, "backward")
    assert finding.message.startswith(f"in the backward of torch.tanh ({tanh}): ")


def test_reference_exception_is_aligned_not_skipped(planted_specs: dict[str, Any],
                                                    torch_candidate: Any) -> None:
    # The reference rejects the too-large kernel and so does an honest candidate: no finding,
    # but the program is compared (not skipped) and records the raising call.
    spec = planted_specs["conv1d_kernel_too_large"]
    result = check([spec], torch_candidate, seed=3)
    assert result.findings == []
    assert result.programs_run == spec.n
    programs: list[Any] = []
    draw_programs(spec, 2, 3, lambda program, ref: programs.append((program, ref)))
    program, ref = programs[0]
    assert program["nodes"][-1]["raises"] is True
    assert ref[program["nodes"][-1]["id"]]["t"] == "error"


def test_self_check_on_planted_specs_is_clean(planted_specs: dict[str, Any],
                                              torch_candidate: Any) -> None:
    specs = [s for name, s in planted_specs.items() if name not in ("selu_hang",)]
    result = check(specs, torch_candidate, seed=11)
    assert result.findings == []
    assert result.programs_run >= 40


@pytest.mark.slow
def test_non_default_tolerance_changes_the_outcome(make_candidate: Any) -> None:
    from alignbot.checks.spec import Spec

    def spec_fn(torch: Any) -> Any:
        from alignbot.checks import random_tensor

        return torch.exp(random_tensor(ndim=1, low=0.5, high=1.0))

    prelude = ("import torch\n_exp = torch.exp\n"
               "torch.exp = lambda x: _exp(x) * (1 + 1e-4)\n")
    candidate = make_candidate(prelude)
    strict = Spec(name="tol.strict", fn=spec_fn, n=3)
    loose = Spec(name="tol.loose", fn=spec_fn, n=3, rtol=1e-3, atol=1e-5)
    assert [f.kind for f in check([strict], candidate, seed=1).findings] == [Kind.VALUE]
    assert check([loose], candidate, seed=1).findings == []


def test_trace_records_module_weights_for_the_candidate(planted_specs: dict[str, Any]) -> None:
    programs: list[Any] = []
    draw_programs(planted_specs["conv2d_clean"], 1, 5, lambda p, r: programs.append(p))
    module = next(n for n in programs[0]["nodes"] if n["op"] == "module")
    assert set(module["state"]) == {"weight", "bias"}


def test_a_spec_bug_is_a_spec_error_not_a_finding() -> None:
    from alignbot.checks.spec import Spec
    from alignbot.checks.trace import SpecError

    def broken(torch: Any) -> Any:
        from alignbot.checks import random_tensor

        x = random_tensor(ndim=1)
        return x.relu() + undefined_name  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(SpecError, match="NameError"):
        draw_programs(Spec(name="t.broken", fn=broken, n=2), 2, 0, lambda p, r: None)


def test_program_is_json_serialisable_and_replayable(planted_specs: dict[str, Any]) -> None:
    import json

    from alignbot.checks.dsl import DrawContext

    programs: list[Any] = []
    spec = planted_specs["batchnorm_clean"]
    draw_programs(spec, 3, 2, lambda p, r: programs.append((p, r)))
    for program, _ in programs:
        again, _ = trace_program(spec, DrawContext(choices=program["choices"]))
        assert json.dumps(again, sort_keys=True) == json.dumps(program, sort_keys=True)


@pytest.mark.slow
def test_ctrl_c_keeps_what_was_judged(planted_specs: dict[str, Any], planted_prelude: str,
                                      make_candidate: Any) -> None:
    from alignbot.checks.engine import Interrupted

    candidate = make_candidate(planted_prelude)
    specs = [planted_specs["softplus_scaled"], planted_specs["tanh_backward"]]
    seen: list[tuple[int, int]] = []

    def on_program(judged: int, findings: int) -> None:
        seen.append((judged, findings))
        if judged == 8:  # two programs into tanh_backward, one more in flight
            raise KeyboardInterrupt

    with pytest.raises(Interrupted) as caught:
        check(specs, candidate, seed=7, on_program=on_program)
    result = caught.value.result
    assert result.complete is False and result.programs_run == 8
    assert [judged for judged, _ in seen] == list(range(1, 9))
    assert {f.op for f in result.findings} == {"torch.nn.functional.softplus", "torch.tanh"}
    assert not candidate.pending
    again = check(specs[:1], candidate, seed=7)  # the worker starts again
    assert again.complete is True and again.programs_run == 6


@pytest.fixture(scope="module")
def two_bugs_runs() -> Any:
    """The softplus with two bugs, checked twice with one seed."""
    from pathlib import Path

    from alignbot.checks import CandidateConfig, CandidateProcess
    from alignbot.checks.spec_loading import load_file

    fixtures = Path(__file__).parent / "fixtures"
    specs = load_file(fixtures / "two_bugs_specs.py")
    config = CandidateConfig(name="two", prelude=(fixtures / "two_bugs_prelude.py").read_text())
    with CandidateProcess(config) as candidate:
        return [check(specs, candidate, seed=1) for _ in range(2)]


@pytest.mark.slow
def test_two_bugs_in_one_op_are_two_findings(two_bugs_runs: Any) -> None:
    result = two_bugs_runs[0]
    by_keywords = {f.signature.split("kw=", 1)[1]: f for f in result.findings}
    assert {f.kind for f in result.findings} == {Kind.VALUE}
    assert {f.op for f in result.findings} == {"torch.nn.functional.softplus"}
    beta, threshold = by_keywords["[beta]"], by_keywords["[threshold]"]
    assert beta.fingerprint != threshold.fingerprint
    for finding, keyword in ((beta, "beta"), (threshold, "threshold")):
        call = next(n for n in finding.program["nodes"] if n["id"] == finding.node)
        assert list(call["kwargs"]) == [keyword]
    assert len({f.fingerprint for f in result.findings}) == len(result.findings)


def test_one_bug_over_many_draws_is_one_finding_with_its_distinct_messages(
        two_bugs_runs: Any) -> None:
    for finding in two_bugs_runs[0].findings:
        assert finding.count > 1
        assert 1 < len(finding.examples) <= 5
        assert len(set(finding.examples)) == len(finding.examples)
        assert finding.to_json()["examples"] == finding.examples


def test_fingerprints_are_stable_across_runs_of_one_seed(two_bugs_runs: Any,
                                                         planted_run: Any) -> None:
    first, second = ([(f.fingerprint, f.signature, f.count) for f in r.findings]
                     for r in two_bugs_runs)
    assert first == second and len(first) == 3
    planted, _ = planted_run
    assert all(f.signature for f in planted.findings)
    assert len({f.fingerprint for f in planted.findings}) == len(planted.findings)


def _draw(rng: random.Random, spec: str) -> Finding:
    """One draw's finding of one bug: a random size, message and downstream mark."""
    program = {"nodes": [{"op": "input", "shape": [rng.randint(1, 4)]}]}
    extra = {"downstream_of": "0123456789ab"} if rng.random() < 0.7 else {}
    return Finding(Kind.VALUE, "torch.tanh", spec, f"off by {rng.randint(1, 9)}", program,
                   key="output", signature="sig", extra=extra)


@pytest.mark.parametrize("seed", range(20))
def test_merging_each_spec_apart_then_in_spec_order_is_one_merge(seed: int) -> None:
    rng = random.Random(seed)
    per_spec = [[_draw(rng, f"s{i}") for _ in range(rng.randint(1, 6))] for i in range(3)]
    one = Merger()
    for finding in copy.deepcopy([f for found in per_spec for f in found]):
        one.add(finding)
    apart = []
    for found in copy.deepcopy(per_spec):
        merger = Merger()
        for finding in found:
            merger.add(finding)
        apart.append(merger.findings())
    again = Merger()
    for found in apart:
        for finding in found:
            again.add(finding)
    assert [f.to_json() for f in again.collected()] == [f.to_json() for f in one.collected()]
    assert one.collected()[0].count == sum(len(found) for found in per_spec)


def test_a_spec_s_misuse_of_the_dsl_names_the_spec_s_line(tmp_path: Path) -> None:
    """Not checks/dsl.py's: the user fixes their spec, not the engine."""
    from alignbot.checks.dsl import DrawContext
    from alignbot.checks.spec_loading import load_file
    from alignbot.checks.trace import SpecError

    path = tmp_path / "my_specs.py"
    path.write_text("from typing import Any\n\n"
                    "from alignbot.checks import autotest, random, random_tensor\n"
                    "\n\n@autotest(n=1)\ndef empty(torch: Any) -> Any:\n"
                    "    x = random_tensor(ndim=1)\n"
                    "    return x * int(random(3, 3))\n")
    (spec,) = load_file(path)
    with pytest.raises(SpecError) as raised:
        trace_program(spec, DrawContext(choices=[]))
    assert str(raised.value).endswith(f"integer range is empty (high is excluded) ({path}:9)")


def test_a_built_in_spec_s_own_line_is_named_too() -> None:
    """The library's specs are specs: their line, not the DSL's, wherever alignbot is
    installed."""
    import alignbot.checks.library.activations as library
    from alignbot.checks.dsl import random
    from alignbot.checks.engine import spec_frame

    try:
        exec(compile("int(random(3, 3))", library.__file__, "exec"), {"random": random})
    except Exception as exc:
        frame = spec_frame(exc)
    assert (frame.filename, frame.lineno) == (library.__file__, 1)
