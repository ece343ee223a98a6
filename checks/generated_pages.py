"""Pages with a generated part: the text between two markers, and the command that writes it.

docs/operations.md's settings table (``bot/settings_doc.py``) and docs/report-format.md's
tables (``checks/report_doc.py``) are each rendered from code and kept between a page's
markers; each has a test that fails while the page holds another text."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path


def replace_between(page: str, begin: str, end: str, body: str) -> str:
    """``page`` with the text between its ``begin`` and ``end`` markers replaced by ``body``
    (``ValueError`` when a marker is missing)."""
    head, found_begin, rest = page.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not found_begin or not found_end:
        raise ValueError(f"the page lacks the markers {begin!r} and {end!r}")
    return f"{head}{begin}\n{body}{end}{tail}"


def page_command(prog: str, description: str, render: Callable[[], str],
                 replace: Callable[[str], str], argv: Sequence[str] | None = None) -> int:
    """``prog [--write PAGE]``: print what ``render`` gives, or put it into PAGE
    (``replace``: the page's text, its generated part current); a page that cannot be read
    or lacks the markers is one usage line, exit status 2."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--write", type=Path, metavar="PAGE",
                        help="replace the generated part between the markers of PAGE instead")
    args = parser.parse_args(argv)
    if args.write is None:
        sys.stdout.write(render())
        return 0
    try:
        args.write.write_text(replace(args.write.read_text()))
    except (OSError, ValueError) as error:
        parser.error(str(error))
    return 0
