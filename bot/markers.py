"""The app's own marked comments: written by the App's bot user and starting with the marker."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from github.PullRequest import PullRequest

C = TypeVar("C")


def author_login(comment: Any) -> str:
    """The login of a comment's author: a PyGithub object or a REST JSON object."""
    user = comment.get("user") if isinstance(comment, dict) else getattr(comment, "user", None)
    login = user.get("login") if isinstance(user, dict) else getattr(user, "login", None)
    return login if isinstance(login, str) else ""


def is_bot_account(user: Any) -> bool:
    """A GitHub user object (REST JSON) of an App or another bot."""
    if not isinstance(user, dict):
        return False
    return user.get("type") == "Bot" or str(user.get("login", "")).endswith("[bot]")


def comment_body(comment: Any) -> str:
    body = comment.get("body") if isinstance(comment, dict) else getattr(comment, "body", None)
    return body if isinstance(body, str) else ""


def marker_at_start(body: str, marker: str | re.Pattern[str]) -> re.Match[str] | None:
    """``marker`` (a literal, or a pattern) matched at the very start of ``body``, or None.

    Anywhere else it may be an echo of someone's text (a quoted command, a repro), so it
    never counts there.
    """
    pattern = re.compile(re.escape(marker)) if isinstance(marker, str) else marker
    return pattern.match(body)


def find_marked(comments: Iterable[C], login: str, marker: str | re.Pattern[str]
                ) -> Iterator[tuple[C, re.Match[str]]]:
    """The comments by ``login`` (the App's bot user) whose body starts with ``marker``, in
    order, each with the marker's match (a pattern's groups say what the comment is)."""
    for comment in comments:
        if author_login(comment).lower() != login.lower() or not login:
            continue
        match = marker_at_start(comment_body(comment), marker)
        if match is not None:
            yield comment, match


def first_marked(comments: Iterable[C], login: str, marker: str | re.Pattern[str]) -> C | None:
    """The first of ``find_marked``, or None."""
    for comment, _ in find_marked(comments, login, marker):
        return comment
    return None


def upsert_marked(pr: PullRequest, login: str, marker: str, body: str) -> int:
    """The app's one comment on ``pr`` with ``marker`` (``body`` must start with it): edited
    in place if it changed, posted if there is none; returns its id."""
    if not body.startswith(marker):
        raise ValueError("the body must start with its marker")
    found = first_marked(pr.get_issue_comments(), login, marker)
    if found is None:
        return int(pr.create_issue_comment(body).id)
    if found.body != body:
        found.edit(body)
    return int(found.id)
