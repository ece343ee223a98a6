"""GitHub's value formats: timestamps, node ids, blob shas, tokens, base64."""

from __future__ import annotations

import base64
import hashlib
import secrets
import string
from datetime import UTC, datetime


def utcnow() -> datetime:
    """The current time, to the second, as GitHub reports it."""
    return datetime.now(UTC).replace(microsecond=0)


def iso(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC with a `Z`, GitHub's timestamp format."""
    return None if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_id(kind: str, number: int) -> str:
    """An opaque GraphQL node id, unique per kind and number."""
    return kind + base64.urlsafe_b64encode(f"{number:012d}".encode()).decode().rstrip("=")


def blob_sha(data: bytes) -> str:
    """The git blob id of `data`, as the contents API reports it."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def random_token(prefix: str, length: int = 36) -> str:
    """A random credential in GitHub's format (`ghs_` + 36 alphanumerics)."""
    alphabet = string.ascii_letters + string.digits
    return prefix + "".join(secrets.choice(alphabet) for _ in range(length))


def wrap_base64(data: bytes) -> str:
    """Base64 cut in 60-character lines with a final newline, as the contents API sends it."""
    text = base64.b64encode(data).decode()
    return "".join(text[i : i + 60] + "\n" for i in range(0, len(text), 60))


def count_patch(patch: str | None) -> tuple[int, int]:
    """Added and deleted line counts of a unified-diff hunk text."""
    lines = (patch or "").splitlines()
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    deleted = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return added, deleted


def as_bytes(data: bytes | str) -> bytes:
    """File content given as text or bytes, as bytes."""
    return data.encode() if isinstance(data, str) else data


def parse_time(text: str) -> datetime:
    """A date or date-time from a search qualifier, as an aware UTC datetime."""
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
