"""Tarball extraction: GitHub's archives come out whole; crafted hostile ones are refused and
leave nothing behind."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from alignbot.bot.archive import ArchiveError, extract_tarball

TOP = "octo-repo-0123abc"


def _member(name: str, data: bytes | None = None, kind: bytes = tarfile.REGTYPE,
            link: str = "", mode: int = 0o644, size: int | None = None
            ) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, mode
    info.size = len(data) if data is not None and size is None else (size or 0)
    return info, data


def _tar(*members: tuple[tarfile.TarInfo, bytes | None], gz: bool = True,
         comment: str | None = None) -> bytes:
    buffer = io.BytesIO()
    headers = {"comment": comment} if comment else {}
    with tarfile.open(fileobj=buffer, mode="w:gz" if gz else "w", format=tarfile.PAX_FORMAT,
                      pax_headers=headers) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def _dir(name: str) -> tuple[tarfile.TarInfo, None]:
    return _member(name, kind=tarfile.DIRTYPE, mode=0o755)


def _refused(data: bytes, dest: Path, match: str, **limits: int) -> None:
    with pytest.raises(ArchiveError, match=match):
        extract_tarball(io.BytesIO(data), dest, **limits)
    assert list(dest.iterdir()) == [], "a refused archive left files behind"


def test_github_style_archive(tmp_path: Path) -> None:
    data = _tar(_dir(f"{TOP}/"), _member(f"{TOP}/README.md", b"hello"),
                _member(f"{TOP}/src/ops.py", b"def gelu(): ...\n"),
                _member(f"{TOP}/run.sh", b"#!/bin/sh\n", mode=0o4755),
                _member(f"{TOP}/docs/link.md", kind=tarfile.SYMTYPE, link="../README.md"),
                _member(f"{TOP}/copy.md", kind=tarfile.LNKTYPE, link=f"{TOP}/README.md"),
                comment="0123abc" * 5)  # `git archive` puts the commit in a global header
    root = extract_tarball(io.BytesIO(data), tmp_path / "src")
    assert root == (tmp_path / "src" / TOP).resolve()
    assert (root / "README.md").read_bytes() == b"hello"
    assert (root / "src" / "ops.py").read_text() == "def gelu(): ...\n"
    assert (root / "docs" / "link.md").read_text() == "hello"
    assert (root / "copy.md").read_text() == "hello" and not os.path.samefile(
        root / "copy.md", root / "README.md")
    mode = stat.S_IMODE((root / "run.sh").stat().st_mode)
    assert mode == 0o755  # executable, never setuid
    assert sorted(p.name for p in (tmp_path / "src").iterdir()) == [TOP]


def test_plain_tar_and_a_real_git_archive(tmp_path: Path) -> None:
    plain = io.BytesIO(_tar(_member(f"{TOP}/a.txt", b"a"), gz=False))
    root = extract_tarball(plain, tmp_path / "plain")
    assert (root / "a.txt").read_text() == "a"
    if shutil.which("git") is None:
        pytest.skip("no git")
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "ops.py").write_text("x = 1\n")
    (repo / "alias.py").symlink_to("pkg/ops.py")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    archive = subprocess.run([*git, "archive", "--format=tar.gz", f"--prefix={TOP}/", "HEAD"],
                             check=True, capture_output=True).stdout
    root = extract_tarball(io.BytesIO(archive), tmp_path / "git")
    assert (root / "alias.py").read_text() == "x = 1\n"


@pytest.mark.parametrize(("name", "match"), [
    ("/etc/cron.d/evil", "absolute"),
    (f"{TOP}/../../evil", r"`\.\.`"),
    ("../evil", r"`\.\.`"),
    (f"{TOP}/a/../../../evil", r"`\.\.`"),
])
def test_absolute_and_dotdot_names_are_refused(tmp_path: Path, name: str, match: str) -> None:
    _refused(_tar(_dir(f"{TOP}/"), _member(name, b"x")), tmp_path, match)
    assert not (tmp_path.parent / "evil").exists()


@pytest.mark.parametrize("link", ["/etc/passwd", "../../outside", "../", "sub/../../.."])
def test_links_out_of_the_repository_are_refused(tmp_path: Path, link: str) -> None:
    data = _tar(_dir(f"{TOP}/"), _member(f"{TOP}/link", kind=tarfile.SYMTYPE, link=link))
    _refused(data, tmp_path, "outside the repository")


def test_writing_through_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    data = _tar(_dir(f"{TOP}/"), _dir(f"{TOP}/sub/"),
                _member(f"{TOP}/into", kind=tarfile.SYMTYPE, link="sub"),
                _member(f"{TOP}/into/file.txt", b"through the link"))
    _refused(data, tmp_path / "dest", "written through")


def test_links_that_escape_together_are_refused(tmp_path: Path) -> None:
    # Each link looks fine alone; through `a -> .` the second resolves above the top folder.
    dest = tmp_path / "dest"
    data = _tar(_dir(f"{TOP}/"), _member(f"{TOP}/a", kind=tarfile.SYMTYPE, link="."),
                _member(f"{TOP}/b", kind=tarfile.SYMTYPE, link="a/a/../../secret"))
    _refused(data, dest, "resolves to a path outside")


def test_hard_links_only_to_files_extracted_before(tmp_path: Path) -> None:
    for link in ("/etc/shadow", f"{TOP}/later.txt", f"{TOP}/../x"):
        data = _tar(_dir(f"{TOP}/"), _member(f"{TOP}/h", kind=tarfile.LNKTYPE, link=link),
                    _member(f"{TOP}/later.txt", b"x"))
        _refused(data, tmp_path, "hard link")


@pytest.mark.parametrize(("kind", "what"), [(tarfile.CHRTYPE, "device file"),
                                            (tarfile.BLKTYPE, "device file"),
                                            (tarfile.FIFOTYPE, "FIFO")])
def test_devices_and_fifos_are_refused(tmp_path: Path, kind: bytes, what: str) -> None:
    _refused(_tar(_dir(f"{TOP}/"), _member(f"{TOP}/dev", kind=kind)), tmp_path, what)


def test_too_many_members(tmp_path: Path) -> None:
    members = [_member(f"{TOP}/f{i}", b"") for i in range(11)]
    _refused(_tar(_dir(f"{TOP}/"), *members), tmp_path, "more than 10 members", max_files=10)


def test_too_many_bytes_counted_while_writing(tmp_path: Path) -> None:
    members = [_member(f"{TOP}/f{i}", b"x" * 400_000) for i in range(3)]
    _refused(_tar(_dir(f"{TOP}/"), *members), tmp_path, "exceed", max_bytes=1024 * 1024)


def test_hard_links_count_as_bytes(tmp_path: Path) -> None:
    members = [_member(f"{TOP}/f", b"x" * 600_000)] + [
        _member(f"{TOP}/h{i}", kind=tarfile.LNKTYPE, link=f"{TOP}/f") for i in range(2)]
    _refused(_tar(_dir(f"{TOP}/"), *members), tmp_path, "exceed", max_bytes=1024 * 1024)


def test_gzip_bomb_stops_at_the_limit(tmp_path: Path) -> None:
    bomb = _tar(_member(f"{TOP}/zeros", b"\0" * (64 * 1024 * 1024)))
    assert len(bomb) < 200_000
    _refused(bomb, tmp_path, "exceed|expands", max_bytes=1024 * 1024, max_files=10)


def test_header_claiming_more_than_there_is(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.addfile(_member(f"{TOP}/a", b"a")[0], io.BytesIO(b"a"))
    raw = bytearray(buffer.getvalue())
    info = tarfile.TarInfo(f"{TOP}/huge")
    info.size = 10 * 1024**3  # 10 GiB announced, a few bytes present
    raw[1024:1024] = info.tobuf() + b"x" * 512
    _refused(gzip.compress(bytes(raw)), tmp_path, "cannot read|exceed|expands")


def test_one_top_folder_only(tmp_path: Path) -> None:
    _refused(_tar(_member(f"{TOP}/a", b""), _member("other/b", b"")), tmp_path,
             "outside the archive's top folder")
    _refused(_tar(_member("README.md", b"x")), tmp_path, "not a folder")


def test_duplicates_and_bad_input(tmp_path: Path) -> None:
    _refused(_tar(_member(f"{TOP}/a", b"1"), _member(f"{TOP}/a", b"2")), tmp_path,
             "appears twice")
    _refused(b"this is not a tarball" * 100, tmp_path, "cannot read|empty")
    _refused(_tar(), tmp_path, "empty")


def test_destination_must_be_empty(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(ArchiveError, match="not empty"):
        extract_tarball(io.BytesIO(_tar(_member(f"{TOP}/a", b""))), tmp_path)
    assert (tmp_path / "keep.txt").read_text() == "mine"
