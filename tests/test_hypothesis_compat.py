"""Draws depend on the seed and the spec only, not on what else the process loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis.internal.conjecture import providers
from imports import statements

ROOT = Path(__file__).resolve().parent.parent
# A module of the user's own (outside site-packages and tests/): Hypothesis would mine its
# literals for draws.
LITERALS = "VALUES = [" + ", ".join(f"{0.1 + i / 7:.6f}, {3 + i * 11}" for i in range(200)) + "]\n"

DRAW = """
import json, sys
sys.path.insert(0, sys.argv[2])
if sys.argv[3] == "load":
    import user_constants  # noqa: F401
from hypothesis import given, seed, settings, strategies as st, Phase
from alignbot.checks.engine import draw_programs
from alignbot.checks.spec_loading import load_file

if sys.argv[1] == "engine":
    from pathlib import Path
    spec = load_file(Path(sys.argv[4]))[0]
    out = []
    draw_programs(spec, 60, 0, lambda program, ref: out.append(program["choices"]))
else:  # Hypothesis on its own, for contrast
    out = []

    @seed(0)
    @settings(max_examples=300, database=None, phases=[Phase.generate])
    @given(st.floats(-1e6, 1e6), st.integers(-10**6, 10**6))
    def run(x, n):
        out.append([x, n])

    run()
print(json.dumps(out))
"""

SPEC = """
from alignbot.checks import autotest, random, random_tensor

@autotest(n=60, backward=False)
def scaled(torch):
    return random_tensor(shape=(2,), low=-5, high=5) * random(-1000.0, 1000.0) + random(0, 500)
"""


def _draws(tmp_path: Path, mode: str, load: str) -> list[object]:
    (tmp_path / "user_constants.py").write_text(LITERALS)
    (tmp_path / "scaled_spec.py").write_text(SPEC)
    done = subprocess.run([sys.executable, "-c", DRAW, mode, str(tmp_path), load,
                           str(tmp_path / "scaled_spec.py")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result: list[object] = json.loads(done.stdout)
    return result


def test_the_internals_this_relies_on_are_there() -> None:
    assert callable(providers._get_local_constants)
    assert isinstance(providers.Constants(), providers.Constants)
    assert hasattr(providers.CONSTANTS_CACHE, "cache")


def test_only_the_compat_module_imports_hypothesis_internals() -> None:
    """Where the internals move, one module changes (docs/ARCHITECTURE.md says so)."""
    importers = {path.relative_to(ROOT).as_posix() for path in (ROOT / "checks").rglob("*.py")
                 for target, _ in statements(path, ROOT)
                 if target == "hypothesis.internal" or target.startswith("hypothesis.internal.")}
    assert importers == {"checks/hypothesis_compat.py"}


@pytest.mark.slow
def test_loading_a_module_full_of_literals_does_not_change_the_draws(tmp_path: Path) -> None:
    # the contrast: plain Hypothesis does draw the loaded module's literals
    plain, mined = _draws(tmp_path, "plain", "skip"), _draws(tmp_path, "plain", "load")
    assert plain != mined
    # the engine's draws stay the same
    assert _draws(tmp_path, "engine", "skip") == _draws(tmp_path, "engine", "load")
