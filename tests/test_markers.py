"""bot/markers.py: the app's marked comments are found by author and marker position only."""

from __future__ import annotations

import re

from alignbot.bot.markers import find_marked, first_marked, marker_at_start

BOT = "alignbot[bot]"
MARKER = "<!-- alignbot:sticky-comment -->"


def comment(login: str, body: str | None, id_: int = 1) -> dict[str, object]:
    return {"id": id_, "user": {"login": login}, "body": body}


def test_only_the_apps_comments_that_start_with_the_marker() -> None:
    comments = [comment("mallory", MARKER + "\nfake", 1),
                comment(BOT, f"`/align {MARKER}`: refused", 2),
                comment(BOT, " " + MARKER, 3), comment(BOT, None, 4),
                comment(BOT, MARKER + "\nthe real one", 5)]
    found = first_marked(comments, BOT, MARKER)
    assert found is not None and found["id"] == 5
    assert [c["id"] for c, _ in find_marked(comments, "ALIGNBOT[bot]", MARKER)] == [5]
    assert first_marked(comments, "", MARKER) is None


def test_a_pattern_matches_at_the_start_only() -> None:
    pattern = re.compile(r"<!-- alignbot:reminder period=(\S+) -->")
    assert marker_at_start("<!-- alignbot:reminder period=2026-W01 -->\nhi", pattern)
    assert marker_at_start("quote: <!-- alignbot:reminder period=2026-W01 -->", pattern) is None
    comments = [comment(BOT, "<!-- alignbot:reminder period=2026-W02 -->")]
    ((_, match),) = find_marked(comments, BOT, pattern)
    assert match.group(1) == "2026-W02"
