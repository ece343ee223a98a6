"""bot/errors.py: what is worth retrying, and when."""

from __future__ import annotations

from datetime import UTC, datetime

from alignbot.bot.errors import TransientError, describe, is_transient, retry_at


class _Limited(Exception):
    transient = True

    def __init__(self, when: datetime) -> None:
        super().__init__("rate limited")
        self.retry_at = when


class _NotReally(Exception):
    transient = "yes"  # only a true attribute counts


def test_transient_by_class_or_by_attribute() -> None:
    assert is_transient(TransientError("502"))
    assert is_transient(_Limited(datetime.now(UTC)))
    assert not is_transient(ValueError("bad config"))
    assert not is_transient(_NotReally())


def test_a_retry_time_counts_only_on_a_transient_error() -> None:
    when = datetime(2026, 12, 1, 10, tzinfo=UTC)
    assert retry_at(_Limited(when)) == when
    plain = ValueError("x")
    plain.retry_at = when  # type: ignore[attr-defined]
    assert retry_at(plain) is None
    assert retry_at(TransientError("no time given")) is None


def test_a_reason_names_the_error_and_stays_bounded() -> None:
    assert describe(ValueError("bad")) == "ValueError: bad"
    assert describe(KeyError()) == "KeyError"
    long = describe(RuntimeError("x" * 10_000))
    assert len(long) == 4001 and long.endswith("…")
