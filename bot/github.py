"""GitHub access as a GitHub App through PyGithub: JWT, cached installation tokens, bounded
retries, and one API base URL setting for github.com, GitHub Enterprise Server and tests."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import requests
from github import (
    Auth,
    BadCredentialsException,
    Github,
    GithubException,
    GithubIntegration,
    GithubRetry,
)
from github.GithubException import RateLimitExceededExceedsMaxWait
from github.Repository import Repository
from urllib3.util.retry import Retry

from .worker import TransientError

# Refresh an installation token this long before GitHub says it expires.
REFRESH_MARGIN = timedelta(minutes=10)
MAX_DOWNLOAD = 512 * 1024 * 1024


@dataclass(frozen=True)
class ApiOptions:
    """How the app talks to GitHub. ``max_wait`` bounds every rate-limit or Retry-After sleep:
    a longer required wait raises instead of blocking a worker for up to an hour."""

    base_url: str = "https://api.github.com"
    retries: int = 5
    max_wait: float = 120.0
    timeout: int = 30
    seconds_between_requests: float = 0.0
    seconds_between_writes: float = 1.0


class BoundedRetry(GithubRetry):
    """GitHub's retry policy, except that a ``Retry-After`` longer than the bound raises instead
    of being shortened to it: asking again before GitHub said so only earns a longer ban."""

    def increment(self, method: str | None = None, url: str | None = None,  # type: ignore[override]
                  response: Any = None, error: Exception | None = None, _pool: Any = None,
                  _stacktrace: Any = None) -> Retry:
        value = response.headers.get("Retry-After") if response is not None else None
        bound = self.max_rate_limit_wait
        if value is not None and bound is not None:
            try:
                wait = float(value)
            except ValueError:
                wait = None  # an HTTP date: urllib3 handles it within retry_after_max
            if wait is not None and wait > bound:
                raise RateLimitExceededExceedsMaxWait(
                    response.status, None, dict(response.headers),
                    f"GitHub asked to wait {wait:g} s, longer than the {bound} s allowed",
                    wait=wait)
        return super().increment(method, url, response, error, _pool, _stacktrace)


def make_retry(options: ApiOptions) -> GithubRetry:
    bound = max(1, math.ceil(options.max_wait))
    return BoundedRetry(total=options.retries, backoff_factor=0.5, backoff_max=30,
                        status_forcelist=[500, 502, 503, 504],
                        secondary_rate_wait=min(60, bound), max_rate_limit_wait=bound,
                        retry_after_max=bound)


def read_text(repo: Repository, path: str, ref: str) -> str | None:
    """A file's text at ``ref``, or None when it does not exist (or is a folder)."""
    try:
        content = repo.get_contents(path, ref=ref)
    except GithubException as exc:
        if exc.status == 404:
            return None
        raise
    if isinstance(content, list):
        return None
    return content.decoded_content.decode("utf-8", errors="replace")


@contextmanager
def transient_failures(app: GitHubApp, installation_id: int) -> Iterator[None]:
    """GitHub errors worth one more try become the worker's TransientError: a refused
    installation token (dropped, so the retry gets a new one) and calls that ran out of
    retries or connections."""
    try:
        yield
    except BadCredentialsException as exc:
        app.forget_token(installation_id)
        raise TransientError(f"GitHub refused the installation token: {exc}") from exc
    except (requests.exceptions.RetryError, requests.exceptions.ConnectionError) as exc:
        raise TransientError(f"GitHub did not answer after retries: {exc}") from exc


class GitHubApp:
    """One app; hands out PyGithub clients per installation. Thread-safe."""

    def __init__(self, app_id: int, private_key: str, options: ApiOptions | None = None) -> None:
        self.options = options or ApiOptions()
        self._auth = Auth.AppAuth(app_id, private_key)
        self._integration = GithubIntegration(
            auth=self._auth, base_url=self.options.base_url, retry=make_retry(self.options),
            timeout=self.options.timeout, seconds_between_requests=None,
            seconds_between_writes=None)
        self._tokens: dict[int, tuple[str, datetime]] = {}
        self._lock = threading.Lock()
        self._login: str | None = None
        self.tokens_issued = 0

    def installation_token(self, installation_id: int) -> str:
        """A cached token, renewed ``REFRESH_MARGIN`` before it expires."""
        with self._lock:
            cached = self._tokens.get(installation_id)
            now = datetime.now(UTC)
            if cached is not None and cached[1] - REFRESH_MARGIN > now:
                return cached[0]
            access = self._integration.get_access_token(installation_id)
            expires = access.expires_at or now + timedelta(hours=1)
            if expires.tzinfo is None:
                expires = expires.replace(tzinfo=UTC)
            self._tokens[installation_id] = (access.token, expires)
            self.tokens_issued += 1
            return access.token

    def forget_token(self, installation_id: int) -> None:
        """Drop a token GitHub refused (revoked, or expired early): the next call gets a new one."""
        with self._lock:
            self._tokens.pop(installation_id, None)

    def client(self, installation_id: int) -> Github:
        return Github(auth=Auth.Token(self.installation_token(installation_id)),
                      base_url=self.options.base_url, retry=make_retry(self.options),
                      timeout=self.options.timeout, per_page=100,
                      seconds_between_requests=self.options.seconds_between_requests or None,
                      seconds_between_writes=self.options.seconds_between_writes or None)

    def bot_login(self) -> str:
        """``<app slug>[bot]``: the author of the app's own comments."""
        if self._login is None:
            self._login = f"{self._integration.get_app().slug}[bot]"
        return self._login

    def download(self, url: str, installation_id: int, limit: int = MAX_DOWNLOAD) -> bytes:
        """Fetch an archive link (following GitHub's redirect), refusing more than ``limit``."""
        headers = {"Authorization": f"token {self.installation_token(installation_id)}"}
        chunks, size = [], 0
        with httpx.stream("GET", url, headers=headers, follow_redirects=True,
                          timeout=self.options.timeout) as response:
            response.raise_for_status()
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > limit:
                    raise ValueError(f"the archive is larger than {limit} bytes")
                chunks.append(chunk)
        return b"".join(chunks)
