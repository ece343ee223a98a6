"""A one-line progress bar on stderr, shown only on a terminal."""

from __future__ import annotations

import sys
from typing import Any


class Progress:
    def __init__(self, total: int, enabled: bool, width: int = 30) -> None:
        self.total, self.enabled, self.width = total, enabled, width

    def update(self, spec: Any, position: int) -> None:
        if not self.enabled:
            return
        filled = self.width * position // max(self.total, 1)
        bar = "#" * filled + "-" * (self.width - filled)
        sys.stderr.write(f"\r[{bar}] {position}/{self.total} {spec.name[:40]:<40}")
        sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * (self.width + 56) + "\r")
            sys.stderr.flush()
