"""The status pages: ``GET /status/OWNER/REPO`` (the default branch) and ``GET
/status/OWNER/REPO/pull/N`` (a pull request's last check), server-rendered from
``templates/status_*.html.j2`` (autoescaped); ``/login``, ``/login/callback`` and
``/logout`` sign in with GitHub. Every page asks ``alignbot.bot.tenancy.authorize_viewer`` first."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import jinja2
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool

from alignbot.bot.tenancy import Denial, Grant, Viewer, ViewerDirectory, authorize_viewer
from alignbot.checks.api import KNOWN_PATH, templates_dir

from . import store, view
from .oauth import (
    SESSION_COOKIE,
    SESSION_SECONDS,
    STATE_COOKIE,
    STATE_SECONDS,
    GitHubOAuth,
    Sessions,
    SignInFailed,
    new_state,
    safe_next,
    same_state,
)

log = logging.getLogger(__name__)

# (installation, repository, path, commit) -> the file's text, or None
FileReader = Callable[[int, str, str, str], str | None]
PAGE = "status_page.html.j2"
MISSING = "status_missing.html.j2"
NOT_FOUND = "There is no status page here, or you may not see it."


@functools.cache
def _environment(folder: str) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(folder), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["short"] = lambda sha: str(sha or "")[:12]
    env.filters["when"] = lambda moment: moment.strftime("%Y-%m-%d %H:%M UTC") if moment else "-"
    return env


def render(name: str, **values: Any) -> str:
    return _environment(str(templates_dir())).get_template(name).render(**values)


@dataclass
class StatusPages:
    """The pages' data and access: ``github`` answers ``authorize_viewer``; ``oauth`` is
    None where sign-in is not configured (a private repository's page is then not shown)."""

    engine: Engine
    github: ViewerDirectory
    files: FileReader | None  # a commit's known-divergences file, for a pull request's page
    sessions: Sessions | None
    oauth: GitHubOAuth | None
    history: int = 20

    def viewer(self, request: Request) -> Viewer:
        return self.sessions.viewer(request) if self.sessions is not None else Viewer()

    def authorize(self, request: Request, owner: str, repo: str) -> Grant | Response:
        """The grant, or the answer to a refusal: sign in first, or not found."""
        answer = authorize_viewer(self.viewer(request), f"{owner}/{repo}", self.github)
        if isinstance(answer, Grant):
            return answer
        if answer.denial is Denial.LOGIN and self.oauth is not None:
            return RedirectResponse(f"/login?next={quote(request.url.path)}", status_code=303)
        return missing()

    def repo_page(self, request: Request, owner: str, repo: str) -> Response:
        grant = self.authorize(request, owner, repo)
        if isinstance(grant, Response):
            return grant
        runs = store.last_runs(self.engine, grant.installation_id, grant.repo, self.history)
        results = store.results_of(self.engine, [run.id for run in runs])
        latest = runs[0] if runs else None
        current = view.grid([r for r in results if latest is not None and r.run_id == latest.id])
        runs_view, seen = view.history(runs, results, current)
        urls = [f.upstream for f in current.findings if f.upstream]
        known = view.known_divergences(current,
                                       store.upstream_states(self.engine, grant.repo, urls))
        return self._page(request, grant, f"{grant.repo}: default branch", current,
                          subject=latest, runs=runs_view, seen=seen, known=known, pull=None)

    def pull_page(self, request: Request, owner: str, repo: str, number: int) -> Response:
        grant = self.authorize(request, owner, repo)
        if isinstance(grant, Response):
            return grant
        found = store.pull_report(self.engine, grant.installation_id, grant.repo, number)
        rows = []
        if found is not None:
            text = None if self.files is None else self.files(
                grant.installation_id, grant.repo, KNOWN_PATH, found[0])
            known, _ = store.known_lookup(text)
            rows = [store.Result(0, row["op"], row["dtype"], row["kind"], row["fingerprint"],
                                 row["outcome"], row["count"], row["detail"])
                    for row in store.report_results(found[1], known)]
        current = view.grid(rows)
        return self._page(request, grant, f"{grant.repo}: pull request #{number}", current,
                          subject=None, runs=[], seen=[],
                          known=view.known_divergences(current, {}),
                          pull={"number": number, "head_sha": found[0] if found else None})

    def _page(self, request: Request, grant: Grant, title: str, current: view.Grid,
              **values: Any) -> HTMLResponse:
        html = render(PAGE, title=title, repo=grant.repo, grid=current,
                      outcomes=("agrees", "known", "diverges", view.NOT_COVERED),
                      login=self.viewer(request).login, **values)
        return HTMLResponse(html, headers=SECURITY_HEADERS)

    def sign_in(self, request: Request) -> Response:
        if self.oauth is None or self.sessions is None:
            return missing("Signing in is not configured on this service.")
        state = new_state()
        response = RedirectResponse(self.oauth.authorize_url(state), status_code=303)
        self.sessions.set(response, STATE_COOKIE,
                          {"state": state, "next": safe_next(request.query_params.get("next"))},
                          STATE_SECONDS)
        return response

    def callback(self, request: Request) -> Response:
        if self.oauth is None or self.sessions is None:
            return missing("Signing in is not configured on this service.")
        pending = self.sessions.unseal(request.cookies.get(STATE_COOKIE), STATE_SECONDS) or {}
        code = request.query_params.get("code", "")
        if not same_state(pending.get("state"), request.query_params.get("state")) or not (
                0 < len(code) <= 200):
            return missing("This sign-in was not started here, or it took too long: "
                                 "sign in again.", 400)
        try:
            token = self.oauth.exchange(code)
            login = self.oauth.login(token)
        except (SignInFailed, httpx.HTTPError) as exc:
            log.info("sign-in refused: %s", exc)
            return missing("GitHub did not confirm this sign-in: sign in again.", 400)
        response = RedirectResponse(safe_next(pending.get("next")) or "/", status_code=303)
        self.sessions.clear(response, STATE_COOKIE)
        self.sessions.set(response, SESSION_COOKIE, {"login": login, "token": token},
                          SESSION_SECONDS)
        log.info("%s signed in to the status pages", login)
        return response

    def sign_out(self) -> Response:
        response = RedirectResponse("/", status_code=303)
        if self.sessions is not None:
            self.sessions.clear(response, SESSION_COOKIE)
        return response


# the pages run no script and load nothing from elsewhere
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               "img-src 'self'; base-uri 'none'; form-action 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
    "Cache-Control": "private, no-store",
}


