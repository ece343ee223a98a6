"""bot/manifest.py and ``alignbot app-manifest``: the manifest's events are the router's, its
permissions those of the routes the App calls; a service, its slash-commands and a reminder
sweep, run against a GitHub that grants exactly those permissions, are never refused and call
no route the App's table lacks."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from reminders_world import catalogue, new_world
from service import OWNER, REPO, Service, completed, open_pull

from alignbot.bot.api_routes import ROUTES, route_of
from alignbot.bot.cli import main
from alignbot.bot.demo import _files, wait_for
from alignbot.bot.manifest import build_manifest
from alignbot.bot.serve import webhook_router
from alignbot.bot.storage import make_engine
from alignbot.bot.testing.github import GitHubServer
from alignbot.bot.testing.github.model import Exchange

ROOT = Path(__file__).resolve().parent.parent
# measured: what a check, the slash-commands and a sweep need (a comment on a pull request
# is an issue comment: issues write; pull requests are only read)
NEEDED = {"checks": "write", "contents": "read", "issues": "write", "metadata": "read",
          "pull_requests": "read"}


def manifest(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["app-manifest", *argv]) == 0
    printed: dict[str, Any] = json.loads(capsys.readouterr().out)
    return printed


def test_the_manifest_names_the_routers_events_and_the_routes_permissions(
        capsys: pytest.CaptureFixture[str]) -> None:
    printed = manifest(capsys, "--url", "https://align.example.org/", "--name", "align-ci",
                       "--public")
    assert printed == {
        "name": "align-ci", "url": "https://align.example.org",
        "hook_attributes": {"url": "https://align.example.org/webhook", "active": True},
        "redirect_url": "https://align.example.org", "public": True,
        "callback_urls": ["https://align.example.org/login/callback"],
        "default_permissions": NEEDED,
        "default_events": ["check_run", "issue_comment", "pull_request", "pull_request_review",
                           "push"],
    }
    assert printed["default_events"] == webhook_router().events()
    private = manifest(capsys, "--url", "http://10.0.0.5:8080", "--redirect-url",
                       "https://align.example.org/registered")
    assert private["public"] is False and private["name"] == "alignbot"
    assert private["redirect_url"] == "https://align.example.org/registered"


@pytest.mark.parametrize("argv", [
    [], ["--url", "ftp://align.example.org"], ["--url", "align.example.org"],
    ["--url", "https://align.example.org/?x=1"], ["--url", "https://a.example", "--name", ""],
    ["--url", "https://a.example", "--name", "n" * 35],
    ["--url", "https://a.example", "--redirect-url", "nowhere"],
    ["--url", "https://a.example", "--colour", "red"],
])
def test_bad_flags_exit_2_with_one_line(capsys: pytest.CaptureFixture[str],
                                        argv: list[str]) -> None:
    assert main(["app-manifest", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1 and captured.err.startswith("alignbot: error:")


def test_every_route_of_the_table_is_githubs_with_the_same_permission() -> None:
    """The test server's routes carry GitHub's documented permissions (``a|b:level`` where
    either will do): each route of the App's table is one of them and asks for one of those."""
    server = {(route.method, route.template): route for route in GitHubServer()._api.routes}
    unknown_to_server = set()
    for route in ROUTES:
        theirs = server.get((route.method, route.template))
        if theirs is None:
            unknown_to_server.add(route.template)
            continue
        if route.permission is None:  # the App's own (JWT) routes, or no repository at all
            assert theirs.auth != "token" or "{repo}" not in route.template, route
            continue
        names, _, level = theirs.permission.partition(":")
        name, _, mine = route.permission.partition(":")
        assert name in names.split("|") and mine == level, (route, theirs.permission)
    # labels: the sweep's courtesy, which the test server does not serve (a 404 it survives)
    assert unknown_to_server == {"/repos/{owner}/{repo}/issues/{issue_number}/labels"}


def requested(exchanges: Iterable[Exchange]) -> set[tuple[str, str]]:
    """(method, the App's template) of every request; fails on one the table lacks."""
    found = set()
    for exchange in exchanges:
        if exchange.path.startswith("/_codeload/"):
            continue  # the archive host, after GitHub's redirect
        route = route_of(exchange.method, exchange.path)
        assert route is not None, f"{exchange.method} {exchange.path} is not in bot/api_routes.py"
        if exchange.template is not None:
            assert route.template == exchange.template
        found.add((route.method, route.template))
    return found


@pytest.mark.slow
def test_a_github_granting_only_the_manifest_needs_nothing_more(tmp_path: Path) -> None:
    granted = build_manifest(webhook_router(), "https://a.example")["default_permissions"]
    with GitHubServer(permissions=granted) as github:
        base = _files(ROOT / "examples" / "fastops")
        head = open_pull(github, base, {**base, "NOTES": b"notes\n"})
        github.set_permission(OWNER, REPO, "mia", "write")
        (tmp_path / "service").mkdir()
        service = Service(github, tmp_path / "service")
        service.start()
        try:
            service.deliver(github, "pull_request",
                            github.webhook("pull_request.opened", OWNER, REPO, number=1))
            wait_for(lambda: completed(github, head), 60, "the check run")
            made = github.add_comment(OWNER, REPO, 1, "/alignbot help", "mia")
            service.deliver(github, "issue_comment", github.webhook(
                "issue_comment.created", OWNER, REPO, comment_id=made.id))
            wait_for(lambda: len(github.comments_on(OWNER, REPO, 1)) >= 3, 60, "the reply")
        finally:
            service.stop()
        served = list(github.exchanges)

    with GitHubServer(permissions=granted) as github:  # a week of reminders, labels on
        world = new_world(github, make_engine(f"sqlite:///{tmp_path / 'sweep.db'}"),
                          labels=True)
        catalogue(world)
        assert world.sweep(force=True).posted
        swept = list(github.exchanges)

    refused = [(e.method, e.path) for e in served + swept if e.status in (401, 403)]
    assert refused == []
    seen = requested(served) | requested(swept)
    # every permission of the manifest is one some request needed: none is a wish
    used = {route.permission.partition(":")[0] for route in ROUTES
            if route.permission and (route.method, route.template) in seen}
    assert used == set(granted)
