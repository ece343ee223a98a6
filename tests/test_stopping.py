"""Stop signals (checks/stopping.py): SIGINT, SIGTERM and SIGHUP raise one Stopped, later ones
wait, the handlers before come back, the exit status is 128 + the signal."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from alignbot.checks.stopping import (
    STOP_SIGNALS,
    Stopped,
    exit_status,
    stop_on_signals,
    worker_signals,
)


@pytest.fixture()
def handlers_kept() -> Iterator[None]:
    """The test process's own handlers, put back whatever the test set."""
    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    yield
    for signum, handler in before.items():
        signal.signal(signum, handler)


def test_a_stop_is_a_keyboard_interrupt_named_for_its_signal() -> None:
    stopped = Stopped(signal.SIGTERM)
    assert isinstance(stopped, KeyboardInterrupt)
    assert stopped.signum == signal.SIGTERM and str(stopped) == "SIGTERM"


def test_the_exit_status_is_128_plus_the_signal_found_along_the_chain() -> None:
    assert exit_status(Stopped(signal.SIGTERM)) == 143
    assert exit_status(Stopped(signal.SIGHUP)) == 129
    assert exit_status(KeyboardInterrupt()) == 130  # Python's own Ctrl-C handler
    try:
        try:
            raise Stopped(signal.SIGTERM)
        except Stopped:
            raise RuntimeError("cleaning up failed")  # noqa: B904 - the implicit context
    except RuntimeError as during:
        assert exit_status(during) == 143
    caused = KeyboardInterrupt()
    caused.__cause__ = Stopped(signal.SIGHUP)
    assert exit_status(caused) == 129


@pytest.mark.parametrize("signum", STOP_SIGNALS)
def test_each_stop_signal_raises_stopped_once_and_later_ones_wait(
        signum: signal.Signals, handlers_kept: None) -> None:
    with pytest.raises(Stopped) as raised, stop_on_signals():
        signal.raise_signal(signum)
        pytest.fail("the signal did not stop the block")
    assert raised.value.signum == signum


def test_signals_after_the_first_are_ignored_while_the_report_is_written(
        handlers_kept: None) -> None:
    with stop_on_signals():
        try:
            signal.raise_signal(signal.SIGINT)
        except Stopped:
            signal.raise_signal(signal.SIGTERM)  # ignored: writing the report goes on
            signal.raise_signal(signal.SIGHUP)
        else:
            pytest.fail("SIGINT did not stop the block")


def test_hold_ignores_stop_signals_from_the_start(handlers_kept: None) -> None:
    with stop_on_signals() as handlers:
        handlers.hold()
        for signum in STOP_SIGNALS:
            signal.raise_signal(signum)


def test_the_handlers_before_the_block_come_back(handlers_kept: None) -> None:
    def mine(signum: int, frame: object) -> None:
        pass

    signal.signal(signal.SIGHUP, mine)
    with stop_on_signals():
        assert signal.getsignal(signal.SIGHUP) is not mine
    assert signal.getsignal(signal.SIGHUP) is mine


def test_a_worker_stops_on_sigterm_alone(handlers_kept: None) -> None:
    worker_signals()
    signal.raise_signal(signal.SIGINT)  # Ctrl-C and a hangup are the parent's to judge
    signal.raise_signal(signal.SIGHUP)
    assert signal.getsignal(signal.SIGINT) not in (signal.SIG_IGN, signal.SIG_DFL)  # not inherited
    with pytest.raises(Stopped) as raised:
        signal.raise_signal(signal.SIGTERM)
    assert raised.value.signum == signal.SIGTERM
