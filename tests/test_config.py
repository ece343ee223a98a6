"""``.github/alignbot.yml``: valid files, one message per problem naming its line, globs,
the op -> spec mapping and the JSON schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from bot.config import (
    PRESETS,
    ConfigError,
    RepoConfig,
    _Loader,
    config_schema,
    glob_match,
    load_config,
)
from checks.presets import PRESETS as ENGINE_PRESETS

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
HOSTILE = Path(__file__).parent / "fixtures" / "hostile"
VALID = ["full.yml", "minimal.yml", "torch_compile.yml"]
INVALID = ["unknown_keys.yml", "both_candidates.yml", "bad_values.yml", "duplicate_key.yml"]


def _yaml(name: str) -> object:
    """The file as data, read like load_config reads it (``1e-5`` is a float)."""
    return yaml.load((CONFIGS / name).read_text(), Loader=_Loader)  # a SafeLoader


def _errors(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(text)
    return str(info.value).splitlines()


def _fixture_errors(name: str) -> list[str]:
    return _errors((CONFIGS / name).read_text())


# --------------------------------------------------------------------------- valid files


def test_full_config_loads_every_section() -> None:
    config = load_config((CONFIGS / "full.yml").read_text())
    assert config.candidate.preset is None
    assert config.candidate.prelude == "import torch, mylib\nmylib.enable()\n"
    assert config.candidate.python == ".venv/bin/python"
    assert len(config.candidate.setup) == 2
    assert config.candidate.overrides == {"torch.nn.functional.gelu": "mylib.ops:gelu"}
    assert [m.specs for m in config.ops] == [["activations.*"],
                                            ["convolution.*", "torch.nn.functional.conv2d"]]
    assert config.specs == ["tests/alignment/*.py"]
    assert (config.draws, config.timeout_minutes) == (20, 15)
    assert config.tolerances is not None
    assert (config.tolerances.rtol, config.tolerances.atol) == (1.3e-6, 1e-5)  # 1e-5: a float
    assert config.upstream.tracking_repo == "myorg/mylib"
    assert config.trust.outside_contributors == "require-ok-to-test"
    assert config.reminders.enabled and config.reminders.timezone == "Europe/Paris"
    assert config.reminders.exempt_authors == ["dependabot", "renovate[bot]"]


def test_minimal_config_gets_the_defaults() -> None:
    config = load_config((CONFIGS / "minimal.yml").read_text())
    assert config.candidate.preset == "torch"
    assert config.ops == [] and config.specs == [] and config.tolerances is None
    assert (config.draws, config.timeout_minutes) == (20, 15)
    assert config.upstream.tracker == "pytorch/pytorch"
    assert config.trust.outside_contributors == "require-ok-to-test"
    assert not config.trust.carry_over_pushes
    assert not config.reminders.enabled


@pytest.mark.parametrize("folder", sorted(p.name for p in HOSTILE.iterdir() if p.is_dir()))
def test_the_hostile_fixture_repositories_have_valid_configs(folder: str) -> None:
    load_config((HOSTILE / folder / ".github" / "alignbot.yml").read_text())


def test_presets_match_the_engine() -> None:
    assert sorted(PRESETS) == sorted(ENGINE_PRESETS)


def test_cli_args_for_the_engine() -> None:
    config = load_config((CONFIGS / "full.yml").read_text())
    args = config.candidate.cli_args(Path("/work/repo"))
    assert args == ["--prelude", "import torch, mylib\nmylib.enable()\n",
                    "--python", "/work/repo/.venv/bin/python",
                    "--override", "torch.nn.functional.gelu=mylib.ops:gelu"]
    preset = load_config("candidate: {preset: torch, python: python3}")
    assert preset.candidate.cli_args(Path("/r")) == ["--candidate", "torch", "--python", "python3"]


# --------------------------------------------------------------------------- errors


def test_unknown_keys_are_rejected_with_their_lines_and_a_suggestion() -> None:
    assert _fixture_errors("unknown_keys.yml") == [
        ".github/alignbot.yml:3:3: candidate.prelud: unknown key `prelud`; did you mean "
        "`prelude`? (allowed here: preset, prelude, python, setup, overrides)",
        ".github/alignbot.yml:7:5: ops[0].spec: unknown key `spec`; did you mean `specs`? "
        "(allowed here: paths, specs)",
        ".github/alignbot.yml:8:1: tolerance: unknown key `tolerance`; did you mean "
        "`tolerances`? (allowed here: candidate, ops, specs, draws, timeout_minutes, "
        "tolerances, upstream, trust, reminders)",
    ]


@pytest.mark.parametrize("section", ["trust", "reminders", "upstream", "tolerances"])
def test_every_section_rejects_unknown_keys(section: str) -> None:
    text = f"candidate: {{preset: torch}}\n{section}:\n  nonsense_key: 1\n"
    error = _errors(text)[-1]  # tolerances also lacks rtol and atol (line 3, column 1)
    assert error.startswith(f".github/alignbot.yml:3:3: {section}.nonsense_key: unknown key")


def test_preset_and_prelude_together_name_the_prelude_line() -> None:
    assert _fixture_errors("both_candidates.yml") == [
        ".github/alignbot.yml:3:12: candidate.prelude: give either `preset` or `prelude`, "
        "not both"]


def test_neither_preset_nor_prelude_names_the_candidate_line() -> None:
    (error,) = _errors("draws: 3\ncandidate:\n  setup: [make]\n")
    assert error.startswith(".github/alignbot.yml:2:1: candidate: say what to check")


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


@pytest.mark.parametrize("python", ["../venv/bin/python", "bin/../../x/python",
                                    "/opt/venv/../../etc/keys/python", "..", "a\\b/python",
                                    " /opt/python"])
def test_candidate_python_that_climbs_out_or_is_no_path_names_its_line(python: str) -> None:
    (error,) = _errors(f"candidate:\n  preset: torch\n  python: {json.dumps(python)}\n")
    assert error.startswith(".github/alignbot.yml:3:11: candidate.python: ")
    assert "`..` cannot appear here" in error or "is not a path" in error


@pytest.mark.parametrize("python", [".venv/bin/python", "python3", "/opt/paddle/bin/python",
                                    "tools/..venv/python"])
def test_candidate_python_in_the_repository_on_path_or_absolute_is_accepted(
        python: str) -> None:
    """Absolute interpreters are decided by the sandbox, against the service's allow-list."""
    config = load_config(f"candidate:\n  preset: torch\n  python: {json.dumps(python)}\n")
    assert config.candidate.python == python


