"""GitHub access as a GitHub App through PyGithub: JWT, cached installation tokens, bounded
retries, and one API base URL setting for github.com, GitHub Enterprise Server and tests."""

from __future__ import annotations

import logging
import math
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit

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
from github.GithubException import RateLimitExceededExceedsMaxWait, RateLimitExceededException
from github.Repository import Repository
from urllib3.util.retry import Retry

from .api_routes import DOWNLOAD
from .archive import ArchiveError
from .errors import TransientError

if TYPE_CHECKING:
    from .settings import Settings

# Refresh an installation token this long before GitHub says it expires.
REFRESH_MARGIN = timedelta(minutes=10)
MAX_DOWNLOAD = 512 * 1024 * 1024
DOWNLOAD_CHUNK = 1024 * 1024
# The contents API returns a file's content as JSON up to this size (GitHub's "1 MB").
MAX_CONTENT = 1024 * 1024
# GitHub: after a secondary rate limit without Retry-After, wait at least a minute.
SECONDARY_RATE_WAIT = timedelta(minutes=1)
# An installation whose token request answered 404 is not asked for again this long.
GONE_FOR = timedelta(minutes=1)


class RateLimited(Exception):
    """GitHub asked for a pause longer than ``ApiOptions.max_wait`` (a primary rate limit until
    its reset, a secondary one for its Retry-After): run the job again at ``retry_at``, not
    before. Transient, so handlers that know nothing of it let it through to the worker."""

    transient = True

    def __init__(self, message: str, retry_at: datetime) -> None:
        super().__init__(message)
        self.retry_at = retry_at


class FileUnreadable(Exception):
    """A repository file GitHub will not hand over as a file's text: a fact about the
    repository, not a bug, so it is logged without a traceback and never retried. ``advice``
    says what to change in the repository."""

    transient = False
    expected = True
    advice = ""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(message)


class FileTooLarge(FileUnreadable):
    """A repository file larger than the contents API serves (1 MB): no retry will fetch it."""

    advice = "Keep the file under 1 MB."

    def __init__(self, path: str, size: int | None = None, limit: int = MAX_CONTENT) -> None:
        self.size, self.limit = size, limit
        found = f" ({size} bytes)" if size else ""
        super().__init__(path, f"{path} is too large{found}: GitHub's contents API serves "
                               f"files up to 1 MB ({limit} bytes)")


class NotAFile(FileUnreadable):
    """The path is a symbolic link that leads out of the repository (or to a folder, or to
    nothing), or a submodule: GitHub answers with what the entry is instead of a file."""

    advice = ("Put the file itself at this path (a link is followed only to a file inside "
              "the repository).")

    def __init__(self, path: str, kind: str, target: str | None = None) -> None:
        self.kind, self.target = kind, target
        what = {"symlink": "a symbolic link", "submodule": "a submodule"}.get(kind, f"a {kind}")
        to = f" to {target!r}" if target else ""
        super().__init__(path, f"{path} is {what}{to}, not a file in the repository: "
                               "alignbot reads only a regular file there")


class InstallationGone(Exception):
    """GitHub does not know the installation (its token request answers 404): the App was
    removed from the account, or the webhook named an installation that was never this App's.
    Nothing can be done for it and no retry changes that: logged in one line, never
    retried, and the token is not asked for again for ``GONE_FOR``."""

    transient = False
    expected = True

    def __init__(self, installation_id: int) -> None:
        self.installation_id = installation_id
        super().__init__(f"GitHub does not know installation {installation_id} (its token "
                         "request answered 404: removed, or never this App's)")


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


def api_options(settings: Settings) -> ApiOptions:
    """The service's ``ALIGNBOT_GITHUB_*`` settings, as every process that talks to GitHub
    uses them."""
    return ApiOptions(base_url=settings.github_api_url, retries=settings.github_request_retries,
                      max_wait=settings.github_max_wait,
                      seconds_between_writes=settings.github_write_interval)


def read_text(repo: Repository, path: str, ref: str) -> str | None:
    """A file's text at ``ref``, or None when it does not exist (or is a folder).

    ``FileTooLarge`` when GitHub will not serve it through the contents API (a 403 with the
    error code ``too_large``, or a file over 1 MB served without its content); ``NotAFile``
    when the path is a symbolic link GitHub does not follow (one that leads out of the
    repository) or a submodule. Both are ``FileUnreadable``: expected, never retried.
    """
    try:
        content = repo.get_contents(path, ref=ref)
    except GithubException as exc:
        if exc.status == 404:
            return None
        if exc.status == 403 and _error_codes(exc.data) & {"too_large"}:
            raise FileTooLarge(path) from exc
        raise
    if isinstance(content, list):
        return None
    if content.type != "file":
        target = content.raw_data.get("target")
        raise NotAFile(path, str(content.type), target if isinstance(target, str) else None)
    if (content.size or 0) > MAX_CONTENT or content.encoding == "none":
        raise FileTooLarge(path, content.size)
    if content.encoding != "base64":
        raise NotAFile(path, f"file GitHub sent as {content.encoding!r}")
    return content.decoded_content.decode("utf-8", errors="replace")


