"""GET /search/issues: the query language's repositories, qualifiers and words."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta

from .errors import validation_failed
from .formats import parse_time
from .handling import ApiBase
from .model import Issue, Json, Repo
from .routes import Call, Reply, pick

Predicate = Callable[[Issue], bool]


class SearchApi(ApiBase):
    """GET /search/issues."""

    def search_issues(self, call: Call) -> Reply:
        """GET /search/issues (repo:, is:/type:, state:, draft:, author:, label:, created:,
        updated:, and plain words matched against titles and bodies)."""
        repos, tests = self.search_terms(call, call.query.get("q", ""))
        found = [
            i for i in self.s.issues.values()
            if (not repos or i.repo in repos) and self.visible(call, i.repo)
            and all(test(i) for test in tests)
        ]
        sort = call.query.get("sort", "created")
        descending = call.query.get("order", "desc") == "desc"
        key = (lambda i: (i.updated_at, i.id)) if sort == "updated" else (
            lambda i: (i.created_at, i.id))
        ordered = pick(found, key, descending)[:1000]

        def wrap(page: list[Json]) -> Json:
            return {"total_count": len(ordered), "incomplete_results": False,
                    "search_type": "lexical", "items": page}

        return self.paginate(call, ordered, self.v.search_item, wrap)

    def visible(self, call: Call, repo: Repo) -> bool:
        """Whether search may show items of `repo` to this caller."""
        return not repo.private or self.covers(call.token, repo)

    def search_terms(self, call: Call, query: str) -> tuple[list[Repo], list[Predicate]]:
        """The repositories named by `repo:` and one predicate per other term of `q`."""
        repos: list[Repo] = []
        tests: list[Predicate] = []
        for negated, key, value in re.findall(r'(-?)(?:(\w+):)?("[^"]*"|\S+)', query):
            value = value.strip('"')
            if key == "repo":
                repos.append(self.search_repo(call, value))
                continue
            test = qualifier(key, value) if key else word_test(value)
            tests.append((lambda t: lambda i: not t(i))(test) if negated else test)
        return repos, tests

    def search_repo(self, call: Call, name: str) -> Repo:
        """A repository a `repo:` qualifier names, if the caller may search it (422 if not)."""
        repo = self.s.repos.get(name.lower())
        if repo is None or not self.visible(call, repo):
            raise validation_failed("Search", "q", "invalid",
                                    "The listed users and repositories cannot be searched either "
                                    "because the resources do not exist or you do not have "
                                    "permission to view them.")
        return repo


def word_test(word: str) -> Predicate:
    """A plain search word: found in the title or body, ignoring case."""
    return lambda i: word.lower() in f"{i.title}\n{i.body or ''}".lower()


IS_TESTS: dict[str, Predicate] = {
    "pr": lambda i: i.pull is not None,
    "issue": lambda i: i.pull is None,
    "open": lambda i: i.state == "open",
    "closed": lambda i: i.state == "closed",
    "merged": lambda i: i.pull is not None and i.pull.merged_at is not None,
    "unmerged": lambda i: i.pull is not None and i.pull.merged_at is None and i.state == "closed",
    "draft": lambda i: i.pull is not None and i.pull.draft,
}


def qualifier(key: str, value: str) -> Predicate:
    """The predicate of one `key:value` search qualifier (422 for ones this fake lacks)."""
    if key in ("is", "type", "state") and value in IS_TESTS:
        return IS_TESTS[value]
    if key == "draft" and value in ("true", "false"):
        return lambda i: i.pull is not None and i.pull.draft == (value == "true")
    if key == "author":
        return lambda i: i.user.login.lower() == value.lower()
    if key == "label":
        return lambda i: value in i.labels
    if key in ("created", "updated"):
        return date_test(key, value)
    raise validation_failed("Search", "q", "invalid",
                            f"The test server does not support the qualifier {key}:{value}")


def date_test(key: str, value: str) -> Predicate:
    """`created:`/`updated:` with >, >=, <, <= or a `from..to` range."""
    def moment(issue: Issue) -> datetime:
        return issue.created_at if key == "created" else issue.updated_at

    if ".." in value:
        low, high = (parse_time(part) for part in value.split(".."))
        return lambda i: low <= moment(i) <= high + timedelta(days=1)
    found = re.fullmatch(r"(>=|<=|>|<)?(.+)", value)
    assert found is not None
    op, when = found[1] or ">=", parse_time(found[2])
    compare: dict[str, Callable[[datetime], bool]] = {
        ">": lambda m: m > when, ">=": lambda m: m >= when,
        "<": lambda m: m < when, "<=": lambda m: m <= when,
    }
    return lambda i: compare[op](moment(i))
