"""``alignbot app-manifest``: the GitHub App manifest that registers the App in one step, its
events read from the App's webhook router and its permissions from the routes it calls
(``bot/api_routes.py``), so neither list can drift from the code."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from .api_routes import permissions
from .webhooks import WebhookRouter

NAME_LIMIT = 34  # GitHub refuses longer App names


class ManifestError(ValueError):
    """A flag that cannot go into a manifest; the message is one line."""


def _base_url(value: str, flag: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query \
            or parts.fragment or any(c.isspace() for c in value):
        raise ManifestError(f"{flag} must be an http:// or https:// URL with a host and no "
                            f"query, not {value!r}")
    return value.rstrip("/")


def build_manifest(router: WebhookRouter, url: str, *, name: str = "alignbot",
                   redirect_url: str | None = None, public: bool = False) -> dict[str, Any]:
    """The manifest for an App served at ``url`` (its webhooks go to ``url/webhook``).

    ``redirect_url`` is where GitHub sends the browser after registration with a ``code`` to
    exchange for the App's id, key and webhook secret (default: ``url``). Installation events
    are not listed: GitHub sends them to every App. ``callback_urls``: where signing in to
    the status pages returns (``bot/status/oauth.py``).
    """
    base = _base_url(url, "--url")
    name = name.strip()
    if not name or len(name) > NAME_LIMIT:
        raise ManifestError(f"--name must be 1 to {NAME_LIMIT} characters, not {name!r}")
    return {
        "name": name,
        "url": base,
        "hook_attributes": {"url": f"{base}/webhook", "active": True},
        "redirect_url": _base_url(redirect_url, "--redirect-url") if redirect_url else base,
        "callback_urls": [f"{base}/login/callback"],
        "public": public,
        "default_permissions": permissions(),
        "default_events": router.events(),
    }
