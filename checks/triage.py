"""Who is wrong? Extra oracles and a Dynamo-style accuracy rule decide a finding's verdict.

The numeric rule follows torch._dynamo's accuracy check: compute the program in float64 on
the reference, measure each side's RMSE against it, and call a side wrong only when it is
further from float64 than the other side by more than a multiplier (plus a floor of a few
rounding steps of the dtype). The reference's float64 run is not independent of its own
formula: where a documented formula (checks/formulas) implements the call, that is what
values are measured against, and finite differences (of the formula where there is one)
judge gradients. Exceptions are judged by which sides raise and by what the spec declares;
other oracles (the reference without mkldnn, on another device, third frameworks)
corroborate or contradict, and two third frameworks outvote the reference's float64 run.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import math
import sys
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from .candidate import CandidateConfig, CandidateProcess
from .compare import compare, tolerance
from .findings import Finding, Kind
from .formulas import formula_observations
from .formulas.gradients import formula_gradients
from .oracle import (
    FD_ATOL,
    FD_EPS,
    FD_RTOL,
    finite_differences,
    numpy_observations,
    reference_observations,
)
from .program import Observations, Program, is_call
from .report_types import Evidence, Side
from .runtime.dtypes import TABLE, WIDE
from .runtime.replay import Hooks, replay
from .runtime.replay import seed as seed_reference
from .vocab import Verdict

MULTIPLIER = 2.0
# Gradients against finite differences: torch.autograd.gradcheck's tolerances (FD_RTOL,
# FD_ATOL), widened to the dtype's own tolerance for low-precision gradients.
# float64 results: rounding noise when the sides are within NOISE_RELATIVE of each other (RMSE
# over the result's RMS magnitude; two sides within NOISE_ULPS rounding steps of an independent
# value always are); otherwise NumPy, when it implements the op, is the truth for the rule.
NOISE_ULPS = 16
NOISE_RELATIVE = 1e-12
# Oracles the rules measure against (the truth), rather than count as votes for a side.
INDEPENDENT = ("reference-float64", "candidate-float64", "finite-differences", "numpy",
               "formula", "formula-finite-differences")
# The documented formula (checks/formulas) over the reference's own float64 run; for
# gradients, finite differences of the formula over those of the reference's forward.
FORMULA, FORMULA_GRAD = "formula", "formula-finite-differences"
THIRD = "third:"
EPS = {row.name: row.eps for row in TABLE if row.eps is not None}  # the rule's rounding step


@dataclass
class Triage:
    verdict: Verdict
    reason: str
    evidence: Evidence


def to_float64(program: Program) -> Program:
    """The same program computed in float64 (complex128 for complex): floating and complex
    inputs, dtype arguments and modules."""
    out = copy.deepcopy(program)
    nodes = []
    for node in out["nodes"]:
        if node["op"] == "input" and node["dtype"] in WIDE:
            node["dtype"] = WIDE[node["dtype"]]
        if is_call(node):
            node["args"] = _widen(node["args"])
            node["kwargs"] = _widen(node["kwargs"])
        nodes.append(node)
        if node["op"] == "module":
            nodes.append({"id": node["id"] + "_f64", "op": "method", "name": "double",
                          "target": node["target"] + ".double",
                          "args": [{"ref": node["id"]}], "kwargs": {}})
    out["nodes"] = nodes
    return out


def _widen(value: Any) -> Any:
    if isinstance(value, list):
        return [_widen(v) for v in value]
    if isinstance(value, dict):
        name = value.get("dtype")
        if isinstance(name, str) and name in WIDE and len(value) == 1:
            return {"dtype": WIDE[name]}
        return {k: _widen(v) for k, v in value.items()}
    return value


def widened(data: Any) -> np.ndarray:
    """An observed array in float64, or complex128 when it is complex (keeping both parts)."""
    arr = np.asarray(data)
    return arr.astype(np.complex128 if arr.dtype.kind == "c" else np.float64)


def rmse(expected: np.ndarray, actual: np.ndarray) -> float:
    exp, act = widened(expected), widened(actual)
    if exp.shape != act.shape:
        return math.inf
    if exp.size == 0:
        return 0.0
    same = (np.isnan(exp) & np.isnan(act)) | (exp == act)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(same, 0.0, exp - act)
    if not np.isfinite(diff).all():
        return math.inf
    return float(np.sqrt(np.mean(np.abs(diff) ** 2)))


def oracle_observations(program: Program, candidate: CandidateProcess,
                        thirds: list[CandidateProcess]) -> dict[str, Observations]:
    """Every extra oracle that can run here; a failing oracle is left out, not fatal."""
    import torch

    results: dict[str, Observations] = {}
    wide = to_float64(program)
    # An oracle that cannot run (an op without float64 support, no mkldnn) gives no evidence.
    with contextlib.suppress(Exception):
        results["reference-float64"] = reference_observations(wide)
    if "reference-float64" in results:
        results["numpy"] = numpy_observations(program, results["reference-float64"])
        with contextlib.suppress(Exception):
            results[FORMULA] = formula_observations(wide, results["reference-float64"])
    if program.get("backward"):
        with contextlib.suppress(Exception):
            results["finite-differences"] = finite_differences(wide)
        if "reference-float64" in results:
            with contextlib.suppress(Exception):
                results[FORMULA_GRAD] = formula_gradients(wide, results["reference-float64"])
    with contextlib.suppress(Exception), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the flags context warns about oneDNN TF32 on CPU
        with torch.backends.mkldnn.flags(enabled=False):
            results["reference-no-mkldnn"] = reference_observations(program)
    if torch.cuda.is_available():
        with contextlib.suppress(Exception):
            seed_reference(torch, int(program.get("seed", 0)))
            results["reference-cuda"] = replay(torch, program, Hooks(device="cuda"))
    outcome = candidate.run(wide)
    if outcome.observations is not None:
        results["candidate-float64"] = outcome.observations
    names = third_names([third.config for third in thirds])
    for third, name in zip(thirds, names, strict=True):
        outcome = third.run(program)
        if outcome.observations is not None:
            results[THIRD + name] = outcome.observations
    return results


def third_names(thirds: list[CandidateConfig]) -> list[str]:
    """What each third framework's vote is recorded as: the first package its prelude
    imports that is neither torch nor the standard library (``third:paddle``), else its
    process's name; a name taken twice gets its position."""
    names = [_framework(third.prelude) or third.name for third in thirds]
    return [name if names.count(name) == 1 else f"{name}-{i}" for i, name in enumerate(names)]


