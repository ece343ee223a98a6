"""Progress: a redrawn bar on a terminal, a plain line at most every 10 s in a log, or nothing."""

from __future__ import annotations

import io
import itertools
import warnings

from alignbot.checks.progress import BAR, OFF, PLAIN, Progress, duration


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_come_at_most_every_ten_seconds() -> None:
    clock, out = Clock(), io.StringIO()
    progress = Progress(1000, out, mode=PLAIN, clock=clock)
    times = []
    for done in range(1, 401):  # 400 programs over 39.9 s
        clock.now = 100.0 + done * 0.1 - 0.1
        before = out.getvalue().count("\n")
        progress.programs(done, findings=done // 100)
        if out.getvalue().count("\n") > before:
            times.append(clock.now)
    lines = out.getvalue().splitlines()
    assert len(lines) == len(times) == 4  # at 0, 10, 20 and 30 s
    assert all(b - a >= 10 for a, b in itertools.pairwise(times))
    assert all(line.startswith("alignbot: ") and "\r" not in line for line in lines)
    assert lines[0] == "alignbot: 1/1000 programs, 0 findings"  # no rate yet: no ETA
    assert lines[1].startswith("alignbot: 101/1000 programs, 1 finding, ETA 1m30s")


def test_minimizing_progress_names_the_finding_and_the_oracle_calls() -> None:
    clock, out = Clock(), io.StringIO()
    progress = Progress(10, out, mode=PLAIN, clock=clock)
    progress.minimizing(2, 5, "torch.nn.functional.elu", 0)
    clock.now += 3
    progress.minimizing(2, 5, "torch.nn.functional.elu", 7)  # within 10 s: not shown
    clock.now += 8
    progress.minimizing(3, 5, "torch.nn.functional.selu", 12)
    assert out.getvalue().splitlines() == [
        "alignbot: minimizing finding 2/5 (torch.nn.functional.elu): 0 oracle calls, 0s elapsed",
        "alignbot: minimizing finding 3/5 (torch.nn.functional.selu): 12 oracle calls, "
        "11s elapsed"]


def test_bar_is_one_line_redrawn_in_place_with_an_eta() -> None:
    clock, out = Clock(), Terminal()
    progress = Progress.for_stream(10, out, clock=clock)
    assert progress.mode == BAR
    for done in range(1, 11):
        clock.now += 1
        progress.programs(done, findings=1)
    text = out.getvalue()
    assert "\n" not in text and text.count("\r") == 10
    assert "[############------------] 5/10 programs, 1 finding, ETA 5s" in text
    assert text.endswith("10/10 programs, 1 finding, ETA 0s")
    progress.close()
    assert out.getvalue().endswith("\r\033[K")


def test_bar_redraws_at_most_ten_times_a_second() -> None:
    clock, out = Clock(), Terminal()
    progress = Progress(1000, out, mode=BAR, clock=clock)
    for done in range(1, 500):
        clock.now += 0.001
        progress.programs(done, findings=0)
    assert out.getvalue().count("\r") == 5  # 0.5 s of updates


def test_warnings_go_below_the_bar_which_is_redrawn() -> None:
    clock, out = Clock(), Terminal()
    progress = Progress(10, out, mode=BAR, clock=clock)
    progress.programs(3, findings=0)
    with progress.routed_warnings():
        warnings.warn("this overload is deprecated", UserWarning, stacklevel=1)
    bar = "[#######-----------------] 3/10 programs, 0 findings"
    assert out.getvalue().endswith("\n" + bar)
    cleared = out.getvalue().split("\r\033[K")[-1]  # the bar is cleared, then the warning
    assert cleared.startswith(__file__)
    assert "UserWarning: this overload is deprecated" in cleared.splitlines()[0]


def test_off_writes_nothing_and_leaves_warnings_alone() -> None:
    clock, out = Clock(), Terminal()
    progress = Progress.for_stream(10, out, enabled=False, clock=clock)
    assert progress.mode == OFF
    progress.programs(1, findings=1)
    progress.minimizing(1, 1, "torch.add", 3)
    with progress.routed_warnings(), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.warn("kept", UserWarning, stacklevel=1)
    progress.close()
    assert out.getvalue() == "" and [str(w.message) for w in seen] == ["kept"]


def test_not_a_terminal_means_plain_lines() -> None:
    assert Progress.for_stream(3, io.StringIO()).mode == PLAIN


def test_duration() -> None:
    assert [duration(s) for s in (0, 42.4, 185, 3720)] == ["0s", "42s", "3m05s", "1h02m"]


def test_the_eta_is_the_rate_of_programs_not_of_the_start() -> None:
    """A run that took 60 s to start and then judges a program a second says so; a terminal
    is told what the start is doing, at once."""
    clock, out = Clock(), Terminal()
    progress = Progress(100, out, mode=BAR, clock=clock)
    progress.phase("starting the candidate (torch), then tracing 3 specs")
    assert out.getvalue() == "\r\033[Kstarting the candidate (torch), then tracing 3 specs"
    clock.now += 60
    progress.programs(1, findings=0)
    assert out.getvalue().endswith("] 1/100 programs, 0 findings")  # no rate yet, no ETA
    clock.now += 10
    progress.programs(11, findings=0)
    assert out.getvalue().endswith("] 11/100 programs, 0 findings, ETA 1m29s")
    progress.close()
    log = io.StringIO()
    Progress(100, log, mode=PLAIN, clock=clock).phase("starting")
    assert log.getvalue() == ""  # a log's lines are programs judged


def test_a_log_gets_the_last_line_however_soon_it_comes() -> None:
    clock, out = Clock(), io.StringIO()
    progress = Progress(3, out, mode=PLAIN, clock=clock)
    for done in (1, 2, 3):
        clock.now += 1
        progress.programs(done, findings=1)
    assert out.getvalue().splitlines() == [
        "alignbot: 1/3 programs, 1 finding", "alignbot: 3/3 programs, 1 finding, ETA 0s"]
