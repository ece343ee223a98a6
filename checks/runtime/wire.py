"""Framing for engine <-> worker messages: a JSON header plus raw NumPy buffers, no pickle.

A frame is ``u32 header length | header JSON | u32 blob count | (u64 length | bytes)*``.
Arrays inside the message are replaced by ``{"__array__": index, "dtype": .., "shape": ..}``
and travel as blobs, so nothing the candidate sends back is ever unpickled by the engine.
"""

from __future__ import annotations

import json
import struct
from typing import Any, BinaryIO

import numpy as np

_MAX_HEADER = 1 << 30


class WireError(Exception):
    """The peer closed the pipe or sent a malformed frame."""


def _pack(value: Any, blobs: list[bytes]) -> Any:
    if isinstance(value, np.ndarray):
        arr = np.asarray(value)
        blobs.append(arr.tobytes())
        return {"__array__": len(blobs) - 1, "dtype": arr.dtype.str, "shape": list(arr.shape)}
    if isinstance(value, dict):
        return {str(k): _pack(v, blobs) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_pack(v, blobs) for v in value]
    if isinstance(value, (np.generic,)):
        return value.item()
    return value


def _unpack(value: Any, blobs: list[bytes]) -> Any:
    if isinstance(value, dict):
        if "__array__" in value and len(value) == 3:
            raw = blobs[int(value["__array__"])]
            arr = np.frombuffer(raw, dtype=np.dtype(value["dtype"]))
            return arr.reshape([int(d) for d in value["shape"]]).copy()
        return {k: _unpack(v, blobs) for k, v in value.items()}
    if isinstance(value, list):
        return [_unpack(v, blobs) for v in value]
    return value


def write_message(stream: BinaryIO, message: Any) -> None:
    blobs: list[bytes] = []
    header = json.dumps(_pack(message, blobs), allow_nan=True).encode()
    parts = [struct.pack("<I", len(header)), header, struct.pack("<I", len(blobs))]
    for blob in blobs:
        parts.append(struct.pack("<Q", len(blob)))
        parts.append(blob)
    stream.write(b"".join(parts))
    stream.flush()


def _read_exact(stream: BinaryIO, size: int) -> bytes:
    chunks = []
    remaining = size
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            raise WireError("peer closed the pipe")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_message(stream: BinaryIO) -> Any:
    (header_len,) = struct.unpack("<I", _read_exact(stream, 4))
    if header_len > _MAX_HEADER:
        raise WireError(f"header of {header_len} bytes is too large")
    try:
        header = json.loads(_read_exact(stream, header_len))
    except ValueError as exc:
        raise WireError(f"malformed header: {exc}") from exc
    (count,) = struct.unpack("<I", _read_exact(stream, 4))
    blobs = []
    for _ in range(count):
        (size,) = struct.unpack("<Q", _read_exact(stream, 8))
        blobs.append(_read_exact(stream, size))
    return _unpack(header, blobs)