def _error_codes(data: Any) -> set[str]:
    errors = data.get("errors") if isinstance(data, dict) else None
    return {str(e.get("code")) for e in errors if isinstance(e, dict)} if isinstance(
        errors, list) else set()


def rate_limit_reset(status: int, headers: Mapping[str, str] | None, message: str = "",
                     now: datetime | None = None) -> datetime | None:
    """When GitHub allows the next request after a rate-limited answer, or None when the answer
    is no rate limit. Retry-After first (seconds or an HTTP date), then a spent primary budget's
    X-RateLimit-Reset, then a secondary limit's minute."""
    if status not in (403, 429):
        return None
    now = now or datetime.now(UTC)
    lowered = {key.lower(): value for key, value in (headers or {}).items()}
    after = lowered.get("retry-after")
    if after is not None:
        try:
            return now + timedelta(seconds=max(float(after), 0))
        except ValueError:
            try:
                return max(parsedate_to_datetime(after).astimezone(UTC), now)
            except (TypeError, ValueError):
                pass
    reset = lowered.get("x-ratelimit-reset")
    if lowered.get("x-ratelimit-remaining") == "0" and reset and reset.isdigit():
        # plus a second: it is not said when in that second the budget comes back
        return max(datetime.fromtimestamp(int(reset), UTC), now) + timedelta(seconds=1)
    text = message.lower()
    if "rate limit" in text:
        return now + SECONDARY_RATE_WAIT
    return None


def _rate_limited(exc: GithubException) -> RateLimited | None:
    data = exc.data if isinstance(exc.data, dict) else {}
    retry_at = rate_limit_reset(exc.status, exc.headers, str(data.get("message") or ""))
    if retry_at is None and isinstance(exc, RateLimitExceededException):
        wait = exc.wait if isinstance(exc, RateLimitExceededExceedsMaxWait) else None
        retry_at = datetime.now(UTC) + (timedelta(seconds=wait) if wait
                                        else SECONDARY_RATE_WAIT)
    if retry_at is None:
        return None
    return RateLimited(f"GitHub rate limit ({exc.status}) until "
                       f"{retry_at.isoformat(timespec='seconds')}", retry_at)


