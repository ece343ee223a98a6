"""The error taxonomy every job shares: what is worth retrying, and when.

A handler raises :class:`TransientError` (or any exception with a true ``transient``
attribute, like ``alignbot.bot.github.RateLimited``) for a failure that may pass (GitHub answered
502, the network blinked); the worker retries it under its policy. Anything else fails the
job for good, with :func:`describe` as its reason.
"""

from __future__ import annotations

from datetime import datetime


class TransientError(Exception):
    """A failure worth retrying later (GitHub answered 502, the network blinked).

    Any exception with a true ``transient`` attribute counts as well; one that also has a
    ``retry_at`` datetime (``alignbot.bot.github.RateLimited``) is run again at that time.
    """

    transient = True


def is_transient(error: BaseException) -> bool:
    return getattr(error, "transient", False) is True


def retry_at(error: BaseException) -> datetime | None:
    """When a transient error says the job may run again (a rate limit's reset), if it says."""
    when = getattr(error, "retry_at", None)
    return when if is_transient(error) and isinstance(when, datetime) else None


def describe(error: BaseException) -> str:
    message = str(error)
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text if len(text) <= 4000 else text[:4000] + "…"
