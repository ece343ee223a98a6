"""bot/reminders/codeowners.py: GitHub's CODEOWNERS rules."""

from __future__ import annotations

from alignbot.bot.reminders import owners_of, parse_codeowners


def test_codeowners_rules_last_match_wins() -> None:
    rules = parse_codeowners("* @everyone\n*.py @py\n/docs/ @docs dev@example.com\n"
                             "ops/* @ops\napps/ @apps\n")
    assert owners_of(rules, ["x/y.txt"]) == ["everyone"]
    assert owners_of(rules, ["a/b.py"]) == ["py"]
    assert owners_of(rules, ["docs/a/b.md"]) == ["docs"]
    assert owners_of(rules, ["ops/a.txt"]) == ["ops"]
    assert owners_of(rules, ["ops/deep/a.txt"]) == ["everyone"]
    assert owners_of(rules, ["src/apps/a.txt"]) == ["apps"]
