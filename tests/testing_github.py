"""Shared by tests/test_testing_github_*.py: the GitHub test server seeded and with its every
response checked against GitHub's OpenAPI description, PyGithub clients, tokens, JWTs.

A pytest plugin, listed once in ``conftest.py`` (``pytest_plugins``): its fixtures ``server``,
``integration`` and ``gh`` are there for every test module, which just names them.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from github import Auth, Github, GithubIntegration

from alignbot.bot.testing.github import Exchange, GitHubServer, OpenApiSubset, load_subset

OWNER, NAME, INSTALLATION = "octo-org", "ops-lib", 4242
BASE, HEAD, HEAD2 = "b" * 40, "c" * 40, "d" * 40
BASE_TREE = {"README.md": "ops library\n", "ops/add.py": "def add(a, b):\n    return a + b\n"}
HEAD_TREE = {**BASE_TREE, ".alignbot.yml": "candidate: ops\n", "ops/add.py": "add = None\n"}
WEBHOOKS = Path(__file__).parent / "fixtures" / "github" / "webhooks"
INTERNAL = ("/_codeload/", "/_raw/", "/login/oauth/")  # other hosts: codeload, raw, github.com
ERROR_SCHEMAS = {
    True: {"$ref": "#/components/schemas/validation-error"},
    False: {"$ref": "#/components/schemas/basic-error"},
}


def fast(**options: Any) -> dict[str, Any]:
    """PyGithub options for tests: no client-side throttling, no retries unless asked."""
    return {"seconds_between_requests": None, "seconds_between_writes": None, **options}


def schema_problems(subset: OpenApiSubset, exchange: Exchange) -> list[str]:
    """Why a recorded response body breaks GitHub's schema for its operation and status."""
    where = f"{exchange.method} {exchange.path} -> {exchange.status}"
    if exchange.path.startswith(INTERNAL) or exchange.status == 302 or exchange.raw:
        return []
    schema = None
    if exchange.template is not None:
        if subset.operation(exchange.method, exchange.template) is None:
            return [f"{where}: {exchange.template} is not in the OpenAPI subset"]
        schema = subset.response_schema(exchange.method, exchange.template, exchange.status)
    if schema is None and exchange.status >= 400:
        schema = ERROR_SCHEMAS["errors" in (exchange.response or {})]
    if schema is None:
        return [f"{where}: status not documented for this operation"]
    return [f"{where}: {explain(error)}" for error in subset.errors(schema, exchange.response)]


def explain(error: jsonschema.ValidationError) -> str:
    """The most specific reason behind a (possibly anyOf/oneOf) schema violation."""
    while error.context:
        error = jsonschema.exceptions.best_match(error.context)
    return f"{'/'.join(map(str, error.absolute_path))}: {error.message[:160]}"


@pytest.fixture()
def server(github_server: GitHubServer) -> Iterator[GitHubServer]:
    """The shared GitHub test server with one installed repository and pull request #7;
    every response it sent is checked against the OpenAPI schemas when the test ends."""
    github_server.add_repo(OWNER, NAME, INSTALLATION, {BASE: BASE_TREE})
    github_server.add_pull(OWNER, NAME, 7, HEAD, BASE, "Speed up add", "alice",
                           head_tree=HEAD_TREE, files=[{"filename": "ops/add.py",
                                                        "patch": "@@ -1,2 +1 @@\n-a\n-b\n+c"}])
    yield github_server
    assert_documented(github_server)


def assert_documented(server: GitHubServer) -> None:
    """Every response the server sent matches GitHub's schema, and no handler crashed."""
    subset = load_subset()
    problems = [p for exchange in server.exchanges for p in schema_problems(subset, exchange)]
    assert not server.errors, server.errors[0]
    assert not problems, "\n".join(problems[:20])


@pytest.fixture()
def integration(server: GitHubServer) -> GithubIntegration:
    """PyGithub's App client pointed at the server."""
    auth = Auth.AppAuth(server.app_id, server.private_key_pem)
    return GithubIntegration(auth=auth, base_url=server.url, **fast())


@pytest.fixture()
def gh(integration: GithubIntegration) -> Github:
    """PyGithub acting as the installation (it fetches and refreshes its own token)."""
    return integration.get_github_for_installation(INSTALLATION)


def token_for(server: GitHubServer, installation: int = INSTALLATION, **body: Any) -> str:
    """A fresh installation token, asked for over HTTP with a JWT."""
    app_jwt = Auth.AppAuth(server.app_id, server.private_key_pem).create_jwt()
    reply = httpx.post(f"{server.url}/app/installations/{installation}/access_tokens",
                       headers={"Authorization": f"Bearer {app_jwt}"}, json=body)
    assert reply.status_code == 201, reply.text
    return str(reply.json()["token"])


@functools.cache
def stranger_key() -> rsa.RSAPrivateKey:
    """An RSA key that is not the App's."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def file_text(repo: Any, path: str, ref: str | None = None) -> bytes:
    """A file's content through the contents API."""
    found = repo.get_contents(path, ref=ref) if ref else repo.get_contents(path)
    assert not isinstance(found, list)
    return bytes(found.decoded_content)


def signed_jwt(key: Any, **claims: Any) -> str:
    """An RS256 JWT with default iat/exp around now."""
    now = int(time.time())
    return jwt.encode({"iat": now - 60, "exp": now + 300, **claims}, key, algorithm="RS256")
