"""The Markdown filters (checks/markdown.py): untrusted text cannot ping, cross-reference, link,
open HTML, hide a marker, close a fence early or start a block; the bot's own markers, links
and mentions pass only in their exact shapes."""

from __future__ import annotations

import pytest

from alignbot.checks.markdown import (
    ZWSP,
    Trusted,
    block,
    cell,
    code,
    defuse,
    finalize,
    inline,
    link,
    marker,
    mentions,
    no_comment,
    static,
    text,
    visible,
)


def test_visible_drops_bidi_and_zero_width_characters_and_nul() -> None:
    assert visible("a\u202eb\u200bc\ufeffd\u2066e") == "abcde"
    assert visible("x\0y") == "x\ufffdy"
    assert visible("plain é ü") == "plain é ü"


def test_no_comment_breaks_every_html_comment_opening() -> None:
    assert no_comment("<!-- alignbot:x -->") == f"<{ZWSP}!-- alignbot:x -->"
    assert "<!-" not in no_comment("a <!- b <!--")


def test_defuse_stops_mentions_and_cross_references() -> None:
    assert defuse("@octocat and @org/team") == f"@{ZWSP}octocat and @{ZWSP}org/team"
    assert defuse("fixes #12, GH-7 and gh-8") == f"fixes #{ZWSP}12, GH{ZWSP}-7 and gh{ZWSP}-8"
    # not references: an e-mail's @ before no word character, an HTML entity, a word-#
    assert defuse("a@ b &#35; c#1 x-GH-2") == "a@ b &#35; c#1 x-GH-2"


def test_text_escapes_specials_folds_lines_and_breaks_links() -> None:
    assert text("*bold* `x` [a](b) <b>|") == r"\*bold\* \`x\` \[a\](b) \<b\>\|"
    assert text("one\r\ntwo\nthree\u2028four") == "one two three four"
    assert text("see https://x.test and www.x.test") == \
        f"see https:{ZWSP}//x.test and www{ZWSP}.x.test"
    assert isinstance(text("x"), Trusted)
    trusted = Trusted("**mine**")
    assert text(trusted) is trusted


def test_inline_cuts_long_text_and_cannot_start_a_block() -> None:
    assert inline("a   b\n c") == "a b c"
    cut = inline("x" * 400, limit=10)
    assert cut == "x" * 9 + "…"
    assert inline("# title") == r"\# title"
    assert inline("> quote") == r"\> quote"
    assert inline("- item") == r"\- item"
    assert inline("1. first") == r"1\. first"
    assert inline("12) twelfth") == r"12\) twelfth"
    assert inline("a # b") == "a # b"


def test_code_takes_a_fence_longer_than_any_backtick_run_inside() -> None:
    assert code("x") == "`x`"
    assert code("a `b` c") == "``a `b` c``"
    assert code("```") == "```` ``` ````"  # padded: the body starts with a backtick
    assert code("") == "`  `"  # never an empty span
    assert code("a\nb") == "`a b`"


def test_a_block_cannot_be_closed_by_its_text() -> None:
    assert block("x = 1\n", "python") == "```python\nx = 1\n```"
    body = "a\n```\nb\n  ~~~~\n"
    fenced = block(body)
    assert fenced.startswith("`````\n") and fenced.endswith("\n`````")
    assert block("x", "py;<script>") == "```pyscript\nx\n```"  # the info string: word chars
    assert block("a\r\nb") == "```\na\nb\n```"


def test_a_cell_escapes_every_pipe() -> None:
    assert cell("a | b") == r"a \| b"
    assert cell(code("a|b")) == r"`a\|b`"  # GitHub splits cells even inside code spans
    assert cell(Trusted("x\n y")) == "x y"


def test_a_marker_is_the_bots_own_shape_or_refused() -> None:
    assert marker("<!-- alignbot:comment pr=12 -->") == "<!-- alignbot:comment pr=12 -->"
    assert marker("") == ""
    for bad in ("<!-- other:x -->", "<!-- alignbot:a -- b -->", "<!-- alignbot:x --> y",
                "<!-- alignbot:<b> -->"):
        with pytest.raises(ValueError):
            marker(bad)


def test_a_link_is_https_without_anything_that_breaks_out() -> None:
    url = "https://github.com/o/r/issues/3?x=1#c"
    assert link(url) == url
    assert link("https://h.test:8443/p") == "https://h.test:8443/p"
    for bad in ("http://github.com", "https://x.test/a b", "https://x.test/a)(", "javascript:1",
                "https://x.test/<a>"):
        assert link(bad) == "#", bad


def test_mentions_are_exact_logins_or_teams() -> None:
    assert mentions(["@octocat", "@org/team-a"]) == "@octocat @org/team-a"
    assert mentions([]) == ""
    for bad in ("octocat", "@-x", "@a--b", "@a b", "@" + "a" * 40, "@x/"):
        with pytest.raises(ValueError):
            mentions([bad])


def test_static_trusts_a_macros_output() -> None:
    assert static("<b>@x</b>") == "<b>@x</b>" and isinstance(static("y"), Trusted)


def test_finalize_prints_trusted_text_numbers_and_defused_strings_only() -> None:
    mine = Trusted("<b>ok</b>")
    assert finalize(mine) is mine
    assert finalize(3) == "3" and finalize(0.5) == "0.5"
    assert finalize("@x *y*") == f"@{ZWSP}x \\*y\\*"
    for wrong in (True, None, ["a"], {"a": 1}):
        with pytest.raises(TypeError):
            finalize(wrong)
