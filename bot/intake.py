"""Webhook bodies read before anything vouches for them: bounded in size, time, memory and
number, with the signature computed as the bytes arrive."""

from __future__ import annotations

import asyncio
import math
import tempfile
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from alignbot.bot.webhooks import SIGNATURE_HEADER, Acceptance, Signature

# An unverified body keeps at most this much in memory; the rest waits in a temporary file
# (unlinked at once) until its signature is known.
SPOOL_BYTES = 1024 * 1024
CLOSE = (("connection", "close"),)  # the sender's unread bytes are not worth a keep-alive

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


class _TooLarge(Exception):
    pass


class _Disconnected(Exception):
    pass


@dataclass(frozen=True)
class IntakeLimits:
    max_bytes: int  # the largest body (GitHub sends up to 25 MiB)
    seconds: float  # the longest a body may take to arrive, from its first read
    at_once: int  # unverified bodies read at the same time


@dataclass
class Verified:
    """A body whose signature matched, still in its spool; ``read`` it off the event loop."""

    spool: IO[bytes]
    size: int

    def read(self) -> bytes:
        try:
            self.spool.seek(0)
            return self.spool.read()
        finally:
            self.spool.close()


class Intake:
    """Reads ``POST /webhook`` bodies from the ASGI ``receive`` callable, trusting nothing.

    Invariant: before its HMAC is checked, a body costs at most ``SPOOL_BYTES`` of memory
    (plus the server's own read buffer, 64 KiB in uvicorn), at most ``limits.at_once`` bodies
    are read at a time, and none for longer than ``limits.seconds``. A declared
    Content-Length over ``limits.max_bytes`` is refused before a byte is read, a body
    without a length when its count passes it; a request without a well-formed signature
    header is refused before its body is read at all. ``on_refused`` hears each refusal's
    reason: ``too_large``, ``too_slow`` or ``busy``.
    """

    def __init__(self, limits: IntakeLimits, secrets: Sequence[bytes],
                 on_refused: Callable[[str], None] | None = None) -> None:
        self.limits, self.secrets = limits, secrets
        self.on_refused = on_refused
        self.reading = 0  # the event loop is one thread: a plain count is exact

    async def read(self, receive: Receive, headers: Mapping[str, str]) -> Verified | Acceptance:
        lowered = {name.lower(): value for name, value in headers.items()}
        declared = lowered.get("content-length")
        if declared is not None and not declared.strip().isdigit():
            return Acceptance.error(400, "malformed Content-Length", headers=CLOSE)
        if declared is not None and int(declared) > self.limits.max_bytes:
            return self._refuse("too_large", self._too_large())
        signature = Signature(self.secrets, lowered.get(SIGNATURE_HEADER))
        if not signature.well_formed:
            return Acceptance.error(401, "missing or invalid X-Hub-Signature-256",
                                    headers=CLOSE)
        if self.reading >= self.limits.at_once:
            retry = str(max(1, math.ceil(self.limits.seconds)))
            return self._refuse("busy", Acceptance.error(
                503, "too many webhook bodies are being read; retry later",
                headers=(("retry-after", retry), *CLOSE)))
        self.reading += 1
        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 (returned)
        try:
            async with asyncio.timeout(self.limits.seconds):
                size = await self._stream(receive, spool, signature)
        except BaseException as error:
            spool.close()
            return self._failed(error)
        finally:
            self.reading -= 1
        if not signature.matches():
            spool.close()
            return Acceptance.error(401, "missing or invalid X-Hub-Signature-256")
        return Verified(spool, size)

    async def _stream(self, receive: Receive, spool: IO[bytes], signature: Signature) -> int:
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limits.max_bytes:
                raise _TooLarge
            if chunk:
                signature.update(chunk)
                spool.write(chunk)
            if not message.get("more_body", False):
                return size

    def _failed(self, error: BaseException) -> Acceptance:
        """The answer to a body whose reading stopped with ``error`` (anything else raises)."""
        if isinstance(error, TimeoutError):
            return self._refuse("too_slow", Acceptance.error(
                408, f"the body did not arrive within {self.limits.seconds:g} s",
                headers=CLOSE))
        if isinstance(error, _TooLarge):
            return self._refuse("too_large", self._too_large())
        if isinstance(error, _Disconnected):
            return Acceptance.error(400, "the client disconnected before sending the whole "
                                    "body", headers=CLOSE)
        raise error

    def _too_large(self) -> Acceptance:
        return Acceptance.error(413, f"the body is larger than {self.limits.max_bytes} bytes",
                                headers=CLOSE)

    def _refuse(self, reason: str, answer: Acceptance) -> Acceptance:
        if self.on_refused is not None:
            self.on_refused(reason)
        return answer
