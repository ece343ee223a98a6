"""Repository archives as GitHub's codeload host serves them; `Link` marks a symlink."""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Mapping
from datetime import datetime


class Link(bytes):
    """A symbolic link in a tree: its bytes are the target, as git stores a link's blob."""


def build_tarball(prefix: str, files: Mapping[str, bytes], sha: str, date: datetime) -> bytes:
    """A .tar.gz like GitHub's: pax header with the commit id, then `prefix/` and the files
    (a `Link` value becomes a symbolic link entry). The same commit gives the same bytes on
    every request, as GitHub's do: the gzip header carries the commit's date, not the clock."""
    buffer = io.BytesIO()
    folders = {"/".join(p.split("/")[:n]) for p in files for n in range(1, p.count("/") + 1)}
    mtime = date.timestamp()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=int(mtime)) as packed, \
            tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT,
                         pax_headers={"comment": sha}) as tar:
        for folder in ["", *sorted(folders)]:
            info = tarfile.TarInfo(f"{prefix}/{folder}".rstrip("/") + "/")
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o775, mtime
            tar.addfile(info)
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(f"{prefix}/{path}")
            info.mode, info.mtime = 0o664, mtime
            if isinstance(data, Link):
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, data.decode(), 0o777
                tar.addfile(info)
                continue
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------
# Faults and the HTTP server
