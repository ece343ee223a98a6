"""Choice points: the places in a spec where a draw picks one of a few alternatives.

A ``oneof`` (and ``x | nothing()``), a ``random_bool``, a ``random_dtype``, a library
``choose`` and the edge options of ``random_tensor`` each pick one alternative of a known list.
Specs create their generators lazily, inside the spec function, on every draw and sometimes
only on some branches, so a choice point is not an object that lives from draw to draw: it is
named by where its generator was created (file and line, the first frame outside the DSL) and
by how many times that place has already chosen in the same draw (its occurrence). The same
name in two draws is the same option of the spec, which is what lets :mod:`alignbot.checks.explore`
count which alternatives were drawn and steer the next draws to the ones that were not.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from types import FrameType

# Frames in these files are the DSL's own: a site is the first frame outside them.
_INTERNAL_FILES: set[str] = set()


def internal(path: str) -> None:
    """Treat frames of this file as part of the DSL (a helper such as ``choose``)."""
    _INTERNAL_FILES.add(path)


internal(os.path.join(os.path.dirname(os.path.abspath(__file__)), "dsl.py"))
internal(os.path.abspath(__file__))


@dataclass(frozen=True, order=True)
class Site:
    """Where a choice point's generator was created, and what kind of choice it makes."""

    file: str
    line: int
    kind: str

    def label(self, occurrence: int) -> str:
        where = f"{os.path.basename(self.file)}:{self.line}"
        return f"{where}#{occurrence + 1}" if occurrence else where


def site_here(kind: str) -> Site:
    """The site of a generator being created now: the first caller outside the DSL."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename in _INTERNAL_FILES:
        frame = frame.f_back
    if frame is None:  # created from the DSL alone: no spec frame to name it by
        return Site("<dsl>", 0, kind)
    return Site(frame.f_code.co_filename, frame.f_lineno, kind)


Key = tuple[Site, int]  # a site and its occurrence within one draw


@dataclass(frozen=True)
class ChoicePoint:
    """One choice a draw made: where, which occurrence, its alternatives' names, the pick."""

    site: Site
    occurrence: int
    alternatives: tuple[str, ...]
    picked: int
    position: int  # of its choice in the draw's choices

    @property
    def key(self) -> Key:
        return (self.site, self.occurrence)

    def label(self, alternative: int) -> str:
        """``reductions.py:42 oneof[2]``: short, and made only of a file name, numbers and
        the alternative's name."""
        text = (f"{self.site.label(self.occurrence)} "
                f"{self.site.kind}[{self.alternatives[alternative]}]")
        return _UNSAFE.sub("_", text)[:MAX_LABEL]


# A label may name a spec file of an untrusted repository: nothing in it can format Markdown.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:#\[\] -]")
MAX_LABEL = 120