def _framework(prelude: str) -> str | None:
    try:
        tree = ast.parse(prelude)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
        for module in modules:
            top = module.split(".")[0]
            if top not in ("torch", "numpy") and top not in sys.stdlib_module_names:
                return top
    return None


NONE: dict[str, Any] = {"t": "value", "value": None}
# What each oracle the rules measure against is called in a reason.
LABELS = {"reference-float64": "the float64 result", FORMULA: "the documented formula",
          "numpy": "NumPy's float64 result",
          "finite-differences": "finite differences in float64",
          FORMULA_GRAD: "finite differences of the documented formula"}


def _agrees(side: dict[str, Any], oracle: dict[str, Any], rtol: float | None,
            atol: float | None) -> bool:
    """Whether a side's value matches an oracle's within the side's tolerance; an oracle
    computed in float64 is held to the side's dtype."""
    if _is_tensor(side) and _is_tensor(oracle) and side["dtype"] != oracle["dtype"] \
            and side["dtype"] in EPS and oracle["dtype"] in EPS:
        oracle = {**oracle, "dtype": side["dtype"]}
    return compare(side, oracle, rtol, atol) is None


def _sides(obs: dict[str, Any] | None, ref: dict[str, Any], cand: dict[str, Any],
           rtol: float | None, atol: float | None) -> Side:
    if obs is None:
        return "no result"
    return _side(_agrees(ref, obs, rtol, atol), _agrees(cand, obs, rtol, atol))


def _side(with_ref: bool, with_cand: bool) -> Side:
    if with_ref and not with_cand:
        return "reference"
    if with_cand and not with_ref:
        return "candidate"
    return "both" if with_ref else "neither"


def votes(oracles: dict[str, Observations], key: str, ref: dict[str, Any] | None,
          cand: dict[str, Any] | None, rtol: float | None = None,
          atol: float | None = None) -> dict[str, Side]:
    """Whom each oracle's value agrees with: every corroborating oracle (``no result``
    where it saw nothing), and each oracle measured against where it has a value."""
    return {name: _sides(obs.get(key), ref or NONE, cand or NONE, rtol, atol)
            for name, obs in oracles.items() if name not in INDEPENDENT or key in obs}


