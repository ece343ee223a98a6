"""The report: JSON (a contract other tools read, its shape in ``report_types.py``) and Markdown
rendered from templates/; the one cached Jinja environment per kind that every text alignbot
writes is rendered with."""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import jinja2

from . import causes, markdown
from .engine import CheckResult
from .report_types import Report

REPORT_VERSION = 1
# The engine's own documents: a local report, Python repro scripts and the upstream draft
# (Markdown that the bot later shows only inside a code block). Every other template is text
# the bot posts on GitHub, and every value it prints goes through
# :func:`alignbot.checks.markdown.finalize`: a value a template forgets to filter is defused rather
# than posted raw, and a new template is covered without anyone listing it.
ENGINE_TEMPLATES = frozenset({"report.md.j2", "repro.py.j2", "repro_reference.py.j2",
                              "upstream_issue.md.j2", "upstream_formula_repro.py.j2"})


def templates_dir() -> Path:
    """Where the templates are: ``ALIGNBOT_TEMPLATES`` when set, else the package
    ``alignbot.checks.templates`` (``templates/`` of the repository in an editable install, the
    package's own folder in a wheel), else ``templates/`` beside a source checkout."""
    override = os.environ.get("ALIGNBOT_TEMPLATES")
    if override:
        return Path(override)
    try:
        found = importlib.util.find_spec("alignbot.checks.templates")
    except ImportError:
        found = None
    if found is not None and found.submodule_search_locations:
        return Path(next(iter(found.submodule_search_locations)))
    return Path(__file__).resolve().parent.parent / "templates"


def environment(untrusted: bool = False) -> jinja2.Environment:
    """The templates, one shared environment per kind; every template but
    ``ENGINE_TEMPLATES`` prints only filtered or trusted values (``untrusted``: templates
    from strings too). Callers must not change the environment they get."""
    return _environment(untrusted, templates_dir())


@functools.cache
def _environment(untrusted: bool, folder: Path) -> jinja2.Environment:
    @jinja2.pass_context
    def finalize(context: jinja2.runtime.Context, value: Any) -> Any:
        if untrusted or context.name not in ENGINE_TEMPLATES:
            return markdown.finalize(value)
        return value

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(folder),
                             autoescape=False, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, finalize=finalize)
    env.filters["inline"] = markdown.inline
    env.filters["code"] = markdown.code
    env.filters["block"] = markdown.block
    env.filters["folded"] = markdown.folded
    env.filters["cell"] = markdown.cell
    env.filters["marker"] = markdown.marker
    env.filters["link"] = markdown.link
    env.filters["mentions"] = markdown.mentions
    env.filters["static"] = markdown.static
    return env


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def to_json(result: CheckResult, candidate_description: str) -> Report:
    findings = [_finite(f.to_json()) for f in result.findings]
    report: Report = {
        "report_version": REPORT_VERSION,
        "reference": result.reference,
        "candidate": candidate_description,
        "candidate_packages": dict(sorted(result.packages.items())),
        "seed": result.seed,
        "specs_run": len(result.specs_run),
        "specs": result.specs_run,
        "programs_run": result.programs_run,
        "complete": result.complete,
        "findings": findings,
        "causes": causes.group(findings),
        "exploration": [{"spec": e.spec, "seen": e.seen, "drawn": e.drawn, "missed": e.missed,
                         "covered": [[op, dtype] for op, dtype in e.covered]}
                        for e in result.exploration],
    }
    if not result.capabilities.full:  # a report of full PyTorch stays as it was
        report["capabilities"] = result.capabilities.to_json()
    return report


def candidate_line(candidate: str, packages: Mapping[str, str] | None = None) -> str:
    """The line of a candidate that says what it is: a preset's name, else the first
    statement of the prelude that names a package it imported other than torch (``import
    torchax``, ``torchax.enable_globally()``), else its first statement that is neither a
    docstring nor ``import torch``; at most 120 characters."""
    lines = _statements(candidate)
    others = [name for name in packages or {} if name != "torch"]
    chosen = next((line for line in lines
                   if any(re.search(rf"\b{re.escape(n)}\b", line) for n in others)), None)
    if chosen is None:
        chosen = next((line for line in lines if not _TORCH_ONLY.fullmatch(line)),
                      lines[0] if lines else candidate.strip())
    chosen = " ".join(chosen.split())
    return chosen if len(chosen) <= 120 else chosen[:119] + "\u2026"


_TORCH_ONLY = re.compile(r"import torch(?: as torch)?|from torch import .*")


def _statements(source: str) -> list[str]:
    """The first line of each top-level statement, docstrings left out; for text that is
    not Python (a preset's name), its lines."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [line.strip() for line in source.splitlines() if line.strip()]
    lines = source.splitlines()
    found = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            continue
        found.append(lines[node.lineno - 1].strip())
    return found


def packages_line(packages: Mapping[str, str]) -> str:
    """``torchax 0.0.13, torch 2.13.0``: what the candidate's prelude imported, torch last."""
    names = sorted(packages, key=lambda name: (name == "torch", name))
    return ", ".join(f"{name} {packages[name]}" for name in names)


def dumps(report: Report) -> str:
    """Byte-stable text for one report: sorted keys, no timings, a final newline."""
    return json.dumps(report, sort_keys=True, indent=2, allow_nan=False) + "\n"


def load(path: Path) -> Report:
    """A report as written (not checked beyond having findings: the engine reads its own)."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or "findings" not in data:
        raise ValueError(f"{path} is not an alignbot report (no 'findings')")
    return cast(Report, data)


def render_markdown(report: Report) -> str:
    by_kind: dict[str, int] = {}
    for finding in report["findings"]:
        by_kind[finding["kind"]] = by_kind.get(finding["kind"], 0) + finding.get("count", 1)
    explored = report.get("exploration", [])
    totals = {"specs": len(explored), "seen": sum(e["seen"] for e in explored),
              "drawn": sum(e["drawn"] for e in explored),
              "short": [e for e in explored if e["drawn"] < e["seen"]]}
    packages = report.get("candidate_packages") or {}
    grouped = causes.group(report["findings"])
    by_print = {f["fingerprint"]: f for f in report["findings"]}
    return environment().get_template("report.md.j2").render(
        report=report, by_kind=by_kind, explored=totals, causes=grouped, by_print=by_print,
        candidate=candidate_line(report["candidate"], packages),
        packages=packages_line(packages))
