"""The App's own endpoints: the App, its installations, installation tokens, users."""

from __future__ import annotations

from collections.abc import Mapping

from .errors import ApiError, not_found
from .formats import iso, random_token, utcnow
from .handling import ApiBase
from .model import Installation, Json, Token
from .routes import Call, Reply
from .state import LEVELS


class AppsApi(ApiBase):
    """GET /app, installations, access tokens, installation repositories, users."""

    def get_app(self, call: Call) -> Reply:
        """GET /app."""
        return Reply(200, self.v.app())

    def list_installations(self, call: Call) -> Reply:
        """GET /app/installations."""
        found = sorted(self.s.installations.values(), key=lambda inst: inst.id)
        return self.paginate(call, found, self.v.installation)

    def installation(self, call: Call) -> Installation:
        """The installation named in the path (404 when unknown)."""
        try:
            return self.s.installations[int(call.params["installation_id"])]
        except (KeyError, ValueError):
            raise not_found() from None

    def get_installation(self, call: Call) -> Reply:
        """GET /app/installations/{installation_id}."""
        return Reply(200, self.v.installation(self.installation(call)))

    def get_repo_installation(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/installation."""
        repo = self.s.repos.get(f"{call.params['owner']}/{call.params['repo']}".lower())
        if repo is None or repo.installation_id is None:
            raise not_found()
        return Reply(200, self.v.installation(self.s.installations[repo.installation_id]))

    def create_token(self, call: Call) -> Reply:
        """POST /app/installations/{installation_id}/access_tokens."""
        inst = self.installation(call)
        body = call.json
        token = Token(
            random_token("ghs_"), inst.id, utcnow() + self.s.token_lifetime,
            self.token_permissions(body.get("permissions") or {}),
            self.token_repositories(inst, body),
        )
        self.s.tokens[token.value] = token
        out: Json = {
            "token": token.value, "expires_at": iso(token.expires_at),
            "permissions": token.permissions, "repository_selection": inst.repository_selection,
        }
        if token.repositories is not None:
            chosen = sorted(token.repositories)
            out["repositories"] = [self.v.repo(r) for r in self.s.repos.values() if r.id in chosen]
        return Reply(201, out)

    def token_permissions(self, asked: Mapping[str, str]) -> dict[str, str]:
        """The App's permissions, narrowed to those asked for (422 when asking for more)."""
        granted = dict(self.s.permissions)
        if not asked:
            return granted
        for name, level in asked.items():
            if LEVELS.get(level, 9) > LEVELS.get(granted.get(name, "none"), 0):
                raise ApiError(422, "The permissions requested are not granted to this "
                               "installation.")
        return {**dict(asked), "metadata": "read"}

    def token_repositories(self, inst: Installation, body: Json) -> set[int] | None:
        """The repository ids a token is narrowed to, or None for all of the installation's."""
        names = {str(n).lower() for n in body.get("repositories") or []}
        ids = set(body.get("repository_ids") or [])
        if not names and not ids:
            return None
        held = [r for r in self.s.repos.values() if r.installation_id == inst.id]
        if not names <= {r.name.lower() for r in held} or not ids <= {r.id for r in held}:
            raise ApiError(422, "There is at least one repository that does not exist or is "
                           "not accessible to the parent installation.")
        return {r.id for r in held if r.name.lower() in names or r.id in ids}

    def list_installation_repos(self, call: Call) -> Reply:
        """GET /installation/repositories."""
        token = call.token
        if token is None:
            raise ApiError(401, "Requires authentication")
        held = [r for r in self.s.repos.values() if self.covers(token, r)]
        inst = self.s.installations[token.installation_id]

        def wrap(page: list[Json]) -> Json:
            return {"total_count": len(held), "repository_selection": inst.repository_selection,
                    "repositories": page}

        return self.paginate(call, sorted(held, key=lambda r: r.id), self.v.repo, wrap)

    def get_user(self, call: Call) -> Reply:
        """GET /users/{username}."""
        user = self.s.users.get(call.params["username"].lower())
        if user is None:
            raise not_found()
        return Reply(200, self.v.public_user(user))
