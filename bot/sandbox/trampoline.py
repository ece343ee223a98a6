"""The trampoline that starts every sandboxed command (bot/sandbox/child.py run as a script),
and the sweep that kills what a dedicated uid left running."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

from . import child

_TRAMPOLINE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
# child.py, run as a script: it needs only the standard library, so it works however the
# service was installed, -I keeps the environment and the working folder out of it, and -S
# skips site-packages (it runs twice per command: the trampoline, then the worker inside).
_TRAMPOLINE = [sys.executable, "-I", "-S", "-B", os.path.abspath(child.__file__)]


def _sweep(uid: int) -> None:
    """Kill everything still running as the dedicated uid (``kill(-1)`` from that uid)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run([*_TRAMPOLINE, "--sweep", str(uid)],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30, cwd="/", env=_TRAMPOLINE_ENV)
