"""alignbot's own failures: an unexpected exception inside the engine is one line on stderr
that names it and where its traceback is, and exit status :data:`INTERNAL_ERROR`."""

from __future__ import annotations

import os
import sys
import tempfile
import traceback

INTERNAL_ERROR = 3  # 0 no finding, 1 findings, 2 bad usage, 128 + N a stop signal


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line; for a worker's error (its traceback as the message),
    the traceback's last line, which names the worker's exception."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("Traceback"):
        text = lines[-1].strip()
    else:
        text = f"{type(exc).__name__}: {' '.join(' '.join(lines).split())}".rstrip(": ")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def report(exc: BaseException, verbose: bool = False) -> int:
    """Say what failed: the traceback on stderr when ``verbose``, else in a file of its own;
    :data:`INTERNAL_ERROR`."""
    text = "".join(traceback.format_exception(exc))
    where = None if verbose else _saved(text)
    if where is None:
        sys.stderr.write(text)
    shown = "above" if where is None else f"in {where}"
    print(f"alignbot: error: internal error (a bug in alignbot, exit status {INTERNAL_ERROR}): "
          f"{one_line(exc)}; the traceback is {shown}", file=sys.stderr)
    return INTERNAL_ERROR


def _saved(text: str) -> str | None:
    """Where ``text`` was written (None: it could not be)."""
    try:
        fd, path = tempfile.mkstemp(prefix="alignbot-traceback-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError:
        return None
    return path
