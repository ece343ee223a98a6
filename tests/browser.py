"""Headless Chromium for the tests that look at a page as a browser draws it: one launch
takes a screenshot, which ``decode_png`` turns into pixels (NumPy; no imaging library)."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def chromium() -> str:
    """Debian's chromium (``scripts/chromium.sh`` installs it), or the test is skipped."""
    found = shutil.which("chromium")
    if found is None:
        subprocess.run(["bash", str(ROOT / "scripts" / "chromium.sh")], check=False)
        found = shutil.which("chromium")
    if found is None:
        pytest.skip("chromium is not installed and scripts/chromium.sh could not install it")
    return found


def screenshot(url: str, out: Path, width: int = 1100, height: int = 1400) -> np.ndarray:
    """The page at ``url`` drawn by headless Chromium, as RGB pixels (height × width × 3)."""
    subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                    "--hide-scrollbars", "--no-first-run", "--disable-extensions",
                    f"--user-data-dir={out.parent / 'chromium-profile'}",
                    f"--window-size={width},{height}", f"--screenshot={out}", url],
                   check=True, capture_output=True, timeout=120)
    return decode_png(out.read_bytes())


def decode_png(data: bytes) -> np.ndarray:
    """An 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes) as RGB pixels."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, chunks, header = 8, [], b""
    while pos < len(data):
        (size,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + size]
        pos += 12 + size
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(chunks)), dtype=np.uint8)
    rows = raw.reshape(height, width * bpp + 1)
    out = np.zeros((height, width * bpp), dtype=np.uint8)
    previous = np.zeros(width * bpp, dtype=np.int32)
    for y in range(height):
        kind, line = rows[y, 0], rows[y, 1:].astype(np.int32)
        if kind == 0:
            current = line
        elif kind == 2:  # up
            current = (line + previous) & 0xFF
        elif kind == 1:  # sub: a running sum per channel
            current = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1) & 0xFF
        else:  # average, paeth: each byte needs the one before it, rebuilt
            current = _sequential(line, previous, bpp, int(kind))
        out[y] = current
        previous = current.astype(np.int32)
    return out.reshape(height, width, bpp)[:, :, :3]


def _sequential(line: np.ndarray, up: np.ndarray, bpp: int, kind: int) -> np.ndarray:
    current = np.zeros_like(line)
    for i in range(len(line)):
        left = int(current[i - bpp]) if i >= bpp else 0
        above = int(up[i])
        if kind == 3:
            guess = (left + above) // 2
        else:
            corner = int(up[i - bpp]) if i >= bpp else 0
            p = left + above - corner
            pa, pb, pc = abs(p - left), abs(p - above), abs(p - corner)
            guess = left if pa <= pb and pa <= pc else above if pb <= pc else corner
        current[i] = (int(line[i]) + guess) & 0xFF
    return current
