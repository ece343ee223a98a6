"""bot/reminders/schedule.py: weekly slots and periods."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from alignbot.bot.reminders import Schedule


def test_schedule_slots_follow_the_configured_weekday_hour_and_zone() -> None:
    paris = Schedule("monday", 9, "Europe/Paris")
    monday = datetime(2025, 6, 2, 7, 30, tzinfo=UTC)  # 09:30 in Paris
    assert paris.latest(monday) == datetime(2025, 6, 2, 7, tzinfo=UTC)
    assert paris.latest(monday - timedelta(hours=1)) == datetime(2025, 5, 26, 7, tzinfo=UTC)
    assert paris.period(monday) == "2025-06-02"
    assert paris.following(paris.latest(monday)) == datetime(2025, 6, 9, 7, tzinfo=UTC)
    winter = paris.latest(datetime(2025, 11, 3, 8, 30, tzinfo=UTC))  # after the clock change
    assert winter == datetime(2025, 11, 3, 8, tzinfo=UTC)
