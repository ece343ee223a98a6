"""``bot/config/loading.py``: one message per problem, each naming the line and column where
it is written (unknown keys with a suggestion, missing keys, bad values and types, YAML
syntax, duplicate keys, alias bombs, huge files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from alignbot.bot.config import ConfigError, load_config

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
INVALID = ["unknown_keys.yml", "both_candidates.yml", "bad_values.yml", "duplicate_key.yml"]


def _errors(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(text)
    return str(info.value).splitlines()


def _fixture_errors(name: str) -> list[str]:
    return _errors((CONFIGS / name).read_text())


def test_unknown_keys_are_rejected_with_their_lines_and_a_suggestion() -> None:
    assert _fixture_errors("unknown_keys.yml") == [
        ".github/alignbot.yml:3:3: candidate.prelud: unknown key `prelud`; did you mean "
        "`prelude`? (allowed here: preset, prelude, python, setup, overrides)",
        ".github/alignbot.yml:7:5: ops[0].spec: unknown key `spec`; did you mean `specs`? "
        "(allowed here: paths, specs)",
        ".github/alignbot.yml:8:1: tolerance: unknown key `tolerance`; did you mean "
        "`tolerances`? (allowed here: candidate, ops, specs, draws, opinfo, timeout_minutes, "
        "shards, tolerances, upstream, trust, reminders, known, baseline)",
    ]


@pytest.mark.parametrize("section", ["trust", "reminders", "upstream", "tolerances"])
def test_every_section_rejects_unknown_keys(section: str) -> None:
    text = f"candidate: {{preset: torch}}\n{section}:\n  nonsense_key: 1\n"
    error = _errors(text)[-1]  # tolerances also lacks rtol and atol (line 3, column 1)
    assert error.startswith(f".github/alignbot.yml:3:3: {section}.nonsense_key: unknown key")


def test_missing_candidate_section() -> None:
    assert _errors("draws: 3\n") == [
        ".github/alignbot.yml:1:1: required key `candidate` is missing"]


def test_each_bad_value_is_one_line_naming_its_line() -> None:
    errors = _fixture_errors("bad_values.yml")
    expected = [
        ("2:11: candidate.preset:", "expected one of `torch`, `torch-compile`"),
        ("3:8: draws:", "greater than or equal to 1 (got 0)"),
        ("4:18: timeout_minutes:", "valid integer (got '15'); write it without quotes"),
        ("5:1: tolerances:", "required key `atol` is missing"),
        ("7:13: ops[0].paths[0]:", "relative to the repository root"),
        ("7:29: ops[0].paths[1]:", "`..` cannot appear"),
        ("8:13: ops[0].specs[0]:", "no commas or spaces"),
        ("9:21: upstream.tracker:", "is not an OWNER/REPO name"),
        ("10:22: reminders.weekday:", "(got 'Monday')"),
        ("10:36: reminders.hour:", "less than or equal to 23"),
        ("10:50: reminders.timezone:", "is not an IANA time zone"),
        ("10:78: reminders.maintainers[0]:", "is not a GitHub login"),
    ]
    assert len(errors) == len(expected)
    for line, (where, what) in zip(errors, expected, strict=True):
        assert line.startswith(f".github/alignbot.yml:{where} "), line
        assert what in line, line


@pytest.mark.parametrize(("value", "what"), [
    ("0", "greater than or equal to 1 (got 0)"), ("17", "less than or equal to 16 (got 17)"),
    ("-1", "greater than or equal to 1"), ('"2"', "valid integer (got '2')"),
    ("2.5", "valid integer"), ("true", "valid integer"), ("[2]", "valid integer"),
    ("1e9", "valid integer"), ("99999999999999999999999", "less than or equal to 16")])
def test_a_bad_shard_count_is_one_line(value: str, what: str) -> None:
    (error,) = _errors(f"candidate: {{preset: torch}}\nshards: {value}\n")
    assert error.startswith(".github/alignbot.yml:2:9: shards: "), error
    assert what in error, error


def test_shards_default_to_one() -> None:
    assert load_config("candidate: {preset: torch}\n").shards == 1
    assert load_config("candidate: {preset: torch}\nshards: 16\n").shards == 16


def test_wrong_types_name_the_value() -> None:
    (error,) = _errors("candidate:\n  preset: torch\n  setup: make\n")
    assert error.startswith(".github/alignbot.yml:3:10: candidate.setup: input should be a "
                            "valid list")
    (error,) = _errors("candidate: torch\n")
    assert error.startswith(".github/alignbot.yml:1:12: candidate: input should be a valid "
                            "dictionary")


def test_yaml_syntax_error_gives_the_line() -> None:
    (error,) = _fixture_errors("syntax_error.yml")
    assert error.startswith(".github/alignbot.yml:5:5: YAML syntax error:")
    assert "it started on line 4" in error
    (error,) = _errors("candidate:\n\tpreset: torch\n")
    assert error.startswith(".github/alignbot.yml:2:1: YAML syntax error:")


def test_duplicate_keys_are_errors() -> None:
    assert _fixture_errors("duplicate_key.yml") == [
        ".github/alignbot.yml:5:1: draws: key `draws` appears twice (first on line 3)"]


@pytest.mark.parametrize(("text", "what"), [
    ("", "the file is empty"),
    ("# only a comment\n", "the file is empty"),
    ("- a\n- b\n", "the file is a list, not a mapping"),
    ("just text\n", "the file is a str, not a mapping"),
])
def test_not_a_mapping(text: str, what: str) -> None:
    (error,) = _errors(text)
    assert what in error and ".github/alignbot.yml:1:1:" in error


def test_alias_bombs_and_huge_files_are_refused() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for level in range(1, 8):
        refs = ", ".join([f"*{chr(96 + level)}"] * 10)
        bomb += f"{chr(97 + level)}: &{chr(97 + level)} [{refs}]\n"
    (error,) = _errors(bomb)
    assert "expands to more than" in error
    (error,) = _errors("candidate: {preset: torch}\n" + "#" * 70_000)
    assert "larger than 64 KiB" in error


@pytest.mark.parametrize("depth", [600, 30_000])  # 30,000 flow levels: 60 KB, under the cap
def test_values_nested_deep_are_one_line_naming_where(depth: int) -> None:
    flow = "candidate:\n  preset: torch\nx: " + "[" * depth + "]" * depth + "\n"
    with pytest.raises(ConfigError, match=r"^\.github/alignbot\.yml:3:67: values nest deeper "
                                          r"than 64 levels$"):
        load_config(flow)
    block = "candidate:\n  preset: torch\nx:\n" + "".join(
        "  " * level + "- \n" for level in range(1, 100))
    with pytest.raises(ConfigError, match="values nest deeper than 64 levels"):
        load_config(block)
    # aliases nest what each anchor holds once more: 200 anchors, 200 levels
    chained = ["candidate:", "  preset: torch", "a0: &a0 [1]"] + [
        f"a{n}: &a{n} [*a{n - 1}]" for n in range(1, 200)]
    with pytest.raises(ConfigError, match="values nest deeper than 64 levels"):
        load_config("\n".join(chained))


def test_custom_path_in_messages() -> None:
    with pytest.raises(ConfigError) as info:
        load_config("draws: 1", path="config/alignbot.yml")
    assert str(info.value).startswith("config/alignbot.yml:1:1:")
    assert info.value.problems[0].line == 1


@pytest.mark.parametrize("name", INVALID)
def test_every_invalid_fixture_is_refused(name: str) -> None:
    assert _fixture_errors(name)
