"""What sweeps did: one job's report, kept as the job's result (JSON), and the sum of several
for logs, ``alignbot remind-sweep`` and the tests."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SweepReport:
    """What one or more repository sweeps did."""

    posted: list[tuple[str, int, str]] = field(default_factory=list)  # repo, number, kind
    recovered: list[tuple[str, int]] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    calls: Counter[str] = field(default_factory=Counter)
    repos_done: list[str] = field(default_factory=list)
    stopped: list[tuple[str, str]] = field(default_factory=list)  # repo, reason
    upstream_checked: int = 0
    digests: list[tuple[str, int]] = field(default_factory=list)  # tracking repo, comment id
    # sweep jobs not finished: queued again for a later try (or failed), with the reason
    pending: list[tuple[str, str]] = field(default_factory=list)

    def as_result(self) -> dict[str, Any]:
        """The report as a job's JSON result."""
        return {"posted": self.posted, "recovered": self.recovered,
                "skipped": dict(self.skipped), "calls": dict(self.calls),
                "repos_done": self.repos_done, "stopped": self.stopped,
                "upstream_checked": self.upstream_checked, "digests": self.digests,
                "pending": self.pending}

    @classmethod
    def from_result(cls, result: dict[str, Any] | None) -> SweepReport:
        """A job's result read back (JSON made its tuples lists)."""
        data = result or {}

        def rows(key: str) -> list[Any]:
            return [tuple(row) for row in data.get(key) or []]

        return cls(posted=rows("posted"), recovered=rows("recovered"),
                   skipped=Counter(data.get("skipped") or {}),
                   calls=Counter(data.get("calls") or {}),
                   repos_done=list(data.get("repos_done") or []), stopped=rows("stopped"),
                   upstream_checked=int(data.get("upstream_checked") or 0),
                   digests=rows("digests"), pending=rows("pending"))

    def add(self, other: SweepReport) -> None:
        self.posted += other.posted
        self.recovered += other.recovered
        self.skipped.update(other.skipped)
        self.calls.update(other.calls)
        self.repos_done += other.repos_done
        self.stopped += other.stopped
        self.upstream_checked += other.upstream_checked
        self.digests += other.digests
        self.pending += other.pending

    def summary(self) -> str:
        calls = ", ".join(f"{n} {k}" for k, n in sorted(self.calls.items())) or "none"
        skipped = ", ".join(f"{n} {k}" for k, n in sorted(self.skipped.items())) or "none"
        lines = [f"reminders posted: {len(self.posted)} (recovered {len(self.recovered)})",
                 f"repositories finished: {len(self.repos_done)}",
                 f"GitHub requests: {calls}", f"skipped: {skipped}",
                 f"upstream items checked: {self.upstream_checked}; digests: "
                 f"{len(self.digests)}"]
        lines += [f"stopped {repo}: {why}" for repo, why in self.stopped]
        lines += [f"not finished {repo}: {why}" for repo, why in self.pending]
        return "\n".join(lines)
