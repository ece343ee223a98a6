"""Repositories: metadata, contents, archives and raw files, commits, collaborators."""

from __future__ import annotations

import posixpath
from datetime import timedelta

from .archives import Link, build_tarball
from .errors import DOCS, ApiError, not_found
from .formats import random_token, utcnow
from .handling import ApiBase
from .model import Json, Repo
from .routes import Call, Reply

DOWNLOAD_LIFETIME = timedelta(minutes=5)
# The contents API answers JSON for files up to 1 MB; larger ones (up to 100 MB) only with the
# raw or object media types, and not at all beyond 100 MB.
CONTENT_JSON_LIMIT, CONTENT_RAW_LIMIT = 1024 * 1024, 100 * 1024 * 1024
RAW_MEDIA = ("application/vnd.github.raw", "application/vnd.github.v3.raw")
OBJECT_MEDIA = ("application/vnd.github.object", "application/vnd.github.v3.object")
TOO_LARGE_MESSAGE = (
    "This API returns blobs up to 1 MB in size. The requested blob is too large to fetch via "
    "this API, but you can use the raw media type or the Git Data API to request blobs up to "
    "100 MB in size."
)


def link_target(tree: dict[str, bytes], path: str, hops: int = 40) -> str | None:
    """The regular file the link at ``path`` leads to inside ``tree`` (through other links,
    as git resolves them), or None when it leads out of the repository, to a folder or to
    nothing."""
    for _ in range(hops):
        data = tree.get(path)
        if not isinstance(data, Link):
            return path if data is not None else None
        target = data.decode(errors="replace")
        if target.startswith("/"):
            return None
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if joined == ".." or joined.startswith("../"):
            return None
        path = joined
    return None  # a loop


