"""A worker's health file: rewritten while the worker is well, read by its health check.

``alignbot worker`` serves no HTTP, so a container's health check cannot ask it; instead,
with ``ALIGNBOT_HEALTH_FILE`` set, it rewrites that file every ``INTERVAL`` seconds while all
its threads run and its database answers, and ``alignbot worker --check-health`` (compose.yaml's
health check) says healthy while the file is younger than ``STALE_AFTER`` seconds."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from .periodic import Periodic

log = logging.getLogger(__name__)

INTERVAL = 10.0
STALE_AFTER = 3 * INTERVAL  # two missed rewrites and a slow one
# The setting health_file, read alone: the check, run every 30 s, imports neither the
# settings nor the App (tests/test_health.py holds the name to the setting's).
VARIABLE = "ALIGNBOT_HEALTH_FILE"


class HealthFile:
    """Rewrites ``path`` every ``interval`` seconds while ``well()`` is true, from ``start()``
    to ``stop()``, which removes it: a file left by a stopped worker is never fresh."""

    def __init__(self, path: Path, well: Callable[[], bool],
                 interval: float = INTERVAL) -> None:
        self.path, self.well = path, well
        self._timer = Periodic("health-file", self.beat, interval, first_delay=interval)

    def beat(self) -> bool:
        """Rewrite the file if the worker is well; whether it was."""
        if not self.well():
            log.warning("the worker is not well: %s left as it was", self.path)
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        part = self.path.with_name(self.path.name + ".part")
        part.write_text(f"{time.time():.0f}\n")
        os.replace(part, self.path)  # a reader sees the old file or the new one, whole
        return True

    def start(self) -> None:
        """Rewrite the file now, then every ``interval`` seconds; a path that cannot be
        written is a ``StartupError``, not a traceback every ``interval``."""
        try:
            self.path.unlink(missing_ok=True)
            self.beat()
        except OSError as error:
            from .startup import StartupError  # not at the top: see VARIABLE

            raise StartupError(f"{VARIABLE}={self.path} cannot be written: "
                               f"{error.strerror or error}") from None
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop(timeout=10)
        with contextlib.suppress(OSError):  # stopping after a start that could not write it
            self.path.unlink(missing_ok=True)


def check(path: Path, *, stale_after: float = STALE_AFTER,
          now: Callable[[], float] = time.time) -> str | None:
    """Why the worker that writes ``path`` is not healthy (one line), or None."""
    try:
        age = now() - path.stat().st_mtime
    except FileNotFoundError:
        return f"{path} does not exist: the worker has not started, or it stopped"
    except OSError as error:
        return f"{path} cannot be read: {error.strerror}"
    if age > stale_after:
        return (f"{path} was last rewritten {age:.0f} s ago (more than {stale_after:g} s): "
                "the worker's threads stopped or its database does not answer")
    return None


def check_command(environ: Mapping[str, str]) -> tuple[int, str]:
    """``alignbot worker --check-health``: the exit status and its one line."""
    value = environ.get(VARIABLE, "").strip()
    if not value:
        return 1, f"unhealthy: {VARIABLE} is not set, so the worker writes no health file"
    problem = check(Path(value))
    if problem is not None:
        return 1, f"unhealthy: {problem}"
    return 0, f"healthy: {value} is fresh"
