"""Safe extraction of a repository tarball (GitHub's ``owner-repo-sha/`` archive).

Everything in the archive is untrusted. It is read from a file as a stream, a chunk at a
time, and never held whole in memory (``GitHubApp.download`` writes it to one the same way).
Names are checked before anything is written,
sizes are counted from the bytes actually decompressed and written (never from headers),
nothing is ever written through a symbolic link, and links may only point inside the
archive's single top folder.
"""

from __future__ import annotations

import gzip
import io
import os
import posixpath
import shutil
import stat
import tarfile
from pathlib import Path
from typing import IO

MIB = 1024 * 1024
CHUNK = MIB


class ArchiveError(ValueError):
    """The archive is malformed, hostile or too large; the message names the member."""


class _CappedReader(io.RawIOBase):
    """Reads a (decompressed) stream and refuses to go past ``cap`` bytes."""

    def __init__(self, raw: IO[bytes], cap: int) -> None:
        self.raw, self.cap, self.count = raw, cap, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.raw.read(min(len(buffer), self.cap - self.count + 1))
        self.count += len(data)
        if self.count > self.cap:
            raise ArchiveError(f"the archive expands to more than {self.cap // MIB} MiB")
        buffer[:len(data)] = data
        return len(data)


def extract_tarball(archive: IO[bytes], dest: Path, max_bytes: int = 500 * MIB,
                    max_files: int = 50_000) -> Path:
    """Extract a .tar or .tar.gz read from the file ``archive`` (at its start, seekable) into
    ``dest`` (new or empty); return its single top folder.

    Raises :class:`ArchiveError` (and leaves nothing behind) for absolute or ``..`` names,
    links that leave the top folder, devices and FIFOs, more than ``max_files`` members or
    more than ``max_bytes`` of file data.
    """
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise ArchiveError(f"{dest} is not empty")
    try:
        return _Extractor(dest.resolve(), max_bytes, max_files).run(archive)
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile, ArchiveError) as exc:
        _empty(dest)
        if isinstance(exc, ArchiveError):
            raise
        raise ArchiveError(f"cannot read the archive: {exc}") from exc


def _empty(dest: Path) -> None:
    for child in dest.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


