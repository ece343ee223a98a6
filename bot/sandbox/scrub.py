"""Secrets redacted from what a sandboxed command printed or wrote before the service shows
it: token-like strings, private keys and the values of the service's secret-looking
variables."""

from __future__ import annotations

import os
import re
from typing import Any

from ..nesting import map_strings

_SECRET_PATTERNS = [
    (re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY-----"
                r"|\Z)", re.S), "[redacted private key]"),
    (re.compile(r"[A-Za-z0-9+/=\s]{32,}-----END[A-Z0-9 ]*PRIVATE KEY-----"),
     "[redacted private key]"),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{20,})"),
     "[redacted token]"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
     "[redacted token]"),
    (re.compile(r"\bv1\.[0-9a-f]{40}\b"), "[redacted token]"),
]
_SECRET_NAME = re.compile(r"SECRET|TOKEN|PASSWORD|PRIVATE|_KEY|CREDENTIAL", re.I)


def scrub(text: str) -> str:
    """Redact token-like strings and the values of the service's secret-looking variables."""
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    for name, value in os.environ.items():
        if _SECRET_NAME.search(name):
            for part in {value, *value.split(",")}:
                if len(part.strip()) >= 8:
                    text = text.replace(part.strip(), "[redacted]")
    return text


def _scrub_data(value: Any) -> Any:
    """Every string in JSON data scrubbed, without recursion: the data is untrusted."""
    return map_strings(value, scrub)