@contextmanager
def transient_failures(app: GitHubApp, installation_id: int) -> Iterator[None]:
    """GitHub errors worth another try become the worker's: ``RateLimited`` (with the time
    GitHub allows the next request) for a rate limit longer than the wait bound, and
    ``TransientError`` for a refused installation token (dropped, so the retry gets a new one),
    a 5xx answer, and calls that ran out of retries or connections (API and archive host)."""
    try:
        yield
    except BadCredentialsException as exc:
        app.forget_token(installation_id)
        raise TransientError(f"GitHub refused the installation token: {exc}") from exc
    except GithubException as exc:
        limited = _rate_limited(exc)
        if limited is not None:
            raise limited from exc
        if exc.status >= 500:
            raise TransientError(f"GitHub answered {exc.status}") from exc
        raise
    except httpx.HTTPStatusError as exc:
        answer = exc.response
        retry_at = rate_limit_reset(answer.status_code, answer.headers, answer.text[:500])
        if retry_at is not None:
            raise RateLimited(f"GitHub rate limit ({answer.status_code}) on a download until "
                              f"{retry_at.isoformat(timespec='seconds')}", retry_at) from exc
        if answer.status_code >= 500:
            raise TransientError(f"GitHub answered {answer.status_code} to a download") from exc
        raise
    except (requests.exceptions.RetryError, requests.exceptions.ConnectionError,
            requests.exceptions.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
        raise TransientError(f"GitHub did not answer after retries: {exc}") from exc
    except httpx.TransportError as exc:
        raise TransientError(f"GitHub did not answer a download: {exc!r}") from exc


# (method, path relative to the API base with its query, status or 0 when no answer came,
# the answer's headers with lower-case names): told of every request the App sends to GitHub.
RequestObserver = Callable[[str, str, int, Mapping[str, str]], None]


def observe_requests(requester: Any, observe: RequestObserver, prefix: str = "") -> None:
    """Tell ``observe`` of every request PyGithub's ``requester`` sends, retries included in
    one: its connections are made of a subclass of its own connection class that reports
    each answer. ``prefix`` (the API base URL's path, ``/api/v3`` on GitHub Enterprise
    Server) is taken off the paths."""
    attribute = "_Requester__connectionClass"  # per requester; the class-level hook is global
    base = getattr(requester, attribute)
    if getattr(base, "observe", None) is observe:
        return

    class Observed(base):  # type: ignore[misc, valid-type]
        def getresponse(self) -> Any:
            path = self.url.removeprefix(prefix) if prefix else self.url
            try:
                response = super().getresponse()
            except Exception:
                _tell(observe, self.verb, path, 0, {})
                raise
            _tell(observe, self.verb, path, response.status,
                  {key.lower(): value for key, value in response.getheaders()})
            return response

    Observed.observe = observe
    setattr(requester, attribute, Observed)


def _tell(observe: RequestObserver, method: str, path: str, status: int,
          headers: Mapping[str, str]) -> None:
    try:
        observe(method, path, status, headers)
    except Exception:  # counting must never fail a request
        logging.getLogger(__name__).exception("a request observer failed")


class GitHubApp:
    """One app; hands out PyGithub clients per installation. Thread-safe. ``observe``, when
    given, is told of every request (``RequestObserver``)."""

    def __init__(self, app_id: int, private_key: str, options: ApiOptions | None = None,
                 observe: RequestObserver | None = None) -> None:
        self.options = options or ApiOptions()
        self.observe = observe
        self._prefix = urlsplit(self.options.base_url).path.rstrip("/")
        self._auth = Auth.AppAuth(app_id, private_key)
        self._integration = GithubIntegration(
            auth=self._auth, base_url=self.options.base_url, retry=make_retry(self.options),
            timeout=self.options.timeout, seconds_between_requests=None,
            seconds_between_writes=None)
        if observe is not None:
            observe_requests(self._integration.requester, observe, self._prefix)
        self._tokens: dict[int, tuple[str, datetime]] = {}
        self._gone: dict[int, datetime] = {}  # installation id -> when its token 404ed
        self._lock = threading.Lock()
        self._login: str | None = None
        self.tokens_issued = 0

    def installation_token(self, installation_id: int) -> str:
        """A cached token, renewed ``REFRESH_MARGIN`` before it expires. ``InstallationGone``
        when GitHub does not know the installation (asked once per ``GONE_FOR``)."""
        with self._lock:
            cached = self._tokens.get(installation_id)
            now = datetime.now(UTC)
            if cached is not None and cached[1] - REFRESH_MARGIN > now:
                return cached[0]
            gone = self._gone.get(installation_id)
            if gone is not None and now - gone < GONE_FOR:
                raise InstallationGone(installation_id)
            try:
                access = self._integration.get_access_token(installation_id)
            except GithubException as exc:
                if exc.status != 404:
                    raise
                self._gone[installation_id] = now
                raise InstallationGone(installation_id) from None
            self._gone.pop(installation_id, None)
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
        gh = Github(auth=Auth.Token(self.installation_token(installation_id)),
                    base_url=self.options.base_url, retry=make_retry(self.options),
                    timeout=self.options.timeout, per_page=100,
                    seconds_between_requests=self.options.seconds_between_requests or None,
                    seconds_between_writes=self.options.seconds_between_writes or None)
        if self.observe is not None:
            observe_requests(gh.requester, self.observe, self._prefix)
        return gh

    def repo_full_name(self, installation_id: int, full_name: str) -> str | None:
        """Where ``full_name`` is now, as the installation sees it (GitHub redirects a renamed
        or transferred repository's old name), or None when it sees nothing there
        (``alignbot.bot.tenancy.Directory``)."""
        try:
            return str(self.client(installation_id).get_repo(full_name).full_name)
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise

    def repo_installation(self, full_name: str) -> int | None:
        """The id of this App's installation that holds ``full_name``, or None
        (``alignbot.bot.tenancy.Directory``)."""
        owner, _, name = full_name.partition("/")
        try:
            return int(self._integration.get_repo_installation(owner, name).id)
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise

    def bot_login(self) -> str:
        """``<app slug>[bot]``: the author of the app's own comments."""
        if self._login is None:
            self._login = f"{self._integration.get_app().slug}[bot]"
        return self._login

    def download(self, url: str, installation_id: int, *, folder: Path | None = None,
                 limit: int = MAX_DOWNLOAD) -> IO[bytes]:
        """Fetch an archive link (following GitHub's redirect) into an anonymous temporary
        file in ``folder``, a chunk at a time, and return it at its start (the caller closes
        it); more than ``limit`` bytes is an ``ArchiveError``. The archive is never whole in
        memory: a pull request's can be hundreds of MiB."""
        headers = {"Authorization": f"token {self.installation_token(installation_id)}"}
        archive = tempfile.TemporaryFile(dir=folder)  # noqa: SIM115 (returned to the caller)
        try:
            with httpx.stream("GET", url, headers=headers, follow_redirects=True,
                              timeout=self.options.timeout) as response:
                if self.observe is not None:
                    _tell(self.observe, "GET", DOWNLOAD, response.status_code,
                          response.headers)
                if response.is_error:
                    response.read()  # the error's body (a rate limit's message), then raise
                response.raise_for_status()
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > limit:
                    raise ArchiveError(f"the archive is larger than {limit} bytes")
                size = 0
                for chunk in response.iter_bytes(DOWNLOAD_CHUNK):
                    size += len(chunk)
                    if size > limit:
                        raise ArchiveError(f"the archive is larger than {limit} bytes")
                    archive.write(chunk)
            archive.seek(0)
        except BaseException:
            archive.close()
            raise
        return archive