class _Extractor:
    def __init__(self, dest: Path, max_bytes: int, max_files: int) -> None:
        self.dest, self.max_bytes, self.max_files = dest, max_bytes, max_files
        self.written = 0
        self.members = 0
        self.top: str | None = None
        self.files: set[str] = set()
        self.seen: set[str] = set()
        self.links: list[str] = []

    def run(self, archive: IO[bytes]) -> Path:
        start = archive.tell()
        magic = archive.read(2)
        archive.seek(start)
        raw: IO[bytes] = archive
        if magic == b"\x1f\x8b":
            raw = gzip.GzipFile(fileobj=archive, mode="rb")  # type: ignore[assignment]
        # Headers and padding are at most a few KiB per member on top of the file data.
        stream = _CappedReader(raw, self.max_bytes + self.max_files * 4096 + MIB)
        with tarfile.open(fileobj=io.BufferedReader(stream, CHUNK), mode="r|") as tar:
            for member in tar:
                self.member(tar, member)
        if self.top is None:
            raise ArchiveError("the archive is empty")
        self.check_links()
        return self.dest / self.top

    def member(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        self.members += 1
        if self.members > self.max_files:
            raise ArchiveError(f"the archive has more than {self.max_files} members")
        name = self.name(member)
        if name in self.seen:
            raise ArchiveError(f"{name!r} appears twice in the archive")
        self.seen.add(name)
        if name == self.top:
            if not member.isdir():
                raise ArchiveError(f"the top folder {name!r} is not a folder")
            (self.dest / name).mkdir(mode=0o755, exist_ok=True)
            return
        target = self.dest / name
        self.make_parents(name)
        if member.isdir():
            self.make_dir(target, name)
        elif member.issym():
            self.symlink(member, name, target)
        elif member.islnk():
            self.hardlink(member, name, target)
        elif member.isreg() and not member.issparse():
            source = tar.extractfile(member)
            assert source is not None
            self.write(target, name, source, member.mode)
        else:
            raise ArchiveError(f"{name!r} is a {_kind(member)}; only files, folders and "
                               "links are allowed")

    def name(self, member: tarfile.TarInfo) -> str:
        raw = member.name
        if not raw or raw.startswith("/") or "\x00" in raw:
            raise ArchiveError(f"{raw!r}: absolute or empty member name")
        parts = [p for p in raw.split("/") if p not in ("", ".")]
        if not parts or ".." in parts:
            raise ArchiveError(f"{raw!r}: member names cannot contain `..`")
        if self.top is None:
            self.top = parts[0]
        elif parts[0] != self.top:
            raise ArchiveError(f"{raw!r} is outside the archive's top folder {self.top!r}")
        return "/".join(parts)

    def make_parents(self, name: str) -> None:
        """Create the member's parent folders, refusing to pass through a link or a file."""
        path = self.dest
        for part in name.split("/")[:-1]:
            path = path / part
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                path.mkdir(mode=0o755)
                continue
            if not stat.S_ISDIR(info.st_mode):
                raise ArchiveError(f"{name!r} would be written through {_rel(path, self.dest)!r}"
                                   ", which is not a folder")

    def make_dir(self, target: Path, name: str) -> None:
        try:
            info = os.lstat(target)
        except FileNotFoundError:
            target.mkdir(mode=0o755)
            return
        if not stat.S_ISDIR(info.st_mode):
            raise ArchiveError(f"{name!r}: a folder where a file or link already is")

    def symlink(self, member: tarfile.TarInfo, name: str, target: Path) -> None:
        link = member.linkname
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), link))
        if not link or link.startswith("/") or not self.inside_top(resolved):
            raise ArchiveError(f"{name!r} links to {link!r}, outside the repository")
        os.symlink(link, target)
        self.links.append(name)

    def hardlink(self, member: tarfile.TarInfo, name: str, target: Path) -> None:
        source = posixpath.normpath(member.linkname)
        if source not in self.files:
            raise ArchiveError(f"{name!r} is a hard link to {member.linkname!r}, which is not "
                               "a file extracted before it")
        # A copy, not a link: every byte is counted and no inode is shared.
        fd = os.open(self.dest / source, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            self.write(target, name, handle, os.fstat(fd).st_mode)

    def write(self, target: Path, name: str, source: IO[bytes], mode: int) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = os.open(target, flags, 0o755 if mode & 0o111 else 0o644)
        with os.fdopen(fd, "wb") as out:
            while chunk := source.read(CHUNK):
                self.written += len(chunk)
                if self.written > self.max_bytes:
                    raise ArchiveError(f"the archive's files exceed {self.max_bytes // MIB} MiB"
                                       f" (at {name!r})")
                out.write(chunk)
        self.files.add(name)

    def inside_top(self, path: str) -> bool:
        return path == self.top or path.startswith(f"{self.top}/")

    def check_links(self) -> None:
        """Links checked one by one can still escape together (``a -> .``, then
        ``b -> a/a/../../x``); resolve each one through the final tree."""
        assert self.top is not None
        top = os.path.realpath(self.dest / self.top)
        for name in self.links:
            real = os.path.realpath(self.dest / name)
            if real != top and not real.startswith(top + os.sep):
                raise ArchiveError(f"{name!r} resolves to a path outside the repository")


def _kind(member: tarfile.TarInfo) -> str:
    if member.ischr() or member.isblk():
        return "device file"
    if member.isfifo():
        return "FIFO"
    if member.issparse():
        return "sparse file"
    return f"member of type {member.type!r}"


def _rel(path: Path, root: Path) -> str:
    return str(path.relative_to(root))
