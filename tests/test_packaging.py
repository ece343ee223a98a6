"""The built wheel works outside the source tree: with the App's extra and with the engine alone.

Each fresh environment is a ``venv`` without pip whose only third-party packages are the
wheel (installed by pip into it) and the distributions its own metadata requires, taken from
this interpreter's site-packages through a folder of links: torch is not installed again, and
neither this worktree nor its editable install can be imported there."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "checks", "bot", "templates", "examples")
ENGINE_ONLY_MISSING = ("fastapi", "sqlalchemy", "github", "pydantic_settings", "uvicorn")
BREAK_RELU = "import torch; torch.relu = lambda x: x + 1"
SPEC = '''from alignbot.checks import autotest, random_tensor


@autotest(n=1, ops=["torch.relu"])
def relu(torch):
    return torch.relu(random_tensor(ndim=1))
'''


# ------------------------------------------------------------------------ the engine alone


def test_no_module_under_checks_imports_the_app() -> None:
    offenders = []
    for path in sorted((ROOT / "checks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"
                          for name in names
                          if name == "alignbot.bot" or name.startswith("alignbot.bot.")]
    assert not offenders, "\n".join(offenders)


def test_the_app_extra_brings_the_postgresql_driver() -> None:
    # compose.yaml and every deployment of several processes run on PostgreSQL
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for extra in ("app", "postgres"):
        names = {canonicalize_name(Requirement(line).name) for line in extras[extra]}
        assert "psycopg" in names, extra


# ------------------------------------------------------------------------------- the wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built by this interpreter's pip from a copy of the sources; what the build
    backend said is in ``build.log`` beside ``dist/``."""
    top = tmp_path_factory.mktemp("wheel")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, top / "src" / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            (top / "src").mkdir(exist_ok=True)
            shutil.copy(source, top / "src" / name)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--verbose", "--no-deps",
                            "--no-build-isolation", "--wheel-dir", str(top / "dist"),
                            str(top / "src")], capture_output=True, text=True, timeout=120)
    (top / "build.log").write_text(build.stdout + build.stderr)
    assert build.returncode == 0, build.stderr[-3000:]
    (built,) = (top / "dist").glob("alignbot-*.whl")
    return built


def test_the_wheel_builds_without_a_setuptools_warning(wheel: Path) -> None:
    # e.g. "Package 'alignbot.bot.examples.fastops' is absent from the `packages` configuration",
    # some 45 lines at every build and editable install
    log = (wheel.parent.parent / "build.log").read_text()
    assert "running bdist_wheel" in log  # the backend's own lines are there to be read
    warned = [line.strip() for line in log.splitlines()
              if re.search(r"SetuptoolsDeprecationWarning|SetuptoolsWarning|_Warning:|"
                           r"BuildBackendWarning|is absent from the `packages`", line)]
    assert not warned, "\n".join(warned)


def test_the_wheel_holds_every_package_the_templates_and_the_markers(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = {str(p.parent.relative_to(ROOT)) for top in ("checks", "bot")
                for p in (ROOT / top).rglob("__init__.py")}
    missing = sorted("alignbot." + p.replace("/", ".") for p in packages
                     if f"alignbot/{p}/__init__.py" not in names)
    assert not missing, f"add {missing} to [tool.setuptools] packages in pyproject.toml"
    templates = {p.name for p in (ROOT / "templates").glob("*.j2")}
    assert templates and all(f"alignbot/checks/templates/{t}" in names for t in templates)
    assert {"alignbot/checks/py.typed", "alignbot/bot/py.typed"} <= names
    # what the demo and the GitHub test server read at run time
    assert {"alignbot/bot/examples/fastops/fastops.py",
            "alignbot/bot/examples/fastops/.github/alignbot.yml",
            "alignbot/bot/examples/pull-request/fastops.py",
            "alignbot/bot/testing/github/openapi-subset.json"} <= names
    # one import name: nothing but alignbot/ and the distribution's metadata at the top
    tops = {n.partition("/")[0] for n in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"alignbot"}, tops


# --------------------------------------------------------------------- fresh environments


def _distribution(name: str) -> metadata.Distribution | None:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


def _closure(requirements: list[str], extras: set[str]) -> list[metadata.Distribution]:
    """The installed distributions ``requirements`` (Requires-Dist lines of a package
    installed with ``extras``) pull in, transitively, markers evaluated here."""
    found: dict[str, metadata.Distribution] = {}
    todo = [(Requirement(line), extras) for line in requirements]
    while todo:
        requirement, wanted = todo.pop()
        marker = requirement.marker
        if marker is not None and not any(marker.evaluate({"extra": e})
                                          for e in wanted | {""}):
            continue
        name = canonicalize_name(requirement.name)
        dist = _distribution(name)
        if dist is None:
            continue  # an optional dependency not installed here (e.g. on another platform)
        key = f"{name}[{','.join(sorted(requirement.extras))}]"
        if key in found:
            continue
        found[key] = dist
        todo += [(Requirement(line), set(requirement.extras)) for line in dist.requires or []]
    unique = {canonicalize_name(d.metadata["Name"]): d for d in found.values()}
    return list(unique.values())


def _link_distributions(dists: list[metadata.Distribution], folder: Path) -> None:
    """A folder holding links to these distributions' top-level files and nothing else."""
    folder.mkdir()
    for dist in dists:
        base = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or []}
        for top in sorted(tops - {"..", "__pycache__"}):
            if (base / top).exists() and not (folder / top).exists():
                (folder / top).symlink_to(base / top)