def triage(program: Program, finding: Finding, ref: Observations, cand: Observations,
           oracles: dict[str, Observations], rtol: float | None = None,
           atol: float | None = None) -> Triage:
    """The verdict, and in its evidence what every oracle said (``oracles``), what the
    numbers were measured against (``measured_against``) and which oracles decided
    (``decided_by``)."""
    key = finding.key
    ref_obs, cand_obs = ref.get(key), cand.get(key)
    sides = votes(oracles, key, ref_obs, cand_obs, rtol, atol)
    corroborating = {name: side for name, side in sides.items() if name not in INDEPENDENT}
    evidence: Evidence = {"oracles": sides, "decided_by": []}
    if finding.kind in (Kind.MISSING_API, Kind.CANDIDATE_CRASH, Kind.CANDIDATE_TIMEOUT,
                        Kind.REGION_ERROR):
        return Triage(Verdict.CANDIDATE_BUG, f"the candidate {_what(finding.kind)}", evidence)
    if finding.kind in (Kind.REFERENCE_ERROR, Kind.CANDIDATE_ERROR):
        return _exceptions(program, finding, oracles, evidence)
    wide = oracles.get("reference-float64", {}).get(key)
    if finding.kind is Kind.GRAD and _is_tensor(ref_obs) and _is_tensor(cand_obs):
        assert ref_obs is not None and cand_obs is not None
        decided = _gradients(ref_obs, cand_obs, oracles, key, wide, corroborating, evidence)
        if decided is not None:
            return decided
    truth, measured = _value_truth(oracles, key, sides, wide)
    if truth is None and measured == FORMULA:
        evidence["decided_by"] = [FORMULA]
        return Triage(Verdict.UNDETERMINED, "the documented formula agrees with neither side "
                      "nor with the reference's float64 run", evidence)
    if _is_tensor(ref_obs) and _is_tensor(cand_obs) and ref_obs is not None \
            and cand_obs is not None and ref_obs["dtype"] in ("float64", "complex128") \
            and cand_obs["dtype"] == ref_obs["dtype"] and finding.kind is not Kind.SHAPE:
        exact = oracles.get("numpy", {}).get(key) if measured == "reference-float64" \
            else truth
        noise = _float64_noise(ref_obs, cand_obs, exact if _is_tensor(exact) else None,
                               evidence)
        if noise is not None:
            return noise
        if _is_tensor(exact):  # in float64 the reference's own float64 run is no witness
            truth, measured = exact, measured if measured != "reference-float64" else "numpy"
    if not (_is_tensor(ref_obs) and _is_tensor(cand_obs) and _is_tensor(truth)) \
            or finding.kind in (Kind.SHAPE, Kind.DTYPE):
        return _by_votes(corroborating, evidence, "no float64 value to measure against")
    assert ref_obs is not None and cand_obs is not None and truth is not None
    evidence["measured_against"] = measured
    return _numeric(ref_obs, cand_obs, truth, measured, corroborating, evidence, atol)


def _value_truth(oracles: dict[str, Observations], key: str, sides: dict[str, Side],
                 wide: dict[str, Any] | None) -> tuple[dict[str, Any] | None, str]:
    """What a value is measured against, and its oracle's name: the documented formula
    where one implements the call, else the reference's float64 run. A formula that
    disagrees with the float64 run and with both sides decides nothing: (None, formula)."""
    formula = oracles.get(FORMULA, {}).get(key)
    if not _is_tensor(formula):
        return wide, "reference-float64"
    assert formula is not None
    if sides.get(FORMULA) == "neither" and not (
            _is_tensor(wide) and wide is not None and compare(wide, formula) is None):
        return None, FORMULA
    return formula, FORMULA


def _what(kind: Kind) -> str:
    return {Kind.MISSING_API: "lacks the API", Kind.CANDIDATE_CRASH: "crashed",
            Kind.CANDIDATE_TIMEOUT: "hung",
            Kind.REGION_ERROR: "failed to run the program as one region (alignbot_program)"
            }[kind]


def _is_tensor(obs: dict[str, Any] | None) -> bool:
    return obs is not None and obs.get("t") == "tensor"


def _thirds(corroborating: dict[str, Side], side: Side) -> list[str]:
    return [name for name, said in corroborating.items()
            if name.startswith(THIRD) and said == side]


