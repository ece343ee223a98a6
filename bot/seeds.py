"""The seed of a pull request's check: one per pull request, whatever its head, so that a push
that does not change the code finds what the push before it found; and the one rule every
seed the App derives follows (``seed_of``: a branch's too)."""

from __future__ import annotations

import hashlib
from typing import Any

# The engine's seeds are Hypothesis seeds; /align --seed takes the same range.
SEED_BITS = 32


def seed_of(key: str) -> int:
    """The seed of everything named ``key``: the first ``SEED_BITS`` of its SHA-256 digest."""
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:SEED_BITS // 8], "big")


def pull_request_seed(repo: str, number: int) -> int:
    """The seed of pull request ``number`` of ``repo`` (``owner/name``, any case): a digest of
    the two, never of the head, so every push and every shard of it draws the same programs."""
    return seed_of(f"{repo.lower()}#{int(number)}")


def check_seed(payload: dict[str, Any]) -> int:
    """The seed of the check a job payload asks for: ``/align seed=N``'s when given, else
    the pull request's (:func:`pull_request_seed`)."""
    if payload.get("seed") is not None:
        return int(payload["seed"])
    return pull_request_seed(str(payload["repo"]), int(payload["number"]))
