"""Choice points (checks/choice_points.py): named by the first frame outside the DSL and by
their occurrence in one draw, with short labels made only of plain characters."""

from __future__ import annotations

import inspect

from alignbot.checks import oneof, random_bool
from alignbot.checks.choice_points import (
    _INTERNAL_FILES,
    MAX_LABEL,
    ChoicePoint,
    Site,
    internal,
    site_here,
)
from alignbot.checks.dsl import DrawContext, resolve


def test_a_site_is_where_the_caller_outside_the_dsl_is() -> None:
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    site = site_here("oneof")
    assert site == Site(__file__, line, "oneof")


def test_a_generator_made_in_a_spec_is_named_by_the_specs_line() -> None:
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    generator = oneof(1, 2)  # through the DSL's own frames
    assert generator.site == Site(__file__, line, "oneof")  # type: ignore[attr-defined]


def test_frames_of_a_file_marked_internal_are_skipped() -> None:
    helper = "<a choose-like helper>"
    namespace: dict[str, object] = {"site_here": site_here}
    exec(compile("def choose():\n    return site_here('choose')\n", helper, "exec"), namespace)
    choose = namespace["choose"]
    assert callable(choose)
    assert choose().file == helper  # not yet the DSL's: the helper is the caller
    internal(helper)
    try:
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        site = choose()
        assert (site.file, site.line) == (__file__, line)
    finally:
        _INTERNAL_FILES.discard(helper)


def test_a_site_label_is_its_file_name_line_and_later_occurrences() -> None:
    site = Site("/repo/specs/reductions.py", 42, "oneof")
    assert site.label(0) == "reductions.py:42"
    assert site.label(2) == "reductions.py:42#3"


def test_a_choice_points_label_names_the_alternative_and_stays_short() -> None:
    point = ChoicePoint(Site("/r/specs.py", 7, "random_dtype"), 0, ("float32", "float64"), 1, 3)
    assert point.key == (point.site, 0)
    assert point.label(1) == "specs.py:7 random_dtype[float64]"
    long = ChoicePoint(Site("/r/" + "a" * 200 + ".py", 1, "oneof"), 0, ("x",), 0, 0)
    assert len(long.label(0)) == MAX_LABEL
    odd = ChoicePoint(Site("/r/s.py", 1, "oneof"), 0, ("<b>*x*</b>",), 0, 0)
    assert odd.label(0) == "s.py:1 oneof[_b__x___b_]"


def test_a_draw_records_each_choice_point_with_its_occurrence_and_position() -> None:
    ctx = DrawContext(choices=[1, 0, 1])
    with ctx:
        picks = [resolve(oneof("a", "b")) for _ in range(2)]
        flag = resolve(random_bool())
    assert picks == ["b", "a"] and flag is True
    assert [(p.occurrence, p.picked, p.position) for p in ctx.points] == [(0, 1, 0), (1, 0, 1),
                                                                         (0, 1, 2)]
    first, second, third = ctx.points
    assert first.site == second.site != third.site  # one line, two occurrences
    assert first.site.file == __file__ and first.alternatives == ("0", "1")  # by position
    assert third.site.kind != first.site.kind


def test_sites_sort_by_file_line_and_kind() -> None:
    a, b, c = Site("a.py", 2, "oneof"), Site("a.py", 10, "oneof"), Site("a.py", 2, "choose")
    assert sorted([b, a, c]) == [c, a, b]