def _numeric(ref: dict[str, Any], cand: dict[str, Any], truth: dict[str, Any],
             measured: str, corroborating: dict[str, Side], evidence: Evidence,
             atol: float | None) -> Triage:
    """The Dynamo-style rule against ``truth``; third frameworks' votes then count: one
    that contradicts the rule leaves the verdict undetermined, and two or more that side
    with the candidate outvote the reference's own float64 run."""
    dtype = ref["dtype"]
    if dtype not in EPS:
        return _exact(ref, cand, truth, measured, corroborating, evidence)
    data = truth["data"]
    ref_err, cand_err = rmse(data, ref["data"]), rmse(data, cand["data"])
    finite = data[np.isfinite(data)] if data.size else data
    scale = _rms(finite)
    floor = tolerance(dtype, None, atol)[1] / 10 + 4 * EPS[dtype] * scale
    evidence.update({"reference_rmse_vs_float64": ref_err,
                     "candidate_rmse_vs_float64": cand_err, "multiplier": MULTIPLIER,
                     "floor": floor})
    cand_ok = cand_err <= MULTIPLIER * ref_err + floor
    ref_ok = ref_err <= MULTIPLIER * cand_err + floor
    label = LABELS.get(measured, measured)
    if cand_ok and ref_ok:
        evidence["decided_by"] = [measured]
        return Triage(Verdict.TOLERANCE_NOISE, f"both sides are as close to {label} as each "
                      "other: rounding noise near the tolerance", evidence)
    voted = list(corroborating.values())
    if not cand_ok:
        if "candidate" in voted and "reference" not in voted:
            outvoting = _thirds(corroborating, "candidate")
            if measured == "reference-float64" and len(outvoting) >= 2:
                evidence["decided_by"] = outvoting
                return Triage(Verdict.REFERENCE_SUSPECT, f"{len(outvoting)} third frameworks "
                              "side with the candidate against the reference's own float64 "
                              "result", evidence)
            evidence["decided_by"] = [measured, *(n for n, s in corroborating.items()
                                                  if s == "candidate")]
            return Triage(Verdict.UNDETERMINED, f"{label} sides with the reference, another "
                          "oracle with the candidate", evidence)
        evidence["decided_by"] = [measured, *_thirds(corroborating, "reference")]
        return Triage(Verdict.CANDIDATE_BUG, f"the candidate is {_ratio(cand_err, ref_err)} "
                      f"further from {label} than the reference", evidence)
    against = _thirds(corroborating, "reference")
    if against:
        evidence["decided_by"] = [measured, *against]
        return Triage(Verdict.UNDETERMINED, f"{label} sides with the candidate, a third "
                      "framework with the reference", evidence)
    evidence["decided_by"] = [measured, *_thirds(corroborating, "candidate")]
    whose = "its own float64 result" if measured == "reference-float64" else label
    return Triage(Verdict.REFERENCE_SUSPECT, f"the reference is {_ratio(ref_err, cand_err)} "
                  f"further from {whose} than the candidate", evidence)


def _fd_error(grad: dict[str, Any], numeric: np.ndarray, rtol: float, atol: float
              ) -> tuple[float, float]:
    """The largest absolute difference from the numerical gradient, and the largest
    ``|g - fd| / (atol + rtol |fd|)`` (at most 1: the gradient agrees, as gradcheck says)."""
    got = np.asarray(grad["data"], dtype=np.float64)
    if got.shape != numeric.shape:
        return math.inf, math.inf
    if got.size == 0:
        return 0.0, 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(got - numeric)
        ratio = diff / (atol + rtol * np.abs(numeric))
    if not (np.isfinite(diff).all() and np.isfinite(ratio).all()):
        return math.inf, math.inf
    return float(diff.max()), float(ratio.max())


@dataclass
class _Fit:
    """How each side's gradient fits one numerical gradient."""
    name: str
    numeric: np.ndarray
    ref_diff: float
    cand_diff: float
    ref_ok: bool
    cand_ok: bool


def _fits(ref: dict[str, Any], cand: dict[str, Any], oracles: dict[str, Observations],
          key: str, rtol: float, atol: float) -> dict[str, _Fit]:
    fits = {}
    for name in ("finite-differences", FORMULA_GRAD):
        obs = oracles.get(name, {}).get(key)
        if not _is_tensor(obs):
            continue
        assert obs is not None
        numeric = np.asarray(obs["data"], dtype=np.float64)
        if not np.isfinite(numeric).all():
            continue
        ref_diff, ref_ratio = _fd_error(ref, numeric, rtol, atol)
        cand_diff, cand_ratio = _fd_error(cand, numeric, rtol, atol)
        fits[name] = _Fit(name, numeric, ref_diff, cand_diff, ref_ratio <= 1, cand_ratio <= 1)
    return fits


