"""The GitHub test server: real HTTP on 127.0.0.1 in a background thread."""

from __future__ import annotations

import json
import socket
import struct
import threading
import traceback
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from .api import Api
from .errors import ApiError
from .faults import FaultInjection
from .formats import random_token
from .model import Exchange, Json
from .openapi import validation_available
from .routes import Reply, split_target
from .webhooks import Webhooks, signed_delivery


class _HttpServer(ThreadingHTTPServer):
    """The listening socket; each connection gets a thread (and keep-alive)."""

    daemon_threads = True
    github: GitHubServer


class _Handler(BaseHTTPRequestHandler):
    """Reads a request, asks the GitHubServer, writes the reply."""

    protocol_version = "HTTP/1.1"
    server: _HttpServer
    timeout = 60
    # Headers and body go out in separate writes; without this, Nagle's algorithm and the
    # client's delayed ACK stall every keep-alive response by ~40 ms.
    disable_nagle_algorithm = True

    def serve(self) -> None:
        """Answer any method."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {key.lower(): value for key, value in self.headers.items()}
        reply = self.server.github.dispatch(self.command, self.path, headers, raw)
        if reply.drop:  # a connection reset: RST instead of an answer
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        payload = reply.payload()
        self.send_response(reply.status)
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = serve

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet; the server keeps its own request log."""


class GitHubServer(FaultInjection):
    """A fake api.github.com on 127.0.0.1 for end-to-end tests of the App over real HTTP.

    Point PyGithub at `.url`: `GithubIntegration(auth=Auth.AppAuth(server.app_id,
    server.private_key_pem), base_url=server.url)` and `Github(base_url=server.url, ...)`.
    Pass `seconds_between_requests=None, seconds_between_writes=None` in tests, or PyGithub
    sleeps 0.25 s per request and 1 s per write. Comments, issues and check runs made with an
    installation token belong to `{app_slug}[bot]` (type "Bot").

    Every response carries X-RateLimit-* headers and is logged in `requests` as
    (method, path, status) and in `exchanges` with both bodies (a reset connection is logged in
    `requests` with status 0 only). Faults queued with `fail_next`, `outage`,
    `secondary_rate_limit` and `primary_rate_limit` are served before routing and
    authentication, first queued first. Request bodies are checked against GitHub's
    OpenAPI request schemas (422 `Invalid request.` as GitHub answers) unless
    `validate_requests=False`; that check needs `jsonschema` and is skipped with a warning
    where it is not installed.
    """

    def __init__(self, *, validate_requests: bool = True, **options: Any) -> None:
        super().__init__(**options)
        if validate_requests and not validation_available():
            warnings.warn("jsonschema is not installed: request bodies are not checked against "
                          "GitHub's schemas", stacklevel=2)
            validate_requests = False
        self._api = Api(self, validate_requests=validate_requests)
        self._http: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> GitHubServer:
        """Listen on a free port of 127.0.0.1 and serve in a background thread."""
        self._http = _HttpServer(("127.0.0.1", 0), _Handler)
        self._http.github = self
        self._url = f"http://127.0.0.1:{self._http.server_address[1]}"
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,),
                                        daemon=True, name="github-test-server")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._http = self._thread = None

    def __enter__(self) -> GitHubServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    # -- webhooks ---------------------------------------------------------------------------

    def webhook(self, name: str, owner: str | None = None, repo: str | None = None,
                **refs: Any) -> Json:
        """The payload GitHub would deliver now for `name` ("pull_request.synchronize", ...).

        refs: `before` and `branch` (push), `number` (pull_request.*, pull_request_review.*),
        `review_id`, `comment_id`
        (issue_comment.*), `check_run_id` (check_run.*), `installation_id` and `repositories`
        (installation*), `changes` (*.edited), `sender` (login; default the author).
        """
        with self.lock:
            return Webhooks(self, self._api.v).build(name, owner, repo, **refs)

    def delivery(self, name: str, payload: Json, secret: str) -> tuple[dict[str, str], bytes]:
        """Signed headers (X-GitHub-Event, X-GitHub-Delivery, X-Hub-Signature-256) and body."""
        headers, body = signed_delivery(name, payload, secret)
        headers["X-GitHub-Hook-Installation-Target-ID"] = str(self.app_id)
        return headers, body


    # -- dispatch ---------------------------------------------------------------------------

    def dispatch(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> Reply:
        """Answer one HTTP request and record it."""
        with self.lock:
            path, _ = split_target(target)
            template: str | None = None
            reply = self._take_fault(method, path)
            if reply is None:
                reply, template = self._answer(method, target, headers, raw)
            resource = "search" if path.startswith("/search/") else "core"
            budget = self._api.rate_headers(headers, resource, spend=path != "/rate_limit")
            reply.headers = {**budget, **reply.headers}
            reply.headers.setdefault("X-GitHub-Request-Id", random_token("", 16).upper())
            reply.headers.setdefault("X-GitHub-Media-Type", "github.v3; format=json")
            self._record(method, path, template, raw, reply)
            return reply

    def _answer(
        self, method: str, target: str, headers: dict[str, str], raw: bytes
    ) -> tuple[Reply, str | None]:
        template = None
        moved = self._api.moved(method, target)
        if moved is not None:
            return moved
        try:
            call = self._api.route(method, target, headers)
            template = call.route.template
            return self._api.handle(call, raw), template
        except ApiError as error:
            return Reply(error.status, error.body, error.headers), template
        except Exception as error:  # a bug in this fake: report it, never hang the client
            self.errors.append(traceback.format_exc())
            return Reply(500, {"message": f"github test server bug: {error!r}"}), template

    def _record(
        self, method: str, path: str, template: str | None, raw: bytes, reply: Reply
    ) -> None:
        if reply.drop:
            self.requests.append((method, path, 0))
            return
        self.requests.append((method, path, reply.status))
        try:
            request = json.loads(raw) if raw.strip() else None
        except ValueError:
            request = raw
        self.exchanges.append(
            Exchange(method, path, template, reply.status, request,
                     reply.body if reply.raw is None else None, raw=reply.raw is not None)
        )
