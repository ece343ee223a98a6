"""``bot/config/globs.py``: repository path globs and the glob fields of the configuration."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from alignbot.bot.config.globs import PathGlob, SpecGlob, glob_match


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

@pytest.mark.parametrize(("value", "message"), [
    ("", "cannot be empty"),
    ("/abs/path.py", "relative to the repository root"),
    ("src\\ops.py", "relative to the repository root"),
    ("src/../x.py", "`..` cannot appear"),
])
def test_path_glob_refuses_what_is_no_repository_path(value: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TypeAdapter(PathGlob).validate_python(value)


def test_path_glob_takes_relative_globs() -> None:
    assert TypeAdapter(PathGlob).validate_python("src/**/..x/*.py") == "src/**/..x/*.py"


@pytest.mark.parametrize("value", ["", "a.*,b.*", "torch.add torch.sub", "\t"])
def test_spec_glob_is_one_name_or_pattern(value: str) -> None:
    with pytest.raises(ValidationError, match="no commas or spaces"):
        TypeAdapter(SpecGlob).validate_python(value)
    assert TypeAdapter(SpecGlob).validate_python("activations.*") == "activations.*"
