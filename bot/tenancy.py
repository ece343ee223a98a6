"""Which repositories a piece of work may touch: the one rule for every read and write that
names a repository, so that one tenant (an installation of the App, on one account) never
writes into another's repositories nor sees another's data.

Work is always done for a ``Tenant``: the installation and the repository a webhook came
from. ``authorize(tenant, target, access)`` answers a ``Grant`` (the name to use, and the
installation whose token to use: always the tenant's own) or a ``NotAllowed``:

- ``Access.READ``: read ``target`` through GitHub (an upstream issue the weekly watch
  reads). Any well-formed name; GitHub shows the tenant's token only what that installation
  may see, and no other installation's token is ever used.
- ``Access.SHOW``: data the App itself stored about ``target`` (a watched item's repository,
  the pull request it is for) is shown to the tenant only when ``target`` has the tenant's
  owner. Owner names compare case-insensitively, as GitHub's do.
- ``Access.WRITE``: the App writes there (an issue, a digest). Besides the owner as written,
  GitHub is asked: the name is followed to where the repository is now (a rename or a
  transfer into another account redirects), and that repository must have the tenant's
  owner and be held by the tenant's installation (a removed installation holds nothing).

A person reading the App's own pages (the status pages) is no tenant: ``authorize_viewer``
answers which installation's stored data a page of ``target`` may show (the one GitHub says
holds it now, never another's), a public repository's to anyone, a private one's only to a
signed-in user GitHub lets read it (asked with the user's own token): an anonymous visitor
is sent to sign in (``Denial.LOGIN``), a user without access gets what an unknown
repository gets (``Denial.NOT_INSTALLED``), so the page does not tell that it exists.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

log = logging.getLogger(__name__)

# GitHub's account and repository names: a login, and a name of letters, digits, ``.``,
# ``_``, ``-`` (not ``.`` or ``..``). Nothing else: no path, query or fragment after it.
_FULL_NAME = re.compile(r"^([A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))/([A-Za-z0-9_.-]{1,100})$")


class Access(StrEnum):
    READ = "read"
    SHOW = "show"
    WRITE = "write"


class Denial(StrEnum):
    """Why a repository is refused (the templates word each one)."""

    MALFORMED = "malformed"  # not OWNER/NAME
    FOREIGN = "foreign"  # another account's, as written or where GitHub says it is now
    NOT_INSTALLED = "not_installed"  # not held by the tenant's installation, or not seen
    LOGIN = "login"  # a private repository's page, asked for by no one signed in


@dataclass(frozen=True)
class Tenant:
    """Whom work is done for: the installation a webhook came from, and its repository."""

    installation_id: int
    repo: str  # owner/name

    @property
    def owner(self) -> str:
        return self.repo.partition("/")[0]


@dataclass(frozen=True)
class Grant:
    repo: str  # the name to use: where GitHub says the repository is (for a write)
    installation_id: int  # whose token to use: the tenant's, always


@dataclass(frozen=True)
class NotAllowed:
    target: str
    denial: Denial

    def __str__(self) -> str:
        what = {Denial.MALFORMED: "is not a repository name (OWNER/NAME)",
                Denial.FOREIGN: "belongs to another account",
                Denial.NOT_INSTALLED: "is not a repository of this installation",
                Denial.LOGIN: "needs a GitHub login"}[self.denial]
        return f"{self.target} {what}"


class Directory(Protocol):
    """What ``authorize`` asks GitHub before a write (``alignbot.bot.github.GitHubApp`` answers)."""

    def repo_full_name(self, installation_id: int, full_name: str) -> str | None:
        """Where ``full_name`` is now (GitHub follows a rename or a transfer), as the
        installation's token sees it; None when it sees nothing there."""
        ...

    def repo_installation(self, full_name: str) -> int | None:
        """The id of the App's installation that holds ``full_name``; None when none."""
        ...


