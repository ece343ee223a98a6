"""``bot/config/model.py``: the sections' defaults and rules, what the App asks of a
configuration (the engine's options, op files, spec globs) and the JSON schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from alignbot.bot.config import PRESETS, ConfigError, RepoConfig, config_schema, load_config
from alignbot.bot.config.loading import _Loader
from alignbot.checks.presets import PRESETS as ENGINE_PRESETS

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
HOSTILE = Path(__file__).parent / "fixtures" / "hostile"
VALID = ["full.yml", "minimal.yml", "torch_compile.yml"]


def _yaml(name: str) -> object:
    """The file as data, read like load_config reads it (``1e-5`` is a float)."""
    return yaml.load((CONFIGS / name).read_text(), Loader=_Loader)  # a SafeLoader


def _errors(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(text)
    return str(info.value).splitlines()


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
    assert config.opinfo  # the OpInfo specs the op globs match run too
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


# --------------------------------------------------------------------------- candidate rules


def test_preset_and_prelude_together_name_the_prelude_line() -> None:
    assert _errors((CONFIGS / "both_candidates.yml").read_text()) == [
        ".github/alignbot.yml:3:12: candidate.prelude: give either `preset` or `prelude`, "
        "not both"]


def test_neither_preset_nor_prelude_names_the_candidate_line() -> None:
    (error,) = _errors("draws: 3\ncandidate:\n  setup: [make]\n")
    assert error.startswith(".github/alignbot.yml:2:1: candidate: say what to check")


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



# --------------------------------------------------------------------------- op mapping


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