class ReposApi(ApiBase):
    """GET /repos/{owner}/{repo}, contents, tarballs, commits and permissions."""

    def get_repo(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}; with a user's token, what that user may do there."""
        repo = self.repo(call)
        out = self.v.repo(repo)
        if call.user_token is not None:
            out["permissions"] = self.v.permission(repo, call.user_token.user)["user"][
                "permissions"]
        return Reply(200, out)

    def get_content(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/contents/{path}: a file, or a directory listing."""
        repo = self.repo(call)
        ref = call.query.get("ref") or repo.default_branch
        sha = self.resolve(repo, ref)
        tree, path = repo.trees[sha], call.params.get("path", "").strip("/")
        if path in tree:
            data = tree[path]
            if isinstance(data, Link):  # followed only to a regular file of the repository
                target = link_target(tree, path)
                if target is None:
                    return self.symlink_content(call, repo, ref, sha, path, data)
                path, data = target, tree[target]
            return self.file_content(call, repo, ref, sha, path, data)
        listing = self.listing(repo, ref, sha, path)
        if not listing:
            raise not_found(f"{DOCS}/repos/contents#get-repository-content")
        return Reply(200, listing)

    def file_content(
        self, call: Call, repo: Repo, ref: str, sha: str, path: str, data: bytes
    ) -> Reply:
        """One file as GitHub serves it by media type: the raw bytes (up to 100 MB), the object
        form (no content beyond 1 MB: `encoding` "none"), or JSON, which is refused with 403
        `too_large` beyond 1 MB."""
        accept = call.headers.get("accept", "").lower()
        if len(data) > CONTENT_RAW_LIMIT or (
                len(data) > CONTENT_JSON_LIMIT and not accept.startswith(RAW_MEDIA + OBJECT_MEDIA)):
            raise ApiError(403, TOO_LARGE_MESSAGE,
                           f"{DOCS}/repos/contents#get-repository-content",
                           errors=[{"resource": "Blob", "field": "data", "code": "too_large"}])
        if accept.startswith(RAW_MEDIA):
            return Reply(200, raw=data, content_type="application/vnd.github.raw; charset=utf-8",
                         headers={"X-GitHub-Media-Type": "github.raw; format=raw"})
        entry = self.v.content(repo, ref, sha, path, data)
        if len(data) > CONTENT_JSON_LIMIT:
            entry.update(content="", encoding="none")
        return Reply(200, entry)

    def symlink_content(
        self, call: Call, repo: Repo, ref: str, sha: str, path: str, link: Link
    ) -> Reply:
        """A link GitHub does not follow (out of the repository, to a folder, to nothing): the
        object describing the link itself, or with the raw media type the link's blob."""
        if call.headers.get("accept", "").lower().startswith(RAW_MEDIA):
            return Reply(200, raw=bytes(link),
                         content_type="application/vnd.github.raw; charset=utf-8",
                         headers={"X-GitHub-Media-Type": "github.raw; format=raw"})
        return Reply(200, self.v.symlink(repo, ref, sha, path, link))

    def listing(self, repo: Repo, ref: str, sha: str, folder: str) -> list[Json]:
        """Entries directly inside `folder` ("" for the root) at commit `sha`."""
        prefix = f"{folder}/" if folder else ""
        children: dict[str, bytes | None] = {}
        for path, data in repo.trees[sha].items():
            if path.startswith(prefix):
                head, slash, _ = path[len(prefix):].partition("/")
                children[prefix + head] = None if slash else data
        return [self.v.content(repo, ref, sha, p, d) for p, d in sorted(children.items())]

    def tarball(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/tarball/{ref}: 302 to a short-lived download URL."""
        repo = self.repo(call)
        sha = self.resolve(repo, call.params.get("ref"))
        ticket = random_token("", 32)
        self.s.downloads[ticket] = (repo.id, sha, utcnow() + DOWNLOAD_LIFETIME)
        location = f"{self.s.url}/_codeload/{repo.full_name}/legacy.tar.gz/{sha}?token={ticket}"
        return Reply(302, None, {"Location": location})

    def download_repo(self, call: Call) -> Repo:
        """The repository of a download URL, if the ticket or a token allows it (404 if not)."""
        repo = self.s.repos.get(f"{call.params['owner']}/{call.params['repo']}".lower())
        if repo is None:
            raise not_found()
        ticket = self.s.downloads.get(call.query.get("token", ""))
        if not repo.private or (ticket and ticket[0] == repo.id and ticket[2] > utcnow()):
            return repo
        credential = call.headers.get("authorization", "").partition(" ")[2].strip()
        token = self.s.tokens.get(credential)
        if token is None or token.expired or not self.covers(token, repo):
            raise not_found()
        return repo

    def codeload(self, call: Call) -> Reply:
        """The archive host: a gzipped tar whose top folder is `{owner}-{repo}-{sha7}/`."""
        repo = self.download_repo(call)
        sha = self.resolve(repo, call.params["ref"])
        prefix = f"{repo.owner.login}-{repo.name}-{sha[:7]}"
        data = build_tarball(prefix, repo.trees[sha], sha, repo.commits[sha].date)
        disposition = f"attachment; filename={prefix}.tar.gz"
        return Reply(200, raw=data, content_type="application/x-gzip",
                     headers={"Content-Disposition": disposition})

    def raw(self, call: Call) -> Reply:
        """The raw-file host that `download_url` points at."""
        repo = self.download_repo(call)
        tree = repo.trees.get(self.resolve(repo, call.params["ref"]), {})
        if call.params["path"] not in tree:
            raise not_found()
        return Reply(200, raw=tree[call.params["path"]], content_type="text/plain; charset=utf-8")

    def get_commit(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/commits/{ref}."""
        repo = self.repo(call)
        try:
            sha = self.resolve(repo, call.params["ref"])
        except ApiError:
            raise ApiError(422, f"No commit found for SHA: {call.params['ref']}") from None
        return Reply(200, self.v.commit(repo, repo.commits[sha]))

    def compare(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/compare/{base}...{head}: the merge base (the first
        ancestor of the head, breadth first, that the base descends from or is), and the
        commits from it to the head; `files` is not modelled."""
        repo = self.repo(call)
        base_ref, sep, head_ref = call.params["basehead"].partition("...")
        if not sep:
            raise ApiError(404, "Not Found")
        base, head = self.resolve(repo, base_ref), self.resolve(repo, head_ref)
        below_base = _ancestors(repo, base)
        merge_base, order, seen = None, [head], {head}
        while order:
            sha = order.pop(0)
            if sha in below_base:
                merge_base = sha
                break
            for parent in repo.commits[sha].parents if sha in repo.commits else []:
                if parent not in seen:
                    seen.add(parent)
                    order.append(parent)
        if merge_base is None:
            raise ApiError(404, f"No common ancestor between {base_ref} and {head_ref}.")
        ahead = sorted(_ancestors(repo, head) - _ancestors(repo, merge_base))
        behind = _ancestors(repo, base) - _ancestors(repo, merge_base)
        status = "identical" if base == head else "ahead" if not behind else \
            "behind" if not ahead else "diverged"
        return Reply(200, self.v.comparison(repo, repo.commits[base], repo.commits[merge_base],
                                            [repo.commits[sha] for sha in ahead], status,
                                            len(behind)))

    def get_permission(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/collaborators/{username}/permission."""
        repo = self.repo(call)
        user = self.s.users.get(call.params["username"].lower())
        if user is None:
            raise not_found()
        return Reply(200, self.v.permission(repo, user))


def _ancestors(repo: Repo, sha: str) -> set[str]:
    """``sha`` and every commit it descends from."""
    found, stack = {sha}, [sha]
    while stack:
        commit = repo.commits.get(stack.pop())
        for parent in commit.parents if commit is not None else []:
            if parent not in found:
                found.add(parent)
                stack.append(parent)
    return found
