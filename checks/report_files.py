"""Writing a run's reports: output paths checked before anything is drawn, reports written
atomically (one that cannot be written goes to a temporary file instead, so no result is
lost) or to stdout (``-``), and the summary lines that end a run on stderr."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from . import report as reports
from .report_types import Report

# `--json -`: the report goes to stdout. Held as this path, which no `./-` can be.
STDOUT = Path("/dev/stdout")


class OutputError(Exception):
    """An output path that cannot be written: the flag, the path and why, in one line."""


def output_path(value: str) -> Path:
    """An output option's value: ``-`` is stdout (:data:`STDOUT`)."""
    return STDOUT if value == "-" else Path(value)


def check_output(flag: str, path: Path) -> None:
    """Fail now, before any drawing, when ``path`` cannot be written at the end."""
    if path == STDOUT:
        return
    folder = path.parent
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "is a directory")
        if not folder.is_dir():
            raise FileNotFoundError(2, "no such folder" if not folder.exists()
                                    else f"{folder} is not a folder")
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{path.name}.", suffix=".tmp"):
            pass
    except OSError as exc:
        raise OutputError(f"cannot write {flag} {path}: {exc.strerror or exc}") from exc


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: a reader never sees
    half a report, and an interrupted write leaves the old file in place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def stdout_for_reports(*paths: Path | None) -> Iterator[TextIO]:
    """Where a report given as ``-`` is to be written: stdout, kept for it alone. While the
    block runs, whatever else is written to stdout (this process's lines, and at the file
    descriptor its workers' and libraries') goes to stderr."""
    if paths.count(STDOUT) > 1:
        raise OutputError("only one report can go to stdout (-)")
    if STDOUT not in paths:
        yield sys.stdout
        return
    sys.stdout.flush()
    try:
        fd, err = sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture)
        kept = sys.stdout
        with contextlib.redirect_stdout(sys.stderr):
            yield kept
        return
    saved = os.dup(fd)
    os.dup2(err, fd)
    try:
        with os.fdopen(os.dup(saved), "w", encoding="utf-8") as kept_file:
            yield kept_file
    finally:
        sys.stdout.flush()
        os.dup2(saved, fd)
        os.close(saved)


def write_reports(json_path: Path | None, markdown_path: Path | None, data: Report,
                  stdout: TextIO | None = None) -> list[Path]:
    """Write the reports asked for (:data:`STDOUT`: to ``stdout``); one that cannot be
    written (checked before the run, but the disk can fill up) goes to a temporary file
    instead, so that no result is lost."""
    written = []
    for flag, path, text in (("--json", json_path, reports.dumps(data) if json_path else ""),
                             ("--markdown", markdown_path,
                              reports.render_markdown(data) if markdown_path else "")):
        if path is None:
            continue
        if path == STDOUT:
            out = stdout or sys.stdout
            out.write(text)
            out.flush()
            written.append(path)
            continue
        try:
            write_atomically(path, text)
        except OSError as exc:
            fd, rescue = tempfile.mkstemp(prefix="alignbot-report-", suffix=path.suffix)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            print(f"alignbot: error: cannot write {flag} {path}: {exc.strerror or exc}; "
                  f"written to {rescue} instead", file=sys.stderr)
            path = Path(rescue)
        written.append(path)
    return written


def summary(data: Report, written: list[Path], minimized: bool) -> list[str]:
    """The last lines on stderr: where the reports are, what was found, how to see a repro."""
    findings = data["findings"]
    where = "in " + " and ".join("stdout" if p == STDOUT else str(p) for p in written) \
        if written else "not written (use --json FILE or --markdown FILE)"
    state = "report" if data["complete"] else "partial report (interrupted)"
    lines = [f"alignbot: {state} {where}"]
    count = len(findings)
    text = f"alignbot: {count} finding{'s' if count != 1 else ''}"
    if findings and minimized:
        verified = [f["fingerprint"] for f in findings if f.get("repro_verified")]
        failed = [f["fingerprint"] for f in findings if f.get("minimize_error")]
        text += f"; repro verified for {len(verified)}"
        text += f" ({', '.join(verified)})" if verified else ""
        if failed:
            text += f"; minimizing failed for {', '.join(failed)}"
    lines.append(text)
    json_report = next((p for p in written if p.suffix == ".json" and p != STDOUT), None)
    with_repro = [f["fingerprint"] for f in findings if f.get("repro")]
    if json_report is not None and with_repro:
        verified = [f["fingerprint"] for f in findings if f.get("repro_verified")]
        lines.append(f"alignbot: print a repro: alignbot repro {json_report} "
                     f"{(verified or with_repro)[0]}")
    return lines
