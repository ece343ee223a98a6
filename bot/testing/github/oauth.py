"""The App's web flow on github.com: ``/login/oauth/authorize`` (approved at once for whoever
the test signed in, ``GitHubState.sign_in``), ``POST /login/oauth/access_token`` (a code,
good once for ten minutes, for a user token ``ghu_``), and ``GET /user`` with that token."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode, urlsplit

from .errors import ApiError
from .formats import random_token, utcnow
from .handling import ApiBase
from .model import OAuthCode, UserToken
from .routes import Call, Reply

CODE_LIFETIME = timedelta(minutes=10)
USER_TOKEN_LIFETIME = timedelta(hours=8)
OAUTH_DOCS = "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors"


class OAuthApi(ApiBase):
    """The web flow's two pages and the authenticated user."""

    def authorize(self, call: Call) -> Reply:
        """GET /login/oauth/authorize: back to ``redirect_uri`` with ``code`` and ``state``."""
        query = call.query
        if query.get("client_id") != self.s.client_id:
            return Reply(404, raw=b"Not Found", content_type="text/plain; charset=utf-8")
        redirect = query.get("redirect_uri") or (self.s.callback_urls or [""])[0]
        parts = urlsplit(redirect)
        if parts.scheme not in ("http", "https") or (
                self.s.callback_urls and redirect not in self.s.callback_urls):
            return self.back(redirect, {"error": "redirect_uri_mismatch",
                                        "state": query.get("state", "")})
        if self.s.signed_in is None:  # github.com would show its sign-in page
            return Reply(401, raw=b"Sign in to GitHub", content_type="text/plain; charset=utf-8")
        code = random_token("", 20).lower()
        self.s.oauth_codes[code] = OAuthCode(self.s.signed_in, redirect,
                                             utcnow() + CODE_LIFETIME)
        return self.back(redirect, {"code": code, "state": query.get("state", "")})

    def back(self, redirect: str, values: dict[str, str]) -> Reply:
        joiner = "&" if "?" in redirect else "?"
        return Reply(302, None, {"Location": f"{redirect}{joiner}{urlencode(values)}"})

    def access_token(self, call: Call) -> Reply:
        """POST /login/oauth/access_token: GitHub answers 200 with ``error`` for a bad code."""
        body = {**call.query, **{k: str(v) for k, v in call.json.items()}}
        if body.get("client_id") != self.s.client_id or body.get(
                "client_secret") != self.s.client_secret:
            return self.refused("incorrect_client_credentials",
                                "The client_id and/or client_secret passed are incorrect.")
        code = self.s.oauth_codes.pop(body.get("code", ""), None)
        if code is None or code.expires_at <= utcnow() or (
                body.get("redirect_uri") and body["redirect_uri"] != code.redirect_uri):
            return self.refused("bad_verification_code",
                                "The code passed is incorrect or expired.")
        token = UserToken(random_token("ghu_"), code.user, utcnow() + USER_TOKEN_LIFETIME)
        self.s.user_tokens[token.value] = token
        return Reply(200, {"access_token": token.value, "expires_in": 28800,
                           "refresh_token": random_token("ghr_", 76),
                           "refresh_token_expires_in": 15811200, "scope": "",
                           "token_type": "bearer"})

    def refused(self, error: str, description: str) -> Reply:
        return Reply(200, {"error": error, "error_description": description,
                           "error_uri": OAUTH_DOCS})

    def get_authenticated_user(self, call: Call) -> Reply:
        """GET /user: the user of a user token (401 for anything else)."""
        if call.user_token is None:
            raise ApiError(401, "Requires authentication")
        return Reply(200, self.v.private_user(call.user_token.user))
