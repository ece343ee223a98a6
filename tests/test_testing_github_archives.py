"""The fake GitHub's archives (bot/testing/github/archives.py) are byte-stable per commit."""

from __future__ import annotations

import gzip
import io
import tarfile
from datetime import UTC, datetime

import pytest

from alignbot.bot.testing.github.archives import Link, build_tarball

DATE = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_the_same_commit_gives_the_same_bytes_whatever_the_clock(
        monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"a.py": b"x = 1\n", "pkg/b.py": b"y = 2\n", "link": Link(b"a.py")}
    clock = iter([1_000_000.0, 2_000_000.0])
    monkeypatch.setattr(gzip.time, "time", lambda: next(clock))  # type: ignore[attr-defined]
    first, second = (build_tarball("o-r-abc1234", files, "abc1234" * 5, DATE)
                     for _ in range(2))
    assert first == second
    assert int.from_bytes(first[4:8], "little") == int(DATE.timestamp())  # gzip's MTIME
    with tarfile.open(fileobj=io.BytesIO(first), mode="r:gz") as tar:
        assert tar.pax_headers["comment"] == "abc1234" * 5
        names = tar.getnames()
        assert names == ["o-r-abc1234", "o-r-abc1234/pkg", "o-r-abc1234/a.py",
                         "o-r-abc1234/link", "o-r-abc1234/pkg/b.py"]
        assert tar.getmember("o-r-abc1234/link").linkname == "a.py"