def _wheel_requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        text = archive.read(name).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines()
            if line.startswith("Requires-Dist:")]


class Env:
    """A fresh virtual environment with the wheel and its dependencies, run from ``work``."""

    def __init__(self, top: Path, wheel: Path, extras: set[str], also: tuple[str, ...] = ()
                 ) -> None:
        self.top, self.work = top, top / "work"
        self.work.mkdir(parents=True)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(top / "venv")],
                       check=True, timeout=60)
        self.bin = top / "venv" / "bin"
        self.site = site = Path(subprocess.run(
            [str(self.bin / "python"), "-c", "import sysconfig; print(sysconfig.get_path("
             "'purelib'))"], check=True, capture_output=True, text=True).stdout.strip())
        deps = _closure([*_wheel_requirements(wheel), "torch", *also], extras)
        assert not any(canonicalize_name(d.metadata["Name"]) == "alignbot" for d in deps)
        _link_distributions(deps, top / "deps")
        (site / "alignbot-deps.pth").write_text(f"{top / 'deps'}\n")
        subprocess.run([sys.executable, "-m", "pip", "--python", str(self.bin / "python"),
                        "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                       check=True, capture_output=True, timeout=120)
        self.environ = {k: v for k, v in os.environ.items()
                        if not k.startswith(("PYTHON", "VIRTUAL_ENV", "ALIGNBOT_"))}
        self.environ["PATH"] = f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), cwd=self.work, env=self.environ, capture_output=True,
                              text=True, timeout=300)

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.bin / "python"), "-c", code)


