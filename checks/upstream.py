"""Upstream issue drafts for findings where the reference looks wrong (PyTorch's template)."""

from __future__ import annotations

import functools
import subprocess
import sys
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from .markdown import inline
from .report import environment

DEFAULT_TRACKER = "pytorch/pytorch"
URL_LIMIT = 8000


@dataclass
class Draft:
    title: str
    body: str
    url: str


@functools.lru_cache(maxsize=1)
def collect_env(python: str = sys.executable) -> str:
    """``python -m torch.utils.collect_env``, once per process; a short fallback if it fails."""
    try:
        proc = subprocess.run([python, "-m", "torch.utils.collect_env"], capture_output=True,
                              text=True, timeout=180)
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    import platform

    import torch

    return (f"PyTorch version: {torch.__version__}\nPython version: {platform.python_version()}"
            f"\nOS: {platform.platform()}\n(torch.utils.collect_env did not run)")


def new_issue_url(tracker: str, title: str, body: str) -> str:
    """A prefilled new-issue link; a body too long for a URL is cut with a note."""
    base = f"https://github.com/{tracker}/issues/new?"
    url = base + urlencode({"title": title, "body": body})
    if len(url) <= URL_LIMIT:
        return url
    note = "\n\n(The draft was cut to fit in a link; the full text is in the alignbot report.)"
    keep = len(body)
    while keep > 0 and len(url) > URL_LIMIT:
        keep = int(keep * 0.8)
        url = base + urlencode({"title": title, "body": body[:keep] + note})
    return url


def draft(finding: dict[str, Any], reference_only: str, output: str, candidate: str,
          tracker: str = DEFAULT_TRACKER, versions: str | None = None) -> Draft:
    """Render the draft from templates/; text from the program is escaped there."""
    claim = finding["evidence"].get("claim") or finding["verdict_reason"]
    title = f"{finding['op']}: {claim}"[:200]
    body = environment().get_template("upstream_issue.md.j2").render(
        finding=finding, reference_only=reference_only, output=output.strip(),
        candidate=candidate, versions=versions if versions is not None else collect_env(),
        evidence=finding["evidence"])
    return Draft(title=inline(title, 200), body=body, url=new_issue_url(tracker, title, body))
