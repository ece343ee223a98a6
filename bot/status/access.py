"""What the status pages ask GitHub before they show a repository (``alignbot.bot.tenancy``'s
``ViewerDirectory``): who holds it and whether it is private, with the App's token; whether
a signed-in user may read it, with the user's own token. Answers are kept a minute, so that
a page view costs GitHub nothing most of the time and a revoked access ends soon."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
from github import GithubException

from alignbot.bot.github import FileUnreadable, GitHubApp, read_text
from alignbot.bot.tenancy import Held

CACHE_SECONDS = 60.0
MAX_CACHED = 10_000


class TtlCache:
    """A small thread-safe map whose entries expire (the oldest go first when full)."""

    def __init__(self, seconds: float = CACHE_SECONDS, size: int = MAX_CACHED,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.size, self.clock = seconds, size, clock
        self._items: dict[Any, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        now = self.clock()
        with self._lock:
            found = self._items.get(key)
            if found is not None and found[0] > now:
                return found[1]
        value = compute()
        with self._lock:
            if len(self._items) >= self.size:
                self._items.pop(next(iter(self._items)))
            self._items[key] = (now + self.seconds, value)
        return value


class GitHubViewers:
    """``alignbot.bot.tenancy.ViewerDirectory`` over GitHub."""

    def __init__(self, app: GitHubApp, api_url: str, *, timeout: float = 10.0) -> None:
        self.app, self.api_url, self.timeout = app, api_url.rstrip("/"), timeout
        self._held = TtlCache()
        self._readable = TtlCache()
        self._files = TtlCache(seconds=3600.0, size=1000)  # a commit's files never change

    def held(self, full_name: str) -> Held | None:
        return self._held.get(full_name.casefold(), lambda: self._ask_held(full_name))

    def _ask_held(self, full_name: str) -> Held | None:
        installation = self.app.repo_installation(full_name)
        if installation is None:
            return None
        try:
            repo = self.app.client(installation).get_repo(full_name)
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise
        return Held(str(repo.full_name), installation, bool(repo.private))

    def file_at(self, installation_id: int, full_name: str, path: str, sha: str) -> str | None:
        """The text of ``path`` at commit ``sha`` (None: no such file, or unreadable)."""
        key = (installation_id, full_name.casefold(), path, sha)
        return self._files.get(key, lambda: self._read(installation_id, full_name, path, sha))

    def _read(self, installation_id: int, full_name: str, path: str, sha: str) -> str | None:
        try:
            return read_text(self.app.client(installation_id).get_repo(full_name), path, sha)
        except FileUnreadable:
            return None

    def can_read(self, token: str, full_name: str) -> bool:
        key = (hashlib.sha256(token.encode()).hexdigest(), full_name.casefold())
        return bool(self._readable.get(key, lambda: self._ask_can_read(token, full_name)))

    def _ask_can_read(self, token: str, full_name: str) -> bool:
        """GitHub shows a user's token a private repository only when the user may read it
        (and, for an App's user token, when the App's installation holds it)."""
        response = httpx.get(f"{self.api_url}/repos/{full_name}", timeout=self.timeout,
                             headers={"Authorization": f"Bearer {token}",
                                      "Accept": "application/vnd.github+json"})
        if response.status_code in (401, 403, 404):
            return False
        response.raise_for_status()
        body = response.json()
        permissions = body.get("permissions") if isinstance(body, dict) else None
        return isinstance(permissions, dict) and permissions.get("pull") is True
