"""bot/tenancy.py: the one rule for every repository a piece of work names."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from alignbot.bot.tenancy import (
    Access,
    Denial,
    Grant,
    NotAllowed,
    Tenant,
    authorize,
    parse_full_name,
    same_owner,
)

TENANT = Tenant(4242, "demo-org/fastops")


@dataclass
class FakeGitHub:
    """Where repositories are now (old name -> new name) and who holds them."""

    moved: dict[str, str] = field(default_factory=dict)
    held: dict[str, int] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def repo_full_name(self, installation_id: int, full_name: str) -> str | None:
        self.asked.append(full_name)
        now = self.moved.get(full_name.lower(), full_name.lower())
        return now if now in self.held else None

    def repo_installation(self, full_name: str) -> int | None:
        return self.held.get(full_name.lower())


GITHUB = FakeGitHub(moved={"demo-org/moved": "rival-org/moved",
                           "demo-org/old": "demo-org/new"},
                    held={"demo-org/tracker": 4242, "demo-org/new": 4242,
                          "rival-org/moved": 5151, "rival-org/tracker": 5151,
                          "demo-org/other-install": 9999})


@pytest.mark.parametrize(("target", "denial"), [
    ("rival-org/tracker", Denial.FOREIGN), ("demo-org/moved", Denial.FOREIGN),
    ("demo-org/missing", Denial.NOT_INSTALLED), ("demo-org/other-install", Denial.NOT_INSTALLED),
    ("demo-org/tracker/issues", Denial.MALFORMED), ("demo-org/tracker?x=1", Denial.MALFORMED),
    ("demo-org/tracker#frag", Denial.MALFORMED), ("demo-org/..", Denial.MALFORMED),
    ("https://github.com/demo-org/tracker", Denial.MALFORMED), ("", Denial.MALFORMED),
])
def test_writes_go_only_to_a_repository_the_installation_holds(target: str,
                                                               denial: Denial) -> None:
    refused = authorize(TENANT, target, Access.WRITE, GITHUB)
    assert isinstance(refused, NotAllowed) and refused.denial is denial


def test_a_write_uses_the_name_github_gives_and_the_tenants_installation() -> None:
    assert authorize(TENANT, "DEMO-ORG/Tracker", Access.WRITE, GITHUB) == Grant(
        "demo-org/tracker", 4242)
    assert authorize(TENANT, "demo-org/old", Access.WRITE, GITHUB) == Grant(
        "demo-org/new", 4242)  # renamed within the account: followed


def test_a_foreign_name_is_refused_before_github_is_asked() -> None:
    github = FakeGitHub()
    authorize(TENANT, "rival-org/tracker", Access.WRITE, github)
    assert github.asked == []
    with pytest.raises(ValueError, match="needs GitHub"):
        authorize(TENANT, "demo-org/tracker", Access.WRITE)


def test_reads_go_anywhere_with_the_tenants_token_and_shows_stay_within_the_owner() -> None:
    assert authorize(TENANT, "pytorch/pytorch", Access.READ) == Grant("pytorch/pytorch", 4242)
    refused = authorize(TENANT, "rival-org/secret", Access.SHOW)
    assert isinstance(refused, NotAllowed) and refused.denial is Denial.FOREIGN
    assert str(refused) == "rival-org/secret belongs to another account"
    assert isinstance(authorize(TENANT, "Demo-Org/other", Access.SHOW), Grant)


def test_names_and_owners() -> None:
    assert parse_full_name(" demo-org/fast.ops ") == ("demo-org", "fast.ops")
    assert parse_full_name("-bad/x") is None and parse_full_name("a/b/c") is None
    assert same_owner("Demo-Org/a", "demo-org/b") and not same_owner("demo/a", "demo-org/a")