def missing(message: str = NOT_FOUND, status: int = 404) -> HTMLResponse:
    """The one page of a refusal: a private repository someone may not see looks like one
    that does not exist."""
    return HTMLResponse(render(MISSING, message=message), status_code=status,
                        headers=SECURITY_HEADERS)


def router(pages: StatusPages) -> APIRouter:
    """The pages' routes (their work leaves the event loop: it reads the database and GitHub)."""
    routes = APIRouter()

    @routes.get("/status/{owner}/{repo}", response_class=HTMLResponse)
    async def repo_page(request: Request, owner: str, repo: str) -> Response:
        return await run_in_threadpool(pages.repo_page, request, owner, repo)

    @routes.get("/status/{owner}/{repo}/pull/{number}", response_class=HTMLResponse)
    async def pull_page(request: Request, owner: str, repo: str, number: int) -> Response:
        if not 0 < number < 2**31:
            return missing()
        return await run_in_threadpool(pages.pull_page, request, owner, repo, number)

    @routes.get("/login")
    async def sign_in(request: Request) -> Response:
        return pages.sign_in(request)

    @routes.get("/login/callback")
    async def callback(request: Request) -> Response:
        return await run_in_threadpool(pages.callback, request)

    @routes.get("/logout")
    async def sign_out() -> Response:
        return pages.sign_out()

    return routes
