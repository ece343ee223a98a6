"""A function run every few seconds in a thread of its own (``alignbot serve`` queues the
reminder sweeps with one): a failed run is logged and the next one tries again."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Periodic:
    """Runs ``run`` after ``first_delay`` seconds, then every ``interval`` seconds, until
    ``stop()``."""

    def __init__(self, name: str, run: Callable[[], object], interval: float,
                 first_delay: float = 0.0) -> None:
        self.name, self.run, self.interval, self.first_delay = name, run, interval, first_delay
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.runs = 0

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=f"alignbot-{self.name}",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 30.0) -> bool:
        """Ask the thread to stop after its current run; True once it has."""
        self._stop.set()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        stopped = not self._thread.is_alive()
        if stopped:
            self._thread = None
        return stopped

    def _loop(self) -> None:
        if self._stop.wait(self.first_delay):
            return
        while not self._stop.is_set():
            try:
                self.run()
            except Exception:
                log.exception("%s failed; the next run tries again", self.name)
            self.runs += 1
            self._stop.wait(self.interval)
