"""Signing in to the status pages with GitHub: the App's web flow (``/login/oauth/authorize``
→ the callback with ``code`` and ``state`` → ``POST /login/oauth/access_token`` → ``GET
/user``), and the session it leaves in one cookie, encrypted and signed with the service's
key (``ALIGNBOT_SESSION_KEY``): HttpOnly, SameSite=Lax, Secure behind https."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
from cryptography.fernet import Fernet, InvalidToken
from starlette.requests import Request
from starlette.responses import Response

from alignbot.bot.tenancy import Viewer

SESSION_COOKIE = "alignbot_session"
STATE_COOKIE = "alignbot_oauth"  # the state and where to go after, while GitHub asks
SESSION_SECONDS = 8 * 3600  # a user token of a GitHub App lives 8 hours
STATE_SECONDS = 600
MAX_COOKIE = 4096
# where a sign-in may return to: a status page of this service, nothing else
_NEXT = re.compile(r"^/status/[A-Za-z0-9._-]{1,100}/[A-Za-z0-9._-]{1,100}(/pull/[0-9]{1,10})?$")


def safe_next(path: str | None) -> str | None:
    """``path`` when it is one of the status pages (no open redirect), else None."""
    return path if path is not None and _NEXT.fullmatch(path) else None


class Sessions:
    """Sealed cookies: their content is encrypted and authenticated (Fernet), and expires."""

    def __init__(self, key: str, *, secure: bool) -> None:
        digest = hashlib.sha256(b"alignbot-status-session\0" + key.encode()).digest()
        self.fernet = Fernet(base64.urlsafe_b64encode(digest))
        self.secure = secure

    def seal(self, data: dict[str, Any]) -> str:
        return self.fernet.encrypt(json.dumps(data).encode()).decode()

    def unseal(self, value: str | None, max_age: int) -> dict[str, Any] | None:
        if not value or len(value) > MAX_COOKIE:
            return None
        try:
            data = json.loads(self.fernet.decrypt(value.encode(), ttl=max_age))
        except (InvalidToken, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def set(self, response: Response, name: str, data: dict[str, Any], max_age: int) -> None:
        response.set_cookie(name, self.seal(data), max_age=max_age, path="/", httponly=True,
                            samesite="lax", secure=self.secure)

    def clear(self, response: Response, name: str) -> None:
        response.delete_cookie(name, path="/", httponly=True, samesite="lax",
                               secure=self.secure)

    def viewer(self, request: Request) -> Viewer:
        """Who sent ``request``: the session's login and token, or no one."""
        data = self.unseal(request.cookies.get(SESSION_COOKIE), SESSION_SECONDS) or {}
        login, token = data.get("login"), data.get("token")
        if isinstance(login, str) and isinstance(token, str):
            return Viewer(login, token)
        return Viewer()


def new_state() -> str:
    return secrets.token_urlsafe(32)


def same_state(expected: Any, given: str | None) -> bool:
    return (isinstance(expected, str) and isinstance(given, str) and bool(given)
            and secrets.compare_digest(expected.encode(), given.encode()))


class SignInFailed(Exception):
    """GitHub did not give a token or a user for the code (a reused or forged code)."""


@dataclass(frozen=True)
class GitHubOAuth:
    """The App's web flow against GitHub (``web_url``: github.com; ``api_url``: its API)."""

    client_id: str
    client_secret: str
    web_url: str
    api_url: str
    callback_url: str
    timeout: float = 10.0

    def authorize_url(self, state: str) -> str:
        query = urlencode({"client_id": self.client_id, "redirect_uri": self.callback_url,
                           "state": state, "allow_signup": "false"})
        return f"{self.web_url}/login/oauth/authorize?{query}"

    def exchange(self, code: str) -> str:
        """The user's token for ``code``."""
        response = httpx.post(f"{self.web_url}/login/oauth/access_token", timeout=self.timeout,
                              headers={"Accept": "application/json"},
                              data={"client_id": self.client_id,
                                    "client_secret": self.client_secret, "code": code,
                                    "redirect_uri": self.callback_url})
        body = _json(response)
        token = body.get("access_token")
        if response.status_code != 200 or not isinstance(token, str) or not token:
            raise SignInFailed(str(body.get("error") or f"HTTP {response.status_code}")[:100])
        return token

    def login(self, token: str) -> str:
        """The login of the user whose token it is."""
        response = httpx.get(f"{self.api_url}/user", timeout=self.timeout,
                             headers={"Authorization": f"Bearer {token}",
                                      "Accept": "application/vnd.github+json"})
        login = _json(response).get("login")
        if response.status_code != 200 or not isinstance(login, str):
            raise SignInFailed(f"GET /user answered HTTP {response.status_code}")
        return login[:100]


def _json(response: httpx.Response) -> dict[str, Any]:
    if len(response.content) > 64 * 1024:
        return {}
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
