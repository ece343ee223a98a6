"""Who runs a pull request's code and what it may see: the service's side of the sandbox,
read by the plan, the paths it exposes and hides, and the workspace."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Mode = Literal["auto", "uid", "userns", "none"]


@dataclass(frozen=True)
class Containment:
    """Who runs the pull request's code and what it can see.

    ``mode``: ``uid`` (the service is root: drop to a dedicated uid), ``userns`` (not root:
    a user namespace, secrets hidden by mounts), ``none`` (rlimits and environment only:
    refused unless ``allow_unisolated``), ``auto`` (``uid`` as root, else ``userns``).
    ``hide``: more secret paths (the folders of the app's key and of its database) to hide
    under empty mounts; ``expose``: the operator's allow-list, folders the sandbox may read
    and ``candidate.python`` may name (interpreters installed for candidates). Both come
    from the service, never from a pull request; ``base_dir``: where work folders go;
    ``bwrap``: the bubblewrap command that makes the namespaces (None: never use it);
    ``namespaces=False``: none at all (the uid, Landlock and seccomp only)."""

    mode: Mode = "auto"
    namespaces: bool = True
    uid: int | None = None
    hide: tuple[Path, ...] = ()
    expose: tuple[Path, ...] = ()
    base_dir: Path | None = None
    allow_unisolated: bool = False
    bwrap: str | None = "bwrap"
