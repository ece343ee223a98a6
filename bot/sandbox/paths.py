"""What the sandbox may see: deny by default. The allow-list (``exposed_paths``,
``interpreter_prefixes``), the hidden folders (``hidden_paths``; hidden wins, ``visible``),
and the checks that refuse a path a configuration names (``candidate.python``, spec files)
when it leaves the repository and the allow-list."""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .child import _under

if TYPE_CHECKING:
    from ..config import RepoConfig
    from .containment import Containment

TMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
SECRET_DIRS = ("/run/secrets",)


def exposed_paths(containment: Containment) -> list[str]:
    """What the sandbox may read besides the system: the service's interpreters, the engine,
    its templates and the operator's ``expose`` list; never anything a pull request names."""
    from alignbot.checks.api import templates_dir

    paths = {sys.prefix, sys.base_prefix,
             os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    found = importlib.util.find_spec("alignbot.checks")
    if found and found.submodule_search_locations:
        paths.add(str(Path(next(iter(found.submodule_search_locations))).resolve()))
    paths.add(str(templates_dir().resolve()))
    paths |= {str(p) for p in containment.expose}
    secret = [os.path.realpath(str(p)) for p in (*SECRET_DIRS, *containment.hide)]
    paths |= {p for p in _linked_packages() if not any(_under(p, s) for s in secret)}
    return sorted({os.path.realpath(p) for p in paths if os.path.exists(p)})


def _linked_packages() -> set[str]:
    """Folders of installed packages on the service's import path (never the folder of the
    script it started from) that link their packages in from elsewhere, and where those links
    point: the engine imports them. Links into secret folders are left out by the caller."""
    targets = set()
    for entry in sys.path[1:]:
        if not entry or not os.path.isdir(entry):
            continue
        with os.scandir(entry) as items:
            linked = {os.path.realpath(item.path) for item in items if item.is_symlink()}
        if linked:
            targets |= {os.path.realpath(entry), *linked}
    return targets


def hidden_paths(containment: Containment) -> list[str]:
    """What the sandbox never sees: scratch folders (replaced by private ones), secret
    folders, the service user's home and the service's own ``hide`` list, as given and
    resolved (a key reached through a link hides both the link and its target)."""
    home = os.path.realpath(os.path.expanduser("~"))
    paths = [*TMP_DIRS, *SECRET_DIRS, *(str(p) for p in containment.hide)]
    if home != "/":
        paths.append(home)
    found = set()
    for path in paths:
        if os.path.lexists(path):
            found.add(os.path.realpath(path))
            if not os.path.islink(path):  # a link is covered by hiding what it points to
                found.add(os.path.abspath(path))
    found.discard("/")  # hiding the root would hide the system the sandbox runs on
    return sorted(found)


def interpreter_prefixes(containment: Containment) -> list[str]:
    """Where ``candidate.python`` may point outside the repository: the service's own
    interpreters and the operator's ``expose`` list."""
    paths = {sys.prefix, sys.base_prefix,
             os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
             *(str(p) for p in containment.expose)}
    return sorted({os.path.realpath(p) for p in paths if os.path.exists(p)})


def visible(path: str, keep: Iterable[str], hide: Iterable[str]) -> bool:
    """Whether the sandbox sees ``path``: not in a hidden folder, or re-exposed by a kept
    path strictly inside the deepest hidden folder that holds it (hidden wins a tie)."""
    hider = max((h for h in hide if _under(path, h)), key=len, default=None)
    if hider is None:
        return True
    keeper = max((k for k in keep if _under(path, k)), key=len, default=None)
    return keeper is not None and len(keeper) > len(hider) and _under(keeper, hider)


def _path_problem(repo_dir: Path, config: RepoConfig, check_args: Sequence[str],
                  containment: Containment) -> str | None:
    """Why a path the configuration names may not be used, or None: ``candidate.python``
    must stay in the repository or under an allowed interpreter folder, spec files in the
    repository; links and ``..`` are resolved first."""
    repo = os.path.realpath(repo_dir)
    problem = _python_problem(repo, config.candidate.python, containment)
    if problem:
        return problem
    for flag, value in itertools.pairwise(check_args):
        if flag == "--spec-file":
            problem = _repo_path_problem(repo, value, "spec file", [], [], [])
            if problem:
                return problem
    return None


def _python_problem(repo: str, python: str | None, containment: Containment,
                    extra_allowed: Sequence[str] = ()) -> str | None:
    if not python or "/" not in python:  # the sandbox's own, or a command on PATH
        return None
    hide = hidden_paths(containment)
    allowed = interpreter_prefixes(containment)
    keep = [*exposed_paths(containment), *extra_allowed]
    if not python.startswith("/"):
        return _repo_path_problem(repo, python, "candidate.python",
                                  [*allowed, *extra_allowed], keep, hide)
    for path in (os.path.normpath(python), _resolve(python)):
        if path is None or not any(_under(path, prefix) for prefix in allowed):
            return (f"candidate.python `{python}` is outside the repository and the "
                    "interpreter folders this service allows (ALIGNBOT_SANDBOX_INTERPRETERS)")
        if not visible(path, keep, hide):
            return (f"candidate.python `{python}` is in a folder the sandbox hides from pull "
                    "requests")
    return None


def _resolve(path: str) -> str | None:
    """``path`` with every link and ``..`` resolved, or None when that fails (a link into
    /proc/<pid>/root the service may not follow, a loop)."""
    try:
        return os.path.realpath(path, strict=True)
    except FileNotFoundError:
        try:
            return os.path.realpath(path)
        except (OSError, ValueError):
            return None
    except (OSError, ValueError):
        return None


def _repo_path_problem(repo: str, name: str, what: str, allowed: Sequence[str],
                       keep: Sequence[str], hide: Sequence[str]) -> str | None:
    """A path relative to the repository: it must stay inside, and so must a link it is
    (or passes through), unless the link leads into an allowed, visible folder."""
    if "\x00" in name:
        return f"{what} `{name!r}` is not a path"
    lexical = os.path.normpath(os.path.join(repo, name))
    if name.startswith("/") or not _under(lexical, repo):
        return f"{what} `{name}` leaves the repository"
    real = _resolve(lexical)  # links on the way count even when the file is not there yet
    if real is None:
        return f"{what} `{name}` is a link that cannot be resolved"
    if _under(real, repo):
        return None
    if any(_under(real, prefix) for prefix in allowed) and visible(real, keep, hide):
        return None
    return f"{what} `{name}` is a link that leads outside the repository"