@pytest.fixture(scope="module")
def app_env(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Env:
    return Env(tmp_path_factory.mktemp("app"), wheel, {"app"})


@pytest.fixture(scope="module")
def engine_env(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Env:
    return Env(tmp_path_factory.mktemp("engine"), wheel, set())


@pytest.fixture(scope="module")
def project_env(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Env:
    """A team's environment: alignbot's engine and pytest, nothing of the App."""
    return Env(tmp_path_factory.mktemp("project"), wheel, set(), also=("pytest",))


def _assert_isolated(env: Env) -> None:
    """The packages come from the fresh environment; the sources are nowhere on the path."""
    proc = env.python("import json, sys, alignbot.checks, alignbot.bot, "
                      "alignbot.checks.report as r; "
                      "print(json.dumps([alignbot.checks.__file__, alignbot.bot.__file__, "
                      "str(r.templates_dir()), sys.path]))")
    assert proc.returncode == 0, proc.stderr
    checks_file, bot_file, templates, path = json.loads(proc.stdout)
    site = str(env.top / "venv")
    assert checks_file.startswith(site) and bot_file.startswith(site), (checks_file, bot_file)
    assert templates.startswith(site), templates
    assert not any(p.startswith(str(ROOT)) for p in path if p), path
    probe = env.python("import importlib.util as u; print(u.find_spec('tests'), "
                       "u.find_spec('templates'))")
    assert probe.stdout.split() == ["None", "None"], probe.stdout


@pytest.mark.slow
def test_the_wheel_checks_and_prints_a_repro_outside_the_sources(app_env: Env) -> None:
    _assert_isolated(app_env)
    # one job, two draws: that the installed engine checks is the claim, not how many draws
    clean = app_env.run("alignbot", "check", "--candidate", "torch", "--ops", "relu",
                        "--n", "2", "--jobs", "1", "--no-opinfo", "--no-progress")
    assert clean.returncode == 0, clean.stderr
    assert "0 findings" in clean.stdout

    (app_env.work / "spec.py").write_text(SPEC)
    found = app_env.run("alignbot", "check", "--prelude", BREAK_RELU, "--spec-file", "spec.py",
                        "--no-progress", "--json", "r.json", "--markdown", "r.md")
    assert found.returncode == 1, found.stderr
    (finding,) = json.loads((app_env.work / "r.json").read_text())["findings"]
    assert finding["op"] == "torch.relu" and finding["repro_verified"], finding
    assert "torch.relu" in (app_env.work / "r.md").read_text()
    repro = app_env.run("alignbot", "repro", "r.json", finding["fingerprint"])
    assert repro.returncode == 0, repro.stderr
    assert repro.stdout == finding["repro"] and "import torch" in repro.stdout

    # the App's strict templates ship too, and its commands run
    posted = app_env.python("from alignbot.checks.report import environment; "
                            "print(environment().get_template('pr_comment.md.j2').name)")
    assert posted.stdout.strip() == "pr_comment.md.j2", posted.stderr
    schema = app_env.run("alignbot", "config-schema")
    assert schema.returncode == 0 and json.loads(schema.stdout)["type"] == "object"


@pytest.mark.slow
def test_the_engine_alone_checks_and_app_commands_say_what_to_install(engine_env: Env) -> None:
    _assert_isolated(engine_env)
    for module in ENGINE_ONLY_MISSING:
        probe = engine_env.python(f"import {module}")
        assert probe.returncode != 0, f"{module} is installed with the engine alone"
    # the OpInfo specs come with the base install: PyTorch's database is read by default
    clean = engine_env.run("alignbot", "check", "--candidate", "torch", "--ops", "relu",
                           "--n", "2", "--jobs", "1", "--no-progress", "--json", "relu.json")
    assert clean.returncode == 0, clean.stderr
    assert "0 findings" in clean.stdout
    ran = json.loads((engine_env.work / "relu.json").read_text())["specs"]
    assert "activations.relu" in ran and "opinfo.nn.functional.relu" in ran, ran
    # two workers: each a fresh interpreter of the installed engine, with its own candidate
    parallel = engine_env.run("alignbot", "check", "--candidate", "torch", "--ops",
                              "relu,gelu", "--no-opinfo", "--n", "2", "--jobs", "2",
                              "--no-progress")
    assert parallel.returncode == 0, parallel.stderr
    assert "3 specs, 6 programs" in parallel.stdout and "0 findings" in parallel.stdout
    listed = engine_env.run("alignbot", "specs", "--no-opinfo", "--ops", "relu")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].split()[:3] == ["activations.relu", "DSL",
                                                         "float32,float64"]
    for command in (["serve"], ["serve", "--port", "8080"], ["config-schema"],
                    ["remind-sweep"], ["demo"]):
        proc = engine_env.run("alignbot", *command)
        assert proc.returncode == 2, (command, proc.stderr)
        assert proc.stderr.startswith(f"alignbot: error: alignbot {command[0]} needs the "
                                      "GitHub App's dependencies")
        assert proc.stderr.endswith(": pip install 'alignbot[app]'\n"), proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    usage = engine_env.run("alignbot", "frobnicate")
    assert usage.returncode == 2 and "invalid choice" in usage.stderr


@pytest.mark.slow
def test_the_wheel_runs_the_demo_outside_the_sources(app_env: Env) -> None:
    probe = app_env.python("import alignbot.bot.testing.github as g, alignbot.bot.examples as e; "
                           "print(g.__file__); print(e.__file__)")
    assert probe.returncode == 0, probe.stderr
    assert all(line.startswith(str(app_env.top)) for line in probe.stdout.split()), probe.stdout
    # the sandbox exposes the environment whole, its linked packages and their targets
    demo = app_env.run("alignbot", "demo")
    assert demo.returncode == 0, demo.stderr[-3000:]
    # the planted softplus backward bug: how many findings it gives (the functional call,
    # the module) depends on the draws; that it is found, at its op, does not
    for line in ("webhook pull_request.opened -> 202",
                 "check run 'alignbot / op alignment': failure — ",
                 "grad-mismatch at `torch.nn.functional.softplus`",
                 "the comment by alignbot[bot]", "Minimized repro: verified"):
        assert line in demo.stdout, demo.stdout[-2000:]


MY_TESTS = '''from bot import NAME
from checks import LIMIT
from checks.rules import under_limit


def test_my_own_packages() -> None:
    assert NAME == "mybot" and LIMIT == 3 and under_limit(2)
'''


@pytest.mark.slow
def test_a_project_with_its_own_checks_and_bot_folders_runs_its_tests_and_the_plugin(
        project_env: Env) -> None:
    """alignbot installs one import name: a project whose own packages are called ``checks``
    and ``bot`` (common names) keeps importing them, under pytest with the plugin loaded."""
    env = project_env
    assert {p.name for p in env.site.iterdir()} & {"checks", "bot"} == set()
    assert (env.site / "alignbot" / "checks" / "pytest_plugin.py").is_file()
    assert not (env.site / "alignbot" / "__init__.py").exists()  # a namespace, nothing else
    for package, source in (("checks", "LIMIT = 3\n"), ("bot", "NAME = 'mybot'\n")):
        (env.work / package).mkdir()
        (env.work / package / "__init__.py").write_text(source)
    (env.work / "checks" / "rules.py").write_text("def under_limit(n: int) -> bool:\n"
                                                  "    return n < 3\n")
    (env.work / "tests").mkdir()
    (env.work / "tests" / "test_mine.py").write_text(MY_TESTS)
    python = str(env.bin / "python")
    own = env.run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests")
    assert own.returncode == 0 and "1 passed" in own.stdout, own.stdout + own.stderr

    # the plugin, from the same project: a spec file as tests, on a candidate that breaks
    # relu (the spec fails with its repro) and on torch itself (it passes)
    (env.work / "align_relu.py").write_text(SPEC)
    broken = env.run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                     f"--alignbot-prelude={BREAK_RELU}", "align_relu.py", "tests")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "1 failed, 1 passed" in broken.stdout and "torch.relu" in broken.stdout
    clean = env.run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "--alignbot-candidate=torch", "align_relu.py", "tests")
    assert clean.returncode == 0 and "2 passed" in clean.stdout, clean.stdout + clean.stderr