def test_overrides_name_the_bad_key_or_value() -> None:
    errors = _errors("candidate:\n  preset: torch\n  overrides:\n    numpy.add: m:f\n"
                     "    torch.add: nocolon\n")
    assert errors[0].startswith(".github/alignbot.yml:4:5: candidate.overrides['numpy.add']: "
                                "`numpy.add` is not a torch API name")
    assert errors[1].startswith(".github/alignbot.yml:5:16: candidate.overrides['torch.add']: "
                                "`nocolon` is not `module:attribute`")


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


def test_custom_path_in_messages() -> None:
    with pytest.raises(ConfigError) as info:
        load_config("draws: 1", path="config/alignbot.yml")
    assert str(info.value).startswith("config/alignbot.yml:1:1:")
    assert info.value.problems[0].line == 1


# --------------------------------------------------------------------------- globs


@pytest.mark.parametrize(("path", "pattern", "expected"), [
    ("mylib/ops/gelu.py", "mylib/ops/*.py", True),
    ("mylib/ops/act/gelu.py", "mylib/ops/*.py", False),  # * stays in one folder
    ("mylib/ops/act/gelu.py", "mylib/**/*.py", True),
    ("mylib/gelu.py", "mylib/**/*.py", True),  # ** may be no folder at all
    ("gelu.py", "**/*.py", True),
    ("a/b/c/gelu.py", "**/gelu.py", True),
    ("docs/a/b.md", "docs/**", True),
    ("docsx/a.md", "docs/**", False),
    ("src/conv2d.cu", "src/conv?d.cu", True),
    ("src/conv/2d.cu", "src/conv?2d.cu", False),  # ? is not a /
    ("src/a.py", "src/[ab].py", True),
    ("src/c.py", "src/[!ab].py", True),
    ("src/a.py", "src/[!ab].py", False),
    ("src/a+b.py", "src/a+b.py", True),  # regex characters are literal
    ("src/axb.py", "src/a.b.py", False),
    ("mylib/ops.py", "mylib", False),
])
def test_glob_match(path: str, pattern: str, expected: bool) -> None:
    assert glob_match(path, pattern) is expected


def _mapping() -> RepoConfig:
    return load_config("""
candidate: {preset: torch}
ops:
  - paths: ["mylib/ops/activations/*.py"]
    specs: ["activations.*"]
  - paths: ["mylib/ops/**/conv*.py", "csrc/conv/**"]
    specs: ["convolution.*", "activations.*"]
specs: ["tests/alignment/**/*.py"]
""")


def test_specs_for_changed_paths() -> None:
    config = _mapping()
    assert config.specs_for(["README.md", "docs/x.md"]) == []
    assert config.specs_for(["mylib/ops/activations/gelu.py"]) == ["activations.*"]
    assert config.specs_for(["mylib/ops/activations/sub/gelu.py"]) == []
    assert config.specs_for(["csrc/conv/kernels/a.cu", "mylib/ops/activations/gelu.py"]) == [
        "activations.*", "convolution.*"]  # each glob once, in the file's order


def test_op_files_and_spec_files() -> None:
    config = _mapping()
    changed = ["README.md", "mylib/ops/nn/conv2d.py", "mylib/ops/activations/gelu.py"]
    assert config.op_files(changed) == ["mylib/ops/nn/conv2d.py",
                                        "mylib/ops/activations/gelu.py"]
    assert config.ops[1].matches("csrc/conv/x.cu")
    repo = ["tests/alignment/b.py", "tests/alignment/deep/a.py", "tests/other.py", "x.py"]
    assert config.spec_files(repo) == ["tests/alignment/b.py", "tests/alignment/deep/a.py"]


# --------------------------------------------------------------------------- the schema


def test_schema_is_a_valid_json_schema() -> None:
    schema = config_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["candidate"]


@pytest.mark.parametrize("name", VALID)
def test_valid_configs_satisfy_the_schema(name: str) -> None:
    jsonschema.validate(_yaml(name), config_schema())


@pytest.mark.parametrize("name", ["unknown_keys.yml", "both_candidates.yml"])
def test_invalid_configs_fail_the_schema_too(name: str) -> None:
    data = _yaml(name)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, config_schema())


@pytest.mark.parametrize("name", INVALID)
def test_every_invalid_fixture_is_refused(name: str) -> None:
    assert _fixture_errors(name)