def _gradients(ref: dict[str, Any], cand: dict[str, Any], oracles: dict[str, Observations],
               key: str, wide: dict[str, Any] | None, corroborating: dict[str, Side],
               evidence: Evidence) -> Triage | None:
    """Gradients judged by central differences in float64, which share no backward kernel
    with either side: of the documented formula where one implements the call (they share
    no forward kernel either), else of the reference's forward. None when they do not
    decide (both or neither agree)."""
    dtype_rtol, dtype_atol = tolerance(ref["dtype"])
    rtol, atol = max(FD_RTOL, dtype_rtol), max(FD_ATOL, dtype_atol)
    fits = _fits(ref, cand, oracles, key, rtol, atol)
    for fit in fits.values():  # gradcheck's tolerances decide whom a gradient agrees with
        evidence["oracles"][fit.name] = _side(fit.ref_ok, fit.cand_ok)
    if not fits:
        return None
    fit = fits.get(FORMULA_GRAD) or fits["finite-differences"]
    if fit.name == FORMULA_GRAD and not (fit.ref_ok or fit.cand_ok):
        return None  # the formula's gradient agrees with neither: the value rule decides
    evidence.update({"finite_differences_eps": FD_EPS, "finite_differences_rtol": rtol,
                     "finite_differences_atol": atol, "measured_against": fit.name,
                     "reference_grad_error_vs_finite_differences": fit.ref_diff,
                     "candidate_grad_error_vs_finite_differences": fit.cand_diff})
    wide_ok = None
    if _is_tensor(wide):
        assert wide is not None
        wide_diff, wide_ratio = _fd_error(wide, fit.numeric, FD_RTOL, FD_ATOL)
        evidence["reference_float64_grad_error_vs_finite_differences"] = wide_diff
        wide_ok = wide_ratio <= 1
    if fit.cand_ok == fit.ref_ok:
        return None
    right: Side = "candidate" if fit.cand_ok else "reference"
    wrong: Side = "reference" if fit.cand_ok else "candidate"
    label, against = LABELS[fit.name], _thirds(corroborating, wrong)
    evidence["decided_by"] = [fit.name, *(against or _thirds(corroborating, right))]
    if against:
        return Triage(Verdict.UNDETERMINED, f"{label} side with the {right}'s gradient, a "
                      f"third framework with the {wrong}'s", evidence)
    if right == "reference":
        return Triage(Verdict.CANDIDATE_BUG, f"the candidate's gradient disagrees with "
                      f"{label}; the reference's agrees", evidence)
    where = " (in float64 too: the backward formula, not rounding)" if wide_ok is False else ""
    return Triage(Verdict.REFERENCE_SUSPECT, f"the reference's gradient disagrees with "
                  f"{label}{where}; the candidate's agrees", evidence)


def _float64_noise(ref: dict[str, Any], cand: dict[str, Any], exact: dict[str, Any] | None,
                   evidence: Evidence) -> Triage | None:
    """Two float64 results that differ by rounding only: within NOISE_RELATIVE of each
    other. Otherwise, with an independent (NumPy) value at hand, each side's distance from it
    in float64 rounding steps goes into the evidence only: both within NOISE_ULPS of it would
    already have put them within NOISE_RELATIVE of each other."""
    ref_data, cand_data = widened(ref["data"]), widened(cand["data"])
    if ref_data.shape != cand_data.shape:
        return None
    scale = _rms(ref_data[np.isfinite(ref_data)])
    if scale == 0.0:
        return None
    apart = rmse(ref_data, cand_data) / scale
    evidence["float64_relative_difference"] = apart
    if apart <= NOISE_RELATIVE:
        return Triage(Verdict.TOLERANCE_NOISE, f"the two float64 results differ by {apart:.3g}"
                      f" relative (at most {NOISE_RELATIVE:g}): rounding", evidence)
    if exact is None:
        return None
    ulp = EPS["float64"] * scale
    ref_ulps = rmse(exact["data"], ref_data) / ulp
    cand_ulps = rmse(exact["data"], cand_data) / ulp
    evidence.update({"reference_ulps_vs_numpy": ref_ulps, "candidate_ulps_vs_numpy": cand_ulps,
                     "noise_ulps": NOISE_ULPS})
    # Both sides within NOISE_ULPS of NumPy would put them within NOISE_RELATIVE of each
    # other, decided above; here NumPy replaces the reference's own float64 run as the truth.
    return None


