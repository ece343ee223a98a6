"""Progress on stderr: a line redrawn in place on a terminal, a plain line every 10 s elsewhere."""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TextIO

BAR = "bar"  # a terminal: one line, redrawn in place
PLAIN = "plain"  # a log (CI): a plain line at most every ``interval`` seconds
OFF = "off"


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Progress:
    """What a long run is doing. ``clock`` is injectable so that tests need not sleep."""

    def __init__(self, total: int, stream: TextIO, mode: str = BAR,
                 clock: Callable[[], float] = time.monotonic, interval: float = 10.0,
                 redraw: float = 0.1, width: int = 24) -> None:
        self.total, self.stream, self.mode, self.clock = max(total, 1), stream, mode, clock
        self.interval, self.redraw, self.width = interval, redraw, width
        self.started = clock()
        self._first: tuple[float, int] | None = None  # when programs were first counted
        self._last: float | None = None  # when a line was last written
        self._shown = ""  # the line on screen (bar mode)

    @classmethod
    def for_stream(cls, total: int, stream: TextIO, enabled: bool = True,
                   **kwargs: Any) -> Progress:
        """A bar on a terminal, plain lines elsewhere, nothing when not ``enabled``."""
        tty = bool(getattr(stream, "isatty", lambda: False)())
        return cls(total, stream, mode=OFF if not enabled else BAR if tty else PLAIN, **kwargs)

    def programs(self, done: int, findings: int) -> None:
        """``done`` of the drawn programs are judged; ``findings`` distinct findings so far."""
        if self.mode == OFF:
            return
        now, done = self.clock(), min(done, self.total)
        if self._first is None:
            self._first = (now, done)
        since, counted = now - self._first[0], done - self._first[1]
        # the rate of the programs judged since the first count: starting the candidate and
        # tracing the first program are not a program's time
        eta = f", ETA {duration(since / counted * (self.total - done))}" if counted else ""
        plural = "s" if findings != 1 else ""
        text = f"{done}/{self.total} programs, {findings} finding{plural}{eta}"
        if self.mode == BAR:
            filled = self.width * done // self.total
            text = f"[{'#' * filled}{'-' * (self.width - filled)}] {text}"
        self._show(text, final=done == self.total)

    def phase(self, text: str) -> None:
        """What the run is doing before its first program is judged (starting the
        candidate, tracing), on a terminal: shown at once in the bar's place, so a slow start
        is not a silent screen. A log gets none (its lines are what a run judged, and an
        error before the first program stays its one line)."""
        if self.mode == BAR:
            self._show(text, final=True)
            self._last = None  # the first program's bar is not held back by it

    def minimizing(self, index: int, count: int, op: str, calls: int) -> None:
        """Finding ``index`` (from 1) of ``count``, at ``op``, after ``calls`` oracle calls."""
        if self.mode == OFF:
            return
        elapsed = duration(self.clock() - self.started)
        self._show(f"minimizing finding {index}/{count} ({op[-40:]}): {calls} oracle "
                   f"call{'s' if calls != 1 else ''}, {elapsed} elapsed")

    def note(self, text: str) -> None:
        """A line of its own (a warning, a message): below the bar, which is then redrawn."""
        if self.mode == BAR and self._shown:
            self.stream.write("\r\033[K" + text.rstrip("\n") + "\n" + self._shown)
        else:
            self.stream.write(text.rstrip("\n") + "\n")
        self.stream.flush()

    @contextlib.contextmanager
    def routed_warnings(self) -> Iterator[None]:
        """Python warnings (torch's UserWarnings) are written through :meth:`note`."""
        with warnings.catch_warnings():
            def show(message: Warning | str, category: type[Warning], filename: str,
                     lineno: int, file: TextIO | None = None, line: str | None = None
                     ) -> None:
                self.note(warnings.formatwarning(message, category, filename, lineno, line))

            if self.mode != OFF:
                warnings.showwarning = show
            yield

    def close(self) -> None:
        """Clear the bar (a terminal keeps no half-drawn line)."""
        if self.mode == BAR and self._shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
        self._shown = ""

    def _show(self, text: str, final: bool = False) -> None:
        now = self.clock()
        if self.mode == BAR:
            if self._last is not None and now - self._last < self.redraw and not final:
                return
            self.stream.write("\r\033[K" + text)
            self._shown = text
        else:
            if self._last is not None and now - self._last < self.interval and not final:
                return  # the last line (N/N programs) is always written
            self.stream.write(f"alignbot: {text}\n")
        self._last = now
        self.stream.flush()
