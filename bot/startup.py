"""What ``alignbot serve``, ``worker`` and ``remind-sweep`` check as they start, each problem
one line: the private key signs, GitHub takes the App's JWT, the database answers (waited
for)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import TypeAlias

import httpx
from github import Auth
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import InterfaceError, OperationalError

from .settings import Settings, env_name, redact_url
from .storage import make_engine

log = logging.getLogger(__name__)

DATABASE_RETRY_SECONDS = 2.0  # between two tries to reach the database at start
GITHUB_TIMEOUT_SECONDS = 10.0
POSTGRES_HINT = "pip install 'alignbot[postgres]'"


# A request the start made to GitHub (method, path, status, headers), for the metrics
StartRequest: TypeAlias = tuple[str, str, int, Mapping[str, str]]


class StartupError(Exception):
    """The process cannot start: the message is one line that says why and what to set."""


def check_start(settings: Settings) -> list[StartRequest]:
    """What every process of the App does first: say where the database is, and check that
    the private key signs and that GitHub takes it (``StartupError``). The requests it made
    to GitHub, for the metrics the process builds next: every request GitHub saw is
    counted."""
    log.info("database: %s", database_location(settings.database_url))
    made: list[StartRequest] = []
    check_app(settings, check_key(settings),
              observe=lambda method, path, status, headers: made.append(
                  (method, path, status, dict(headers))))
    return made


def database_location(url: str) -> str:
    """Where the database is, for the log: a SQLite file's absolute path, or the URL without
    its password."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return redact_url(url)
    if parsed.database in (None, "", ":memory:"):
        return "SQLite in memory (nothing is kept)"
    return (f"SQLite file {os.path.abspath(parsed.database)} (its -wal and -shm files "
            "beside it)")


def check_key(settings: Settings) -> str:
    """A JWT signed with the App's private key (as PyGithub signs them), or ``StartupError``
    when the key cannot sign: valid PEM armour around anything else is caught here, at
    start, not at the first pull request."""
    key = settings.private_key.get_secret_value()
    try:
        return Auth.AppAuth(settings.app_id, key).create_jwt()
    except Exception as error:  # PyJWT's InvalidKeyError, cryptography's ValueError, …
        raise StartupError(f"{_key_setting(settings)} cannot sign the App's JWT (RS256): "
                           f"{type(error).__name__}; it must be the App's RSA private key "
                           "as GitHub gave it (.pem)") from None


def check_app(settings: Settings, token: str, *,
              timeout: float = GITHUB_TIMEOUT_SECONDS,
              observe: Callable[[str, str, int, Mapping[str, str]], None] | None = None
              ) -> None:
    """Ask GitHub who the App is (``GET /app`` with the JWT). A refusal (401) or another
    App's id is a ``StartupError``; GitHub unreachable or failing is a warning line only, so
    that an outage at GitHub never keeps the service down. ``observe`` is told of the
    request as the App's client tells its metrics (method, path, status, headers)."""
    url = f"{settings.github_api_url}/app"
    try:
        reply = httpx.get(url, timeout=timeout, headers={
            "Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json"})
    except httpx.HTTPError as error:
        log.warning("GitHub (%s) could not be reached to check the App id and key (%s: %s); "
                    "starting without that check", url, type(error).__name__, error)
        return
    if observe is not None:
        observe("GET", "/app", reply.status_code, reply.headers)
    if reply.status_code == 401:
        raise StartupError(f"GitHub refused the App's JWT (401 {_message(reply)!r}): "
                           f"{env_name('app_id')}={settings.app_id} and "
                           f"{_key_setting(settings)} are not the same GitHub App's")
    found = _app_id(reply)
    if reply.status_code != 200 or found is None:
        log.warning("GitHub answered %d to GET %s; starting without checking the App id "
                    "and key", reply.status_code, url)
        return
    if found != settings.app_id:
        raise StartupError(f"the private key is App {found}'s, not {env_name('app_id')}="
                           f"{settings.app_id}'s")
    log.info("GitHub knows App %d (%s) by its key", found, reply.json().get("slug", "?"))


def _app_id(reply: httpx.Response) -> int | None:
    try:
        body = reply.json()
    except ValueError:
        return None
    found = body.get("id") if isinstance(body, dict) else None
    return found if isinstance(found, int) else None


def _message(reply: httpx.Response) -> str:
    try:
        body = reply.json()
    except ValueError:
        return reply.text[:100]
    return str(body.get("message", "")) if isinstance(body, dict) else ""


def _key_setting(settings: Settings) -> str:
    if settings.private_key_file is not None:
        return f"{env_name('private_key_file')}={settings.private_key_file}"
    return env_name("private_key")


def wait_for_database(settings: Settings, *, retry_every: float = DATABASE_RETRY_SECONDS,
                      sleep: Callable[[float], object] = time.sleep) -> Engine:
    """An engine on the settings' database once it answers. PostgreSQL is tried every
    ``retry_every`` seconds (a line logged for each wait) for up to
    ``database_wait_seconds``; SQLite, a local file, is tried once. ``StartupError`` then,
    and when PostgreSQL's driver is not installed."""
    where = database_location(settings.database_url)
    try:
        engine = make_engine(settings.database_url)
    except ModuleNotFoundError as error:
        raise StartupError(f"{env_name('database_url')} is a PostgreSQL URL, but its driver "
                           f"({error.name}) is not installed: {POSTGRES_HINT}") from None
    started = time.monotonic()
    deadline = started + settings.database_wait_seconds
    tries = 0
    while True:
        tries += 1
        try:
            ping(engine)
            return engine
        except (OperationalError, InterfaceError) as error:
            reason = first_line(error)
            left = deadline - time.monotonic()
            if engine.url.get_backend_name() == "sqlite" or left <= 0:
                engine.dispose()
                raise StartupError(
                    f"the database ({where}) did not answer ({tries} tries in "
                    f"{time.monotonic() - started:.0f} s; {env_name('database_wait_seconds')}="
                    f"{settings.database_wait_seconds:g}): {reason}") from None
            pause = min(retry_every, left)
            log.warning("the database (%s) does not answer yet (%s); trying again in %.1f s, "
                        "%.0f s left", where, reason, pause, left)
            sleep(pause)


def ping(engine: Engine) -> None:
    """One query the database must answer (it raises what the driver raises)."""
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))


def first_line(error: Exception) -> str:
    """The first line of a database error (a driver's message runs on over several)."""
    cause = getattr(error, "orig", None) or error
    lines = str(cause).strip().splitlines()
    return lines[0].strip() if lines else type(cause).__name__
