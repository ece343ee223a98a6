"""The GitHub test server's repositories, contents and archives (bot/testing/github/repos.py,
archives.py)."""

from __future__ import annotations

import base64
import io
import tarfile

import httpx
import pytest
from github import Auth, Github, GithubException, GithubIntegration
from github.GithubException import UnknownObjectException
from testing_github import (
    BASE,
    BASE_TREE,
    HEAD,
    HEAD2,
    HEAD_TREE,
    INSTALLATION,
    NAME,
    OWNER,
    fast,
    file_text,
    token_for,
)

from alignbot.bot.testing.github import GitHubServer, Link


def test_repository_and_contents(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    assert (repo.full_name, repo.default_branch, repo.owner.login) == (f"{OWNER}/{NAME}", "main",
                                                                      OWNER)
    assert file_text(repo, ".alignbot.yml", HEAD) == b"candidate: ops\n"
    assert file_text(repo, "README.md") == b"ops library\n"
    listing = repo.get_contents("ops", ref=HEAD)
    assert isinstance(listing, list) and [c.path for c in listing] == ["ops/add.py"]
    root = repo.get_contents("", ref="refs/pull/7/head")
    assert isinstance(root, list) and {c.name for c in root} >= {"ops", "README.md"}
    with pytest.raises(UnknownObjectException):
        repo.get_contents(".alignbot.yml", ref=BASE)
    with pytest.raises(GithubException) as caught:
        repo.get_contents("README.md", ref="no-such-branch")
    assert caught.value.status == 404 and "No commit found for the ref" in str(caught.value)
    assert repo.get_commit(HEAD).parents[0].sha == BASE


def test_tarball_layout(server: GitHubServer, gh: Github) -> None:
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    location = repo.get_archive_link("tarball", HEAD)
    assert location.startswith(server.url)
    reply = httpx.get(location)
    assert reply.headers["content-type"] == "application/x-gzip"
    with tarfile.open(fileobj=io.BytesIO(reply.content), mode="r:gz") as archive:
        names = archive.getnames()
        top = f"{OWNER}-{NAME}-{HEAD[:7]}"
        assert names[0] == top and all(n == top or n.startswith(top + "/") for n in names)
        assert archive.pax_headers["comment"] == HEAD
        member = archive.extractfile(f"{top}/.alignbot.yml")
        assert member is not None and member.read() == b"candidate: ops\n"
        assert archive.getmember(f"{top}/ops").isdir()


def test_files_over_1_mb_are_served_as_github_serves_them(server: GitHubServer) -> None:
    big, limit = b"# padding\n" * 110_000, 1024 * 1024
    assert len(big) > limit
    exact = b"x" * limit
    server.push(OWNER, NAME, 7, HEAD2, tree={**HEAD_TREE, "big.yml": big, "exact.yml": exact})
    headers = {"Authorization": f"token {token_for(server)}"}
    url = f"{server.url}/repos/{OWNER}/{NAME}/contents/%s?ref={HEAD2}"

    for accept in ("application/vnd.github+json", "application/json", ""):
        refused = httpx.get(url % "big.yml", headers={**headers, "Accept": accept})
        assert refused.status_code == 403, accept
        body = refused.json()
        assert body["errors"] == [{"resource": "Blob", "field": "data", "code": "too_large"}]
        assert body["message"].startswith("This API returns blobs up to 1 MB in size.")
    served = httpx.get(url % "exact.yml", headers=headers)  # 1 MB exactly is still served
    assert served.status_code == 200 and served.json()["size"] == limit
    assert base64.b64decode(served.json()["content"]) == exact

    raw = httpx.get(url % "big.yml", headers={**headers, "Accept": "application/vnd.github.raw"})
    assert raw.status_code == 200 and raw.content == big
    assert raw.headers["content-type"].startswith("application/vnd.github.raw")
    small = httpx.get(url % ".alignbot.yml",
                      headers={**headers, "Accept": "application/vnd.github.v3.raw"})
    assert small.content == b"candidate: ops\n"
    obj = httpx.get(url % "big.yml", headers={**headers, "Accept": "application/vnd.github.object"})
    assert obj.status_code == 200
    assert (obj.json()["content"], obj.json()["encoding"], obj.json()["size"]) == (
        "", "none", len(big))


def test_private_archive_needs_the_link_or_a_token(server: GitHubServer) -> None:
    server.add_repo(OWNER, "secret", INSTALLATION, {BASE: BASE_TREE}, private=True)
    token = token_for(server)
    headers = {"Authorization": f"token {token}"}
    assert httpx.get(f"{server.url}/repos/{OWNER}/secret").status_code == 404
    redirect = httpx.get(f"{server.url}/repos/{OWNER}/secret/tarball/main", headers=headers)
    assert redirect.status_code == 302
    location = redirect.headers["Location"]
    bare = location.split("?")[0]
    assert httpx.get(location).status_code == 200
    assert httpx.get(bare).status_code == 404
    assert httpx.get(bare, headers=headers).status_code == 200
    followed = httpx.get(f"{server.url}/repos/{OWNER}/secret/tarball/{BASE}", headers=headers,
                         follow_redirects=True)
    assert followed.status_code == 200 and followed.content[:2] == b"\x1f\x8b"


def test_symlinks_are_followed_to_a_file_of_the_repository_only(server: GitHubServer) -> None:
    tree = {**HEAD_TREE, "docs/config.yml": Link(b"../.alignbot.yml"),
            "chain.yml": Link(b"docs/config.yml"), "out.yml": Link(b"/etc/passwd"),
            "up.yml": Link(b"../../outside.yml"), "dir.yml": Link(b"ops"),
            "dangling.yml": Link(b"missing.yml"), "loop.yml": Link(b"loop.yml")}
    server.push(OWNER, NAME, 7, HEAD2, tree=tree)
    headers = {"Authorization": f"token {token_for(server)}"}
    url = f"{server.url}/repos/{OWNER}/{NAME}/contents/%s?ref={HEAD2}"

    for followed in ("docs/config.yml", "chain.yml"):  # GitHub answers with the target file
        reply = httpx.get(url % followed, headers=headers).json()
        assert (reply["type"], reply["path"]) == ("file", ".alignbot.yml")
        assert base64.b64decode(reply["content"]) == b"candidate: ops\n"
    for name, target in (("out.yml", "/etc/passwd"), ("up.yml", "../../outside.yml"),
                         ("dir.yml", "ops"), ("dangling.yml", "missing.yml"),
                         ("loop.yml", "loop.yml")):
        reply = httpx.get(url % name, headers=headers).json()
        assert (reply["type"], reply["target"], reply["path"]) == ("symlink", target, name)
        assert "content" not in reply and reply["size"] == len(target)
    raw = httpx.get(url % "out.yml", headers={**headers, "Accept": "application/vnd.github.raw"})
    assert raw.content == b"/etc/passwd"
    pygithub = Github(auth=Auth.Token(token_for(server)), base_url=server.url,
                      **fast()).get_repo(f"{OWNER}/{NAME}")
    entry = pygithub.get_contents("out.yml", ref=HEAD2)
    assert not isinstance(entry, list) and entry.type == "symlink"
    assert entry.raw_data["target"] == "/etc/passwd"


def test_a_moved_repository_answers_its_old_name_with_a_redirect(
        server: GitHubServer, integration: GithubIntegration) -> None:
    server.add_installation(5151, "other-org")
    server.move_repo(OWNER, NAME, "other-org", "ops", installation_id=5151)
    headers = {"Authorization": f"token {token_for(server, installation=5151)}"}
    old = f"{server.url}/repos/{OWNER}/{NAME}"
    moved = httpx.get(old, headers=headers)
    assert moved.status_code == 301
    repo_id = server.repo("other-org", "ops").id
    assert moved.headers["Location"] == f"{server.url}/repositories/{repo_id}"
    assert moved.json()["message"] == "Moved Permanently"
    followed = httpx.get(old, headers=headers, follow_redirects=True).json()
    assert followed["full_name"] == "other-org/ops" and followed["id"] == repo_id
    gh = Github(auth=Auth.Token(token_for(server, installation=5151)), base_url=server.url,
                **fast())
    assert gh.get_repo(f"{OWNER}/{NAME}").full_name == "other-org/ops"  # PyGithub follows
    assert integration.get_repo_installation(OWNER, NAME).id == 5151
    before = Github(auth=Auth.Token(token_for(server)), base_url=server.url, **fast())
    with pytest.raises(GithubException) as caught:  # the old owner's installation lost it
        before.get_repo("other-org/ops").get_issue(7).create_comment("still mine?")
    assert caught.value.status == 403


def test_a_write_to_an_old_name_is_a_temporary_redirect(github_server: GitHubServer) -> None:
    server = github_server
    server.add_repo(OWNER, NAME, INSTALLATION, {BASE: BASE_TREE})
    server.move_repo(OWNER, NAME, new_name="renamed")
    headers = {"Authorization": f"token {token_for(server)}"}
    reply = httpx.post(f"{server.url}/repos/{OWNER}/{NAME}/issues?x=1", headers=headers,
                       json={"title": "t"})
    repo_id = server.repo(OWNER, "renamed").id
    assert reply.status_code == 307
    assert reply.headers["Location"] == f"{server.url}/repositories/{repo_id}/issues?x=1"
    assert server.created_issues(OWNER, "renamed") == []
    again = httpx.post(reply.headers["Location"], headers=headers, json={"title": "t"})
    assert again.status_code == 201 and again.json()["repository_url"].endswith("/renamed")


def test_compare_gives_the_merge_base_of_a_pull_request(server: GitHubServer, gh: Github
                                                         ) -> None:
    """The merge base stays the commit the pull request branched from when its base branch
    moves on (what a baseline is checked on)."""
    server.add_commit(OWNER, NAME, "e" * 40, {"README.md": b"newer\n"}, branch="main")
    repo = gh.get_repo(f"{OWNER}/{NAME}")
    comparison = repo.compare("main", HEAD)
    assert comparison.merge_base_commit.sha == BASE
    assert (comparison.status, comparison.ahead_by, comparison.behind_by) == ("diverged", 1, 1)
    assert repo.compare(BASE, HEAD).merge_base_commit.sha == BASE
    with pytest.raises(GithubException) as caught:
        repo.compare(BASE, "no-such-branch")
    assert caught.value.status == 404
