"""Signals that cut a run short: SIGINT (Ctrl-C), SIGTERM (``timeout``, CI cancelling a job)
and SIGHUP (a closed terminal) all end ``alignbot check`` the same way, with the report so
far written (merged, ``"complete": false``), its workers and candidates killed, and exit
status 128 + the signal."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """A stop signal arrived. A KeyboardInterrupt, so that every path that already keeps its
    results on Ctrl-C keeps them on SIGTERM and SIGHUP too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_status(exc: BaseException) -> int:
    """128 + the signal that stopped the run (found along the exceptions it caused), 130 for
    a KeyboardInterrupt raised by Python's own Ctrl-C handler."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, Stopped):
            return 128 + seen.signum
        seen = seen.__cause__ or seen.__context__
    return 128 + signal.SIGINT


class StopSignals:
    """The handlers of :func:`stop_on_signals`."""

    def hold(self) -> None:
        """From now on stop signals are ignored: the results are in and being written."""
        for signum in STOP_SIGNALS:
            signal.signal(signum, _ignore)

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        self.hold()  # cleaning up and writing the report must not be cut short in turn
        raise Stopped(signum)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopSignals]:
    """While the block runs, the first stop signal raises :class:`Stopped` in the main thread
    and later ones are ignored; the handlers in place before are restored after the block."""
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    handlers = StopSignals()
    for signum in STOP_SIGNALS:
        signal.signal(signum, handlers._stop)
    try:
        yield handlers
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def worker_signals() -> None:
    """A check worker (checks/jobs.py) stops only when its parent says so, by SIGTERM:
    Ctrl-C and a hangup reach the whole process group, and the parent alone decides what
    they mean (a partial report)."""
    signal.signal(signal.SIGTERM, lambda signum, frame: _raise(signum))
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _ignore)  # not SIG_IGN: that would be inherited over exec


def _raise(signum: int) -> None:
    raise Stopped(signum)


def _ignore(signum: int, frame: FrameType | None) -> None:
    pass
