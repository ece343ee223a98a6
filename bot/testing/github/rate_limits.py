"""GitHub's primary rate limits: the budgets, their headers and GET /rate_limit.

The limits are read at call time: a benchmark may raise `rate_limits.CORE_LIMIT`."""

from __future__ import annotations

import time
from collections.abc import Mapping

from .handling import ApiBase
from .routes import Call, Reply

CORE_LIMIT, SEARCH_LIMIT, ANONYMOUS_LIMIT = 5000, 30, 60


class RateLimitsApi(ApiBase):
    """X-RateLimit-* accounting per credential, and GET /rate_limit."""

    def rate_headers(
        self, headers: Mapping[str, str], resource: str, spend: bool = True
    ) -> dict[str, str]:
        """X-RateLimit-* for the caller, spending one request from its budget."""
        identity = headers.get("authorization", "anonymous").split(" ")[-1]
        limit, window = (SEARCH_LIMIT, 60) if resource == "search" else (CORE_LIMIT, 3600)
        if identity == "anonymous" and resource == "core":
            limit = ANONYMOUS_LIMIT
        now = int(time.time())
        used, reset = self.budgets.get((identity, resource), (0, now + window))
        used, reset = (0, now + window) if now >= reset else (used, reset)
        used += 1 if spend else 0
        self.budgets[(identity, resource)] = (used, reset)
        return {
            "X-RateLimit-Limit": str(limit), "X-RateLimit-Remaining": str(max(0, limit - used)),
            "X-RateLimit-Used": str(used), "X-RateLimit-Reset": str(reset),
            "X-RateLimit-Resource": resource,
        }

    def get_rate_limit(self, call: Call) -> Reply:
        """GET /rate_limit (free, as on GitHub)."""
        identity = call.headers.get("authorization", "anonymous").split(" ")[-1]
        now = int(time.time())
        core = self.budgets.get((identity, "core"), (0, now + 3600))
        search = self.budgets.get((identity, "search"), (0, now + 60))
        resources = {
            "core": self.v.rate(CORE_LIMIT, core[0], core[1], "core"),
            "search": self.v.rate(SEARCH_LIMIT, search[0], search[1], "search"),
        }
        return Reply(200, {"resources": resources, "rate": resources["core"]})
