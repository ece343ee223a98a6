"""A stateful stand-in for the GitHub REST API, served over real HTTP on 127.0.0.1.

`GitHubServer` is the entry point: seed repositories, pull requests and comments, point the
App (or PyGithub) at `server.url`, and read back what it posted. Responses follow GitHub's
OpenAPI description (`openapi-subset.json`, beside this module).

Modules: `model` (the stored objects), `state` (seeding and inspection), `views` (GitHub's
JSON), `routes` and `handling` (requests, credentials, permissions, pagination), one module per
API family (`apps`, `rate_limits`, `repos`, `pulls`, `issues`, `check_runs`, `search`) joined
in `api`, `webhooks` (payloads and signed deliveries), `faults` (outages and rate limits),
`archives` (tarballs, `Link` for symlinks), `openapi` (the schemas) and `server` (HTTP).
"""

from .archives import Link, build_tarball
from .errors import ApiError
from .model import (
    CheckRun,
    Comment,
    CommentReaction,
    Commit,
    Exchange,
    Installation,
    Issue,
    Json,
    Pull,
    Repo,
    Review,
    Token,
    User,
)
from .openapi import OpenApiSubset, load_subset, validation_available
from .routes import Call, Reply, Route
from .server import GitHubServer
from .state import GitHubState
from .webhooks import Webhooks, signed_delivery

__all__ = [
    "ApiError",
    "Call",
    "CheckRun",
    "Comment",
    "CommentReaction",
    "Commit",
    "Exchange",
    "GitHubServer",
    "GitHubState",
    "Installation",
    "Issue",
    "Json",
    "Link",
    "OpenApiSubset",
    "Pull",
    "Reply",
    "Repo",
    "Review",
    "Route",
    "Token",
    "User",
    "Webhooks",
    "build_tarball",
    "load_subset",
    "signed_delivery",
    "validation_available",
]
