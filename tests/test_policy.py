"""bot/policy.py: which head a go-ahead was written on (``head_at``), from the heads the
App's webhooks showed (``head_seen``), and the go-ahead records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from alignbot.bot.policy import (
    SEEN_AT,
    SEEN_BEFORE,
    Sighting,
    Unbound,
    approvals,
    head_at,
    head_seen,
    record_ok,
)
from alignbot.bot.storage import make_engine, migrate

T0 = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)
A, B, C = "a" * 40, "b" * 40, "c" * 40


def seen(*events: tuple[str, int, str | None]) -> list[Sighting]:
    """(sha, seconds after T0, the head it replaced) in arrival order."""
    return [Sighting(sha, T0 + timedelta(seconds=at), before, order)
            for order, (sha, at, before) in enumerate(events)]


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_the_head_of_the_comments_time_is_the_newest_seen_strictly_before_it() -> None:
    pushes = seen((A, 0, None), (B, 60, A), (C, 120, B))
    assert head_at(pushes, at(30), C) == A
    assert head_at(pushes, at(61), C) == B
    assert head_at(pushes, at(600), C) == C


def test_a_push_in_the_comments_second_is_not_seen_before_it() -> None:
    pushes = seen((A, 0, None), (B, 60, A))
    assert head_at(pushes, at(60), B) == A  # B came in that second: the comment saw A
    assert head_at(seen((A, 60, None)), at(60), A) is Unbound.UNSEEN
    two = seen((A, 0, None), (B, 30, A), (C, 30, B))  # two heads in one earlier second
    assert head_at(two, at(90), C) is Unbound.SAME_SECOND


def test_arrival_order_does_not_matter() -> None:
    forward = seen((A, 0, None), (B, 60, A), (C, 120, B))
    backward = list(reversed(forward))
    assert head_at(backward, at(90), C) == B


def test_a_hole_in_the_record_names_no_head() -> None:
    # B's webhook never came: C replaced B, not A, so the head at 90 s is unknown
    assert head_at(seen((A, 0, None), (C, 120, B)), at(90), C) is Unbound.GAP
    # a push after the last one seen has not arrived yet: is it older than the comment?
    assert head_at(seen((A, 0, None)), at(90), B) is Unbound.MOVED
    assert head_at(seen((A, 0, None)), None, A) is Unbound.NO_TIME
    assert head_at([], at(90), A) is Unbound.UNSEEN


def test_a_force_push_back_is_a_new_sighting_of_the_old_head() -> None:
    pushes = seen((A, 0, None), (B, 60, A), (A, 120, B))
    assert head_at(pushes, at(90), A) == B  # at 90 s the head was B, though A is back now
    assert head_at(pushes, at(150), A) == A
    reopened = seen((A, 0, None), (A, 120, None))  # reopened on the same head
    assert head_at(reopened, at(90), A) == A


def test_head_seen_keeps_githubs_time_and_the_replaced_head() -> None:
    payload = {"before": A, "after": B, "pull_request": {"updated_at": "2025-06-02T09:01:00Z"}}
    assert head_seen(payload) == {SEEN_AT: "2025-06-02T09:01:00Z", SEEN_BEFORE: A}
    assert head_seen({"pull_request": {"updated_at": "yesterday"}}) == {}
    assert head_seen({"pull_request": [], "before": 7}) == {}


def test_a_second_go_ahead_replaces_one_that_no_longer_counts(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'p.db'}")
    migrate(engine)
    assert record_ok(engine, "o/r", 1, A, "mia")
    assert not record_ok(engine, "o/r", 1, A, "max")  # the first giver's row stays
    assert record_ok(engine, "o/r", 1, A, "max", replace=True)
    assert approvals(engine, "o/r", 1) == [(A, "max")]
    engine.dispose()
