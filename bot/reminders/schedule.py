"""When a repository is swept: its weekly slot (weekday, hour, time zone), the period a moment
falls in, and GitHub's timestamps."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from ..config import Reminders


def parse_time(text: str | None) -> datetime | None:
    """GitHub's ``2024-01-01T09:00:00Z`` as an aware UTC datetime."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def search_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


@dataclass(frozen=True)
class Schedule:
    """A weekly slot: weekday and hour in a time zone."""

    weekday: str = "monday"
    hour: int = 9
    timezone: str = "UTC"

    @classmethod
    def of(cls, reminders: Reminders) -> Schedule:
        return cls(reminders.weekday, reminders.hour, reminders.timezone)

    def latest(self, now: datetime) -> datetime:
        """The last slot at or before ``now`` (UTC)."""
        zone = ZoneInfo(self.timezone)
        local = now.astimezone(zone)
        day = local.date() - timedelta(days=(local.weekday() - WEEKDAYS.index(self.weekday)) % 7)
        if self._at(day) > now:
            day -= timedelta(days=7)
        return self._at(day)

    def following(self, slot: datetime) -> datetime:
        return self._at(self.period_day(slot) + timedelta(days=7))

    def period_day(self, slot: datetime) -> date:
        return slot.astimezone(ZoneInfo(self.timezone)).date()

    def period(self, now: datetime) -> str:
        """The key of the period ``now`` is in: the local date of its slot."""
        return self.period_day(self.latest(now)).isoformat()

    def _at(self, day: date) -> datetime:
        return datetime.combine(day, time(self.hour), tzinfo=ZoneInfo(self.timezone)
                                ).astimezone(UTC)


def describe_wait(waited: timedelta) -> str:
    days = max(0, waited.days)
    if days < 14:
        return "1 day" if days == 1 else f"{days} days"
    return f"{days // 7} weeks"

