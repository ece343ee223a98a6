"""bot/periodic.py: a function run every few seconds in its own thread."""

from __future__ import annotations

import threading
import time

from alignbot.bot.periodic import Periodic


def test_runs_again_after_a_failure_and_stops() -> None:
    calls: list[float] = []
    three = threading.Event()

    def run() -> None:
        calls.append(time.monotonic())
        if len(calls) >= 3:
            three.set()
        if len(calls) == 1:
            raise RuntimeError("the database went away")  # logged; the next run comes

    timer = Periodic("test", run, interval=0.01)
    timer.start()
    assert three.wait(10)
    assert timer.stop(timeout=10)
    stopped_at = len(calls)
    time.sleep(0.05)
    assert len(calls) == stopped_at and timer.runs == stopped_at


def test_the_first_run_waits_for_its_delay_and_a_stop_cancels_it() -> None:
    calls: list[int] = []
    timer = Periodic("test", lambda: calls.append(1), interval=0.01, first_delay=60)
    timer.start()
    assert timer.stop(timeout=10)
    assert calls == []
