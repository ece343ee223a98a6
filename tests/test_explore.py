"""checks/explore.py and checks/choice_points.py: the first draws of a spec are steered to every
alternative of its choice points, the programs they give replay and shrink like any other, and
the report names what was never drawn."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis.internal.conjecture.data import ConjectureData

from alignbot.checks import nothing, oneof, random, random_bool, random_dtype, random_tensor
from alignbot.checks.dsl import DrawContext, resolve
from alignbot.checks.engine import check, draw_programs, trace_program
from alignbot.checks.explore import Explorer
from alignbot.checks.findings import Kind
from alignbot.checks.library import choose
from alignbot.checks.report import render_markdown, to_json
from alignbot.checks.spec import Spec

# Alternative 4 of this oneof (the fifth) is the only one that calls torch.tanh.
FIFTH = ("torch.sin", "torch.cos", "torch.exp", "torch.sigmoid", "torch.tanh", "torch.atan")


def wide(torch: Any) -> Any:
    """A 6-way and a 3-way oneof, two random_bools and a 2-way dtype: 15 alternatives."""
    x = random_tensor(ndim=2, low=-1, high=1, dtype=random_dtype("float32", "float64"))
    op = resolve(oneof(*FIFTH))
    scale = resolve(oneof(1.0, 2.0, -1.0))
    y = eval(op, {"torch": torch})(x) * scale
    if random_bool():
        y = y + 1
    if random_bool():
        y = y.sum(0)
    return y


def behind(torch: Any) -> Any:
    """A oneof that exists only when a random_bool comes out True."""
    x = random_tensor(ndim=1)
    if random_bool():
        return x * resolve(oneof(1.0, 2.0, 3.0, 4.0))
    return x


def _draw(fn: Any, n: int = 20, seed: int = 0, steer: bool = True) -> tuple[list[Any], Any]:
    programs: list[Any] = []
    summary = draw_programs(Spec(name=f"t.{fn.__name__}", fn=fn, n=n), n, seed,
                            lambda p, r: programs.append(p), steer)
    return programs, summary


# Seeds at which 20 free draws of ``wide`` leave an alternative out (4 of the first 40 seeds;
# 34: the fifth alternative of the 6-way oneof).
FREE_MISSES = (6, 9, 21, 34)


def test_every_alternative_is_drawn_at_the_default_n() -> None:
    for seed in (0, *FREE_MISSES):
        programs, summary = _draw(wide, seed=seed)
        assert len(programs) == 20
        assert (summary.seen, summary.drawn, summary.missed) == (15, 15, []), seed
        ops = {node["target"] for p in programs for node in p["nodes"] if node["op"] == "call"}
        assert set(FIFTH) <= ops


def test_free_draws_miss_some_and_the_summary_names_them() -> None:
    line = wide.__code__.co_firstlineno + 3  # the 6-way oneof
    _, free = _draw(wide, seed=34, steer=False)
    assert (free.seen, free.drawn, free.missed) == (15, 14, [f"test_explore.py:{line} oneof[4]"])


def test_a_point_behind_another_alternative_is_covered_too() -> None:
    _, summary = _draw(behind, n=8)
    assert (summary.seen, summary.drawn) == (6, 6)


def test_too_few_draws_name_the_alternatives_never_drawn() -> None:
    _, summary = _draw(wide, n=2)
    line = wide.__code__.co_firstlineno + 3  # the 6-way oneof
    assert f"test_explore.py:{line} oneof[5]" in summary.missed
    assert summary.seen - summary.drawn == len(summary.missed)


def test_steered_programs_replay_and_run_again_in_hypothesis_exactly() -> None:
    programs, _ = _draw(wide)
    spec = Spec(name="t.wide", fn=wide)
    for program in programs:
        again, _ = trace_program(spec, DrawContext(choices=program["choices"]))
        assert again["nodes"] == program["nodes"]
        # the shrinker's way: the choices as a Hypothesis test case, with no steering
        data = ConjectureData.for_choices(program["choices"])
        replayed, _ = trace_program(spec, DrawContext(data=data))
        assert replayed["choices"] == program["choices"]


def test_runs_stay_fixed_by_the_seed() -> None:
    first, second = _draw(wide, seed=5)[0], _draw(wide, seed=5)[0]
    assert [p["choices"] for p in first] == [p["choices"] for p in second]


@pytest.mark.slow
def test_a_bug_in_the_fifth_alternative_is_found_at_the_default_n(make_candidate: Any) -> None:
    prelude = "import torch\n_tanh = torch.tanh\ntorch.tanh = lambda x: _tanh(x) * 1.5\n"
    spec = Spec(name="t.wide", fn=wide)
    programs, _ = _draw(wide, seed=34, steer=False)  # what drawing found before steering
    assert not any(node.get("target") == "torch.tanh" for p in programs for node in p["nodes"])
    result = check([spec], make_candidate(prelude), seed=34)
    assert {(f.kind, f.op) for f in result.findings} >= {(Kind.VALUE, "torch.tanh")}
    report = to_json(result, "planted tanh")
    (explored,) = report["exploration"]
    covered = explored.pop("covered")  # type: ignore[misc]
    assert explored == {"spec": "t.wide", "seen": 15, "drawn": 15, "missed": []}
    # a spec that names no op covers every call it made, with the dtypes it was fed
    assert ["torch.tanh", "float32"] in covered and covered == sorted(covered)


@pytest.mark.slow
def test_the_markdown_has_a_line_per_spec_that_missed_something(make_candidate: Any) -> None:
    result = check([Spec(name="t.wide", fn=wide, n=2)], make_candidate("import torch\n"),
                   seed=0)
    text = render_markdown(to_json(result, "torch"))
    assert "Choice points: 7 of 15 alternatives drawn; 1 of 1 specs left some undrawn:" in text
    line = next(row for row in text.splitlines() if row.startswith("- `t.wide`"))
    assert "never drawn" in line and "oneof[" in line


def test_sites_are_where_generators_were_created_and_count_occurrences() -> None:
    def fn(torch: Any) -> Any:
        x = random_tensor(ndim=1)
        for _ in range(3):
            x = x * resolve(oneof(1.0, 2.0) | nothing() if False else oneof(1.0, 2.0))
        return choose(lambda: x, lambda: -x)()

    programs, summary = _draw(fn, n=6)
    assert (summary.seen, summary.drawn) == (8, 8)
    explorer = Explorer(6)
    ctx = DrawContext(choices=programs[0]["choices"])
    trace_program(Spec(name="t.fn", fn=fn), ctx, explorer)
    labels = [point.label(0) for point in ctx.points]
    line = fn.__code__.co_firstlineno
    assert labels == [f"test_explore.py:{line + 3} oneof[0]",
                      f"test_explore.py:{line + 3}#2 oneof[0]",
                      f"test_explore.py:{line + 3}#3 oneof[0]",
                      f"test_explore.py:{line + 4} choose[0]"]


def test_a_point_behind_a_drawn_size_is_reached_by_its_path() -> None:
    def fn(torch: Any) -> Any:
        x = random_tensor(ndim=1)
        if int(random(0, 40)) == 0:  # only the simplest draw takes this
            return x * resolve(oneof(1.0, 2.0, 3.0))
        return x

    _, summary = _draw(fn, n=8)
    assert (summary.seen, summary.drawn) == (3, 3)


def test_a_label_from_a_hostile_file_name_is_plain_text_the_app_accepts() -> None:
    from alignbot.bot.engine_report import SpecExploration
    from alignbot.checks.choice_points import ChoicePoint, Site

    point = ChoicePoint(Site("/repo/x](http://evil)`<b>.py", 3, "oneof"), 1, ("0", "1"), 0, 5)
    label = point.label(1)
    assert label == "evil___b_.py:3#2 oneof[1]"
    SpecExploration(spec="t.x", seen=2, drawn=1, missed=[label])


def test_pairs_of_alternatives_are_drawn_together_after_singles() -> None:
    seen: list[tuple[Any, ...]] = []

    def pairs(torch: Any) -> Any:
        picks = (resolve(oneof(0, 1, 2)), resolve(oneof(0, 1, 2)), bool(random_bool()))
        seen.append(picks)
        return random_tensor(ndim=1) * picks[0]

    def count(seed: int, steer: bool) -> tuple[int, int, int]:
        seen.clear()
        _draw(pairs, n=20, seed=seed, steer=steer)
        return (len({(a, b) for a, b, _ in seen}), len({(a, c) for a, _, c in seen}),
                len({(b, c) for _, b, c in seen}))

    # every pair, at seeds where 20 free draws miss some
    for seed in (1, 2, 3):
        assert count(seed, steer=True) == (9, 6, 6)
        assert count(seed, steer=False) != (9, 6, 6)