def _rms(finite: np.ndarray) -> float:
    """The root mean square magnitude of finite values (real or complex); 0 for none."""
    return float(np.sqrt(np.mean(np.abs(widened(finite)) ** 2))) if finite.size else 0.0


def _ratio(worse: float, better: float) -> str:
    if better == 0 or not math.isfinite(worse):
        return "much"
    return f"{worse / better:.3g}x"


def _exact(ref: dict[str, Any], cand: dict[str, Any], truth: dict[str, Any], measured: str,
           corroborating: dict[str, Side], evidence: Evidence) -> Triage:
    """Integer and boolean results: equal to the truth or not."""
    with_ref = compare(ref, truth) is None
    with_cand = compare(cand, truth) is None
    evidence["float64"] = "reference" if with_ref else "candidate" if with_cand else "neither"
    label = LABELS.get(measured, measured)
    if with_ref != with_cand:
        evidence["decided_by"] = [measured]
    if with_ref and not with_cand:
        return Triage(Verdict.CANDIDATE_BUG, f"{label} agrees with the reference", evidence)
    if with_cand and not with_ref:
        return Triage(Verdict.REFERENCE_SUSPECT, f"{label} agrees with the candidate",
                      evidence)
    return _by_votes(corroborating, evidence, f"{label} does not decide")


def _by_votes(corroborating: dict[str, Side], evidence: Evidence, why: str) -> Triage:
    voted = list(corroborating.values())
    for_ref = [name for name, side in corroborating.items() if side == "reference"]
    for_cand = [name for name, side in corroborating.items() if side == "candidate"]
    if for_cand and not for_ref:
        evidence["decided_by"] = for_cand
        return Triage(Verdict.REFERENCE_SUSPECT, f"{why}; other oracles side with the "
                      "candidate", evidence)
    if for_ref and not for_cand:
        evidence["decided_by"] = for_ref
        return Triage(Verdict.CANDIDATE_BUG, f"{why}; other oracles side with the reference",
                      evidence)
    if not voted or set(voted) <= {"both", "no result"}:
        return Triage(Verdict.CANDIDATE_BUG, f"{why}; the reference is the specification "
                      "unless an oracle says otherwise", evidence)
    evidence["decided_by"] = for_ref + for_cand
    return Triage(Verdict.UNDETERMINED, f"{why}; the oracles disagree", evidence)


def _raised(obs: Observations | None, key: str) -> bool | None:
    if obs is None or key not in obs:
        return None
    return obs[key].get("t") == "error"


def _exceptions(program: Program, finding: Finding, oracles: dict[str, Observations],
                evidence: Evidence) -> Triage:
    """Which sides raise for this input, and what the spec declares about it."""
    key = finding.key
    declared = bool(program.get("expect_raise"))
    evidence["spec_declares_invalid_input"] = declared
    thirds = {name: _raised(obs, key) for name, obs in oracles.items()
              if name.startswith(THIRD)}
    thirds_known = [t for t in thirds.values() if t is not None]
    evidence["third_frameworks_raise"] = thirds_known
    evidence["decided_by"] = [name for name, raised in thirds.items() if raised is not None]
    if finding.kind is Kind.REFERENCE_ERROR:  # the reference raised, the candidate did not
        if declared or (thirds_known and all(thirds_known)):
            return Triage(Verdict.CANDIDATE_BUG, "the input is invalid and the candidate "
                          "accepted it (missing validation)", evidence)
        if thirds_known and not any(thirds_known):
            return Triage(Verdict.REFERENCE_SUSPECT, "the reference alone rejects an input "
                          "that other frameworks accept", evidence)
        wide = _raised(oracles.get("reference-float64"), key)
        if wide is False:
            return Triage(Verdict.REFERENCE_SUSPECT, "the reference rejects the input in "
                          "its own precision but accepts it in float64", evidence)
        return Triage(Verdict.UNDETERMINED, "the reference raises and the candidate does not;"
                      " nothing says which is right", evidence)
    if declared:
        return Triage(Verdict.REFERENCE_SUSPECT, "the spec declares this input invalid; the "
                      "reference accepted it and the candidate rejected it", evidence)
    if thirds_known and all(thirds_known):
        return Triage(Verdict.REFERENCE_SUSPECT, "the candidate and every third framework "
                      "reject the input that the reference accepts", evidence)
    return Triage(Verdict.CANDIDATE_BUG, "the candidate raises on an input the reference "
                  "accepts", evidence)