@dataclass(frozen=True)
class Held:
    """A repository as GitHub sees it now: its name, the installation holding it, whether
    it is private."""

    repo: str
    installation_id: int
    private: bool


@dataclass(frozen=True)
class Viewer:
    """Who reads a page: a GitHub login and its user token, or no one (both None)."""

    login: str | None = None
    token: str | None = field(default=None, repr=False)


class ViewerDirectory(Protocol):
    """What ``authorize_viewer`` asks GitHub (``alignbot.bot.status.access.GitHubViewers``
    answers)."""

    def held(self, full_name: str) -> Held | None:
        """Where ``full_name`` is now and which of the App's installations holds it; None
        when none does."""
        ...

    def can_read(self, token: str, full_name: str) -> bool:
        """Whether the user of ``token`` may read ``full_name`` (GitHub answers for them)."""
        ...


def parse_full_name(text: str) -> tuple[str, str] | None:
    """``(owner, name)`` of an ``OWNER/NAME`` and nothing more, or None."""
    found = _FULL_NAME.match(text.strip()) if isinstance(text, str) else None
    if found is None or found[2] in (".", ".."):
        return None
    return found[1], found[2]


def same_owner(a: str, b: str) -> bool:
    """Whether two ``owner/name`` have one owner (GitHub's logins ignore case)."""
    return a.partition("/")[0].casefold() == b.partition("/")[0].casefold()


def authorize(tenant: Tenant, target: str, access: Access,
              github: Directory | None = None) -> Grant | NotAllowed:
    """The one rule (see the module docstring); ``github`` is needed for ``Access.WRITE``."""
    parsed = parse_full_name(target)
    if parsed is None:
        return _refuse(tenant, target, access, Denial.MALFORMED)
    name = "/".join(parsed)
    if access is Access.READ:
        return Grant(name, tenant.installation_id)
    if not same_owner(name, tenant.repo):
        return _refuse(tenant, name, access, Denial.FOREIGN)
    if access is Access.SHOW:
        return Grant(name, tenant.installation_id)
    if github is None:
        raise ValueError("authorizing a write needs GitHub (a Directory)")
    now = github.repo_full_name(tenant.installation_id, name)
    if now is None:
        return _refuse(tenant, name, access, Denial.NOT_INSTALLED)
    if not same_owner(now, tenant.repo):  # renamed or transferred into another account
        return _refuse(tenant, name, access, Denial.FOREIGN)
    if github.repo_installation(now) != tenant.installation_id:
        return _refuse(tenant, name, access, Denial.NOT_INSTALLED)
    return Grant(now, tenant.installation_id)


def authorize_viewer(viewer: Viewer, target: str, github: ViewerDirectory
                     ) -> Grant | NotAllowed:
    """The one rule for pages (see the module docstring): a ``Grant`` names the repository
    as GitHub does and the only installation whose stored data may be shown for it."""
    parsed = parse_full_name(target)
    if parsed is None:
        return _refuse_viewer(viewer, target, Denial.MALFORMED)
    held = github.held("/".join(parsed))
    if held is None:
        return _refuse_viewer(viewer, "/".join(parsed), Denial.NOT_INSTALLED)
    if held.private:
        if viewer.token is None:
            return _refuse_viewer(viewer, held.repo, Denial.LOGIN)
        if not github.can_read(viewer.token, held.repo):
            return _refuse_viewer(viewer, held.repo, Denial.NOT_INSTALLED)
    return Grant(held.repo, held.installation_id)


def _refuse_viewer(viewer: Viewer, target: str, denial: Denial) -> NotAllowed:
    log.info("page of %r refused to %s: %s", target[:200], viewer.login or "anonymous",
             denial.value)
    return NotAllowed(target[:200], denial)


def _refuse(tenant: Tenant, target: str, access: Access, denial: Denial) -> NotAllowed:
    log.info("%s (installation %d): %s of %r refused: %s", tenant.repo,
             tenant.installation_id, access.value, target[:200], denial.value)
    return NotAllowed(target[:200], denial)
