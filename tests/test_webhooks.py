"""bot/webhooks.py and bot/app.py: signatures, routing, one-transaction accept, real HTTP."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from sqlalchemy import Engine, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from alignbot.bot.app import create_app
from alignbot.bot.queue import JobRequest, JobState, SqlJobQueue
from alignbot.bot.settings import load_settings
from alignbot.bot.storage import Delivery, InstallationRow, make_engine, migrate
from alignbot.bot.webhooks import (
    Event,
    PayloadError,
    SqlDeliveryStore,
    WebhookRouter,
    accept,
    is_kind,
    require,
    verify_signature,
)

SECRET = b"current-secret"
OLD_SECRET = b"old-secret"
LIMIT = 64 * 1024


# -- helpers -----------------------------------------------------------------------------------


def sign(body: bytes, secret: bytes = SECRET) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def headers(
    body: bytes, event: str = "pull_request", delivery: str | None = None, **extra: str
) -> dict[str, str]:
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(body),
        "Content-Type": "application/json",
        **extra,
    }


def pr_payload(action: str = "opened", number: int = 7, fork_deleted: bool = False) -> bytes:
    head_repo = None if fork_deleted else {"full_name": "fork/ops", "id": 2}
    return json.dumps(
        {
            "action": action,
            "number": number,
            "pull_request": {
                "number": number,
                "head": {"sha": "c0ffee", "repo": head_repo},
                "base": {"repo": {"full_name": "org/ops"}},
            },
            "repository": {"full_name": "org/ops", "id": 1},
            "installation": {"id": 42},
        }
    ).encode()


def make_router() -> WebhookRouter:
    """A tiny stand-in for a feature module: pull requests → one superseding job each."""
    router = WebhookRouter()

    @router.on("pull_request", "opened", "synchronize")
    def check(event: Event) -> list[JobRequest]:
        head_repo = require(event.payload, "pull_request", "head", "repo", "full_name")
        pr = require(event.payload, "pull_request")
        base_repo = require(pr, "base", "repo", "full_name")
        number = require(pr, "number")
        return [
            JobRequest(
                "align",
                f"{base_repo}#{number}",
                {"head_repo": head_repo, "sha": require(pr, "head", "sha")},
                supersede=True,
            )
        ]

    return router


@pytest.fixture()
def store(engine: Engine) -> SqlDeliveryStore:
    return SqlDeliveryStore(engine)


def post(store: SqlDeliveryStore, body: bytes, hdrs: dict[str, str]) -> tuple[int, Any]:
    result = accept(store, make_router(), hdrs, body, secrets=[SECRET], max_body_bytes=LIMIT)
    return result.status_code, result.body


# -- verify_signature ----------------------------------------------------------------------------


def test_githubs_documented_test_vector() -> None:
    assert verify_signature(
        [b"It's a Secret to Everybody"],
        b"Hello, World!",
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
    )


def test_any_of_the_rotating_secrets_verifies() -> None:
    body = b'{"zen": "Keep it logically awesome."}'
    assert verify_signature([SECRET, OLD_SECRET], body, sign(body, OLD_SECRET))
    assert verify_signature([SECRET, OLD_SECRET], body, sign(body, SECRET))
    assert not verify_signature([SECRET], body, sign(body, OLD_SECRET))


@pytest.mark.parametrize(
    "header",
    [None, "", "sha256=", "sha256=zz", "sha1=" + "0" * 40, "757107ea", "sha256=" + "0" * 64],
)
def test_bad_signatures_fail(header: str | None) -> None:
    assert not verify_signature([SECRET], b"{}", header)


def test_no_secret_verifies_nothing() -> None:
    assert not verify_signature([], b"{}", sign(b"{}"))


# -- require and the router ----------------------------------------------------------------------


def test_require_names_the_missing_or_null_step() -> None:
    payload = {"pull_request": {"head": {"repo": None}, "labels": [{"name": "ops"}]}}
    assert require(payload, "pull_request", "labels", 0, "name") == "ops"
    with pytest.raises(PayloadError, match=r"pull_request\.head\.repo is null"):
        require(payload, "pull_request", "head", "repo", "full_name")
    with pytest.raises(PayloadError, match=r"pull_request\.base is missing"):
        require(payload, "pull_request", "base")
    with pytest.raises(PayloadError, match=r"pull_request\.labels\.3 is missing"):
        require(payload, "pull_request", "labels", 3)


def event(name: str, action: str | None = None, **payload: Any) -> Event:
    return Event(name, action, "d-1", {"action": action, **payload})


def test_router_matches_event_and_action() -> None:
    router = WebhookRouter()
    seen: list[str] = []

    @router.on("issue_comment", "created")
    def created(e: Event) -> list[JobRequest]:
        seen.append("created")
        return [JobRequest("command", "o/r#1")]

    @router.on("issue_comment")
    def any_action(e: Event) -> list[JobRequest]:
        seen.append("any")
        return []

    assert router.route(event("issue_comment", "created")) == [JobRequest("command", "o/r#1")]
    assert seen == ["any", "created"]
    assert router.route(event("issue_comment", "deleted")) == []
    assert router.route(event("star", "created")) == []  # unknown event: no jobs


def test_a_failing_handler_is_skipped_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    router = WebhookRouter()
    router.add(lambda e: [JobRequest("a", "k")], "push")
    router.add(lambda e: require(e.payload, "head_commit", "id"), "push")
    router.add(lambda e: e.payload["nope"], "push")  # a plain bug: KeyError
    router.add(lambda e: "not a list", "push")  # type: ignore[arg-type, return-value]
    other = WebhookRouter()
    other.add(lambda e: [JobRequest("b", "k")], "push")
    router.include(other)

    jobs = router.route(event("push", None, head_commit=None))
    assert [job.kind for job in jobs] == ["a", "b"]
    assert "head_commit is null" in caplog.text
    assert "KeyError" in caplog.text


# -- accept, without HTTP ------------------------------------------------------------------------


def test_accept_queues_the_routed_jobs(store: SqlDeliveryStore) -> None:
    body = pr_payload()
    status, answer = post(store, body, headers(body, delivery="d-1"))
    assert (status, answer) == (202, {"status": "queued", "jobs": 1})
    [job] = store.queue.list()
    assert (job.kind, job.key, job.delivery_id) == ("align", "org/ops#7", "d-1")
    assert job.payload == {"head_repo": "fork/ops", "sha": "c0ffee"}


def test_a_redelivery_is_a_no_op(store: SqlDeliveryStore) -> None:
    body = pr_payload()
    assert post(store, body, headers(body, delivery="same"))[0] == 202
    assert post(store, body, headers(body, delivery="same")) == (200, {"status": "duplicate"})
    assert len(store.queue.list()) == 1
    with Session(store.engine) as session:
        delivery = session.get(Delivery, "same")
    assert delivery is not None
    assert (delivery.event, delivery.action, delivery.installation_id, delivery.jobs) == (
        "pull_request", "opened", 42, 1,
    )


def test_a_newer_push_supersedes_the_queued_check(store: SqlDeliveryStore) -> None:
    first, second = pr_payload("opened"), pr_payload("synchronize")
    post(store, first, headers(first))
    post(store, second, headers(second))
    assert [job.state for job in store.queue.list()] == [JobState.SUPERSEDED, JobState.QUEUED]


@pytest.mark.parametrize(
    ("body", "change", "status"),
    [
        (b"{}", {"X-Hub-Signature-256": sign(b"{}", b"wrong")}, 401),
        (b"{}", {"X-Hub-Signature-256": ""}, 401),
        (b"x" * (LIMIT + 1), {}, 413),
        (b"{not json", {}, 400),
        (b"[1, 2]", {}, 400),
        (b'{"n": NaN}', {}, 400),
        (b"\xff\xfe", {}, 400),
        (b"[" * 50_000, {}, 400),
        (b"{}", {"X-GitHub-Event": ""}, 400),
        (b"{}", {"X-GitHub-Delivery": ""}, 400),
        (b"{}", {"X-GitHub-Delivery": "d" * 65}, 400),
    ],
    ids=[
        "wrong-secret", "no-signature", "too-large", "malformed-json", "json-array", "nan",
        "not-utf8", "deeply-nested", "no-event", "no-delivery", "long-delivery",
    ],
)
def test_bad_input_is_a_4xx(
    store: SqlDeliveryStore, body: bytes, change: dict[str, str], status: int
) -> None:
    hdrs = {**headers(body), **change}
    hdrs = {name: value for name, value in hdrs.items() if value}
    got, answer = post(store, body, hdrs)
    assert got == status
    assert set(answer) == {"error"}
    assert store.queue.list() == []


def test_a_deleted_fork_is_accepted_without_a_job(
    store: SqlDeliveryStore, caplog: pytest.LogCaptureFixture
) -> None:
    body = pr_payload(fork_deleted=True)
    assert post(store, body, headers(body)) == (200, {"status": "ignored", "jobs": 0})
    assert "pull_request.head.repo is null" in caplog.text
    assert store.queue.list() == []


def test_unknown_events_and_ping_are_recorded_without_jobs(store: SqlDeliveryStore) -> None:
    star = json.dumps({"action": "created"}).encode()
    assert post(store, star, headers(star, "star", "d-star"))[1] == {"status": "ignored", "jobs": 0}
    ping = json.dumps({"zen": "Design for failure.", "hook_id": 1}).encode()
    assert post(store, ping, headers(ping, "ping", "d-ping"))[1] == {"status": "pong", "jobs": 0}
    assert store.seen("d-star") and store.seen("d-ping")


def test_a_form_encoded_delivery() -> None:
    from urllib.parse import urlencode

    body = urlencode({"payload": pr_payload().decode()}).encode()
    hdrs = headers(body, **{"Content-Type": "application/x-www-form-urlencoded"})
    engine = make_engine("sqlite://")
    migrate(engine)
    assert post(SqlDeliveryStore(engine), body, hdrs)[0] == 202


def installation_event(store: SqlDeliveryStore, name: str, action: str, **extra: Any) -> None:
    payload = {
        "action": action,
        "installation": {
            "id": 99,
            "account": {"login": "org", "type": "Organization"},
            "repository_selection": "selected",
        },
        **extra,
    }
    body = json.dumps(payload).encode()
    assert post(store, body, headers(body, name)) == (200, {"status": "recorded", "jobs": 0})


def installation(engine: Engine) -> InstallationRow:
    with Session(engine) as session:
        return session.execute(select(InstallationRow)).scalar_one()


def test_installation_events_keep_the_installation_row(
    engine: Engine, store: SqlDeliveryStore
) -> None:
    repos = [{"id": 1, "full_name": "org/ops"}, {"id": 2, "full_name": "org/docs"}]
    installation_event(store, "installation", "created", repositories=repos)
    row = installation(engine)
    assert (row.id, row.account_login, row.account_type) == (99, "org", "Organization")
    assert (row.repositories, row.suspended, row.deleted) == (["org/docs", "org/ops"], False, False)

    installation_event(
        store,
        "installation_repositories",
        "added",
        repositories_added=[{"full_name": "org/kernels"}],
        repositories_removed=[{"full_name": "org/docs"}],
    )
    assert installation(engine).repositories == ["org/kernels", "org/ops"]
    installation_event(store, "installation", "suspend")
    assert installation(engine).suspended
    installation_event(store, "installation", "unsuspend")
    installation_event(store, "installation", "deleted")
    row = installation(engine)
    assert (row.suspended, row.deleted) == (False, True)


@pytest.mark.parametrize(
    "payload",
    [
        {"action": "created", "installation": {"id": "x"}},
        {"action": "created", "installation": {"id": 10**30, "account": {"login": "org"}}},
        {"action": "created\u0000", "installation": {"id": 5, "account": {"login": "o\u0000"}}},
        {"action": ["created"], "installation": {"id": 6, "account": {"login": 7}}},
        {"action": "created", "installation": None, "repositories": "all"},
    ],
    ids=["id-not-a-number", "id-too-large", "nul-characters", "wrong-types", "null"],
)
def test_odd_installation_payloads_are_only_recorded(
    store: SqlDeliveryStore, payload: dict[str, Any]
) -> None:
    body = json.dumps(payload).encode()
    assert post(store, body, headers(body, "installation"))[0] == 200


class BrokenStore:
    def record(self, event: Event, requests: Sequence[JobRequest]) -> list[int] | None:
        raise OperationalError("INSERT", {}, Exception("database is locked"))


def test_a_database_failure_answers_503_with_advice() -> None:
    body = pr_payload()
    result = accept(BrokenStore(), make_router(), headers(body), body, secrets=[SECRET])
    assert result.status_code == 503
    assert "redeliver" in result.body["error"]


# -- over real HTTP ------------------------------------------------------------------------------


class Server:
    def __init__(self, app: FastAPI) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Engine]]:
    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('http') / 'bot.db'}")
    migrate(engine)
    settings = load_settings(
        {
            "ALIGNBOT_APP_ID": "1",
            "ALIGNBOT_PRIVATE_KEY": "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----",
            "ALIGNBOT_WEBHOOK_SECRETS": f"{SECRET.decode()},{OLD_SECRET.decode()}",
            "ALIGNBOT_MAX_BODY_BYTES": str(LIMIT),
        }
    )
    with (
        Server(create_app(settings, engine, make_router(), freeze_gc=False)) as url,
        httpx.Client(base_url=url, timeout=10) as client,
    ):
        yield client, engine
    engine.dispose()


def test_http_queues_a_pull_request(service: tuple[httpx.Client, Engine]) -> None:
    client, engine = service
    body = pr_payload(number=101)
    started = time.perf_counter()
    response = client.post("/webhook", content=body, headers=headers(body))
    assert time.perf_counter() - started < 2
    assert (response.status_code, response.json()) == (202, {"status": "queued", "jobs": 1})
    assert [job.key for job in SqlJobQueue(engine).list()][-1] == "org/ops#101"


def test_http_redelivery(service: tuple[httpx.Client, Engine]) -> None:
    client, _ = service
    body = pr_payload(number=102)
    hdrs = headers(body, delivery="http-redelivery")
    assert client.post("/webhook", content=body, headers=hdrs).status_code == 202
    response = client.post("/webhook", content=body, headers=hdrs)
    assert (response.status_code, response.json()) == (200, {"status": "duplicate"})


def test_http_old_secret_during_rotation(service: tuple[httpx.Client, Engine]) -> None:
    client, _ = service
    body = pr_payload(number=103)
    hdrs = {**headers(body), "X-Hub-Signature-256": sign(body, OLD_SECRET)}
    assert client.post("/webhook", content=body, headers=hdrs).status_code == 202


def test_http_rejections(service: tuple[httpx.Client, Engine]) -> None:
    client, _ = service
    body = pr_payload(number=104)
    bad = {**headers(body), "X-Hub-Signature-256": sign(body, b"guess")}
    cases = [
        (client.post("/webhook", content=body, headers=bad), 401),
        (client.post("/webhook", content=body), 401),
        (client.post("/webhook", content=b"{oops", headers=headers(b"{oops")), 400),
        (client.post("/webhook", content=b"{}", headers={"X-Hub-Signature-256": sign(b"{}")}), 400),
        (client.get("/nowhere"), 404),
        (client.get("/webhook"), 405),
    ]
    for response, status in cases:
        assert response.status_code == status, response.text
        assert set(response.json()) == {"error"}


def test_http_oversize_with_content_length(service: tuple[httpx.Client, Engine]) -> None:
    client, _ = service
    body = b"x" * (LIMIT + 1)
    response = client.post("/webhook", content=body, headers=headers(body))
    assert response.status_code == 413
    assert "larger than" in response.json()["error"]


def test_http_oversize_without_content_length(service: tuple[httpx.Client, Engine]) -> None:
    client, _ = service
    chunk = b"x" * 8192
    chunks = 3 * LIMIT // len(chunk)

    def stream() -> Iterator[bytes]:  # chunked: no Content-Length to check
        yield from (chunk for _ in range(chunks))

    hdrs = headers(chunk * chunks)
    response = client.post("/webhook", content=stream(), headers=hdrs)
    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    # the connection is still usable afterwards
    assert client.get("/healthz").json() == {"status": "ok"}


def test_http_deleted_fork_and_unknown_event(service: tuple[httpx.Client, Engine]) -> None:
    client, _ = service
    body = pr_payload(number=105, fork_deleted=True)
    response = client.post("/webhook", content=body, headers=headers(body))
    assert (response.status_code, response.json()) == (200, {"status": "ignored", "jobs": 0})
    star = b'{"action": "created"}'
    response = client.post("/webhook", content=star, headers=headers(star, "star"))
    assert (response.status_code, response.json()["status"]) == (200, "ignored")


def test_http_healthz(service: tuple[httpx.Client, Engine]) -> None:
    client, _ = service
    response = client.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_healthz_reports_a_dead_database(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'missing-dir' / 'bot.db'}")
    settings = load_settings(
        {
            "ALIGNBOT_APP_ID": "1",
            "ALIGNBOT_PRIVATE_KEY": "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----",
            "ALIGNBOT_WEBHOOK_SECRETS": "s",
        }
    )
    with (
        Server(create_app(settings, engine, WebhookRouter(), freeze_gc=False)) as url,
        httpx.Client(base_url=url) as client,
    ):
        response = client.get("/healthz")
    assert (response.status_code, response.json()) == (503, {"error": "database unavailable"})


REAL_EXAMPLES = sorted((Path(__file__).parent / "fixtures" / "github" / "webhooks").glob("*.json"))
ALIGN_ACTIONS = {"pull_request.opened", "pull_request.synchronize", "pull_request.reopened",
                 "pull_request.ready_for_review"}


@pytest.fixture(scope="module")
def app_service(tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[httpx.Client, Engine]]:
    """The app with the real feature routers (alignbot.bot.alignment), over real HTTP."""
    from alignbot.bot import alignment

    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('real') / 'bot.db'}")
    migrate(engine)
    router = WebhookRouter()
    alignment.register(router)
    settings = load_settings({
        "ALIGNBOT_APP_ID": "1",
        "ALIGNBOT_PRIVATE_KEY": "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----",
        "ALIGNBOT_WEBHOOK_SECRETS": SECRET.decode()})
    with (Server(create_app(settings, engine, router, freeze_gc=False)) as url,
          httpx.Client(base_url=url, timeout=10) as client):
        yield client, engine
    engine.dispose()


@pytest.mark.parametrize("example", REAL_EXAMPLES, ids=lambda p: p.stem)
def test_real_github_examples_go_through_the_endpoint(
        example: Path, app_service: tuple[httpx.Client, Engine]) -> None:
    """GitHub's own example payloads (@octokit/webhooks-examples): each is accepted, and only
    the pull-request actions that change code queue an alignment job."""
    client, engine = app_service
    body = example.read_bytes()
    name = example.stem.split(".")[0]
    response = client.post("/webhook", content=body,
                           headers=headers(body, event=name, delivery=f"real-{example.stem}"))
    queued = SqlJobQueue(engine).list()
    if example.stem in ALIGN_ACTIONS and json.loads(body)["pull_request"]["draft"] is False:
        assert (response.status_code, response.json()["jobs"]) == (202, 1)
        assert queued and queued[-1].kind == "align"
    else:
        assert response.status_code == 200, response.text


# -- payloads of the wrong shape -----------------------------------------------------------------


def test_require_checks_the_json_type() -> None:
    payload = {"comment": {"id": "12", "n": 3, "flag": True, "big": 2**70, "body": None}}
    assert require(payload, "comment", "n", kind=int) == 3
    with pytest.raises(PayloadError, match=r"comment\.id is str, not an integer"):
        require(payload, "comment", "id", kind=int)
    with pytest.raises(PayloadError, match=r"comment\.flag is bool, not an integer"):
        require(payload, "comment", "flag", kind=int)
    with pytest.raises(PayloadError, match=r"comment\.big is int, not an integer"):
        require(payload, "comment", "big", kind=int)  # more than a BIGINT column holds
    with pytest.raises(PayloadError, match=r"comment is dict, not a string or an array"):
        require(payload, "comment", kind=(str, list))
    with pytest.raises(PayloadError, match=r"comment\.body is null"):
        require(payload, "comment", "body", kind=str)


MUTANTS: list[Any] = [None, "7", 7, 1.5, True, [], {"x": 1}]


def _paths(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """Every field of a payload (the first item of each array), containers included."""
    if path:
        yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list) and value:
        yield from _paths(value[0], (*path, 0))


def _mutated(payload: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(payload))
    target = copy
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return copy


def _kind_of(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _dotted(path: tuple[str | int, ...]) -> str:
    return ".".join("*" if isinstance(step, int) else step for step in path)


@pytest.mark.slow
def test_signed_payloads_of_the_wrong_shape_are_answered_and_logged_in_one_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Every field of GitHub's example payloads, turned into each other JSON type, signed and
    accepted by the real feature routers: 2xx or 4xx, never a traceback; where a handler
    reads the field, exactly one warning naming the delivery and the field."""
    from alignbot.bot import alignment, commands
    from alignbot.bot.webhooks import SHAPES

    engine = make_engine(f"sqlite:///{tmp_path / 'bot.db'}", sqlite_synchronous="NORMAL")
    migrate(engine)
    store = SqlDeliveryStore(engine)
    router = WebhookRouter()
    alignment.register(router)
    commands.register(router)
    caplog.set_level("INFO")
    cases = 0
    for example in REAL_EXAMPLES:
        name = example.stem.split(".")[0]
        original = json.loads(example.read_text())
        # a real pull request comment, so that the commands handler reads everything
        if name == "issue_comment":
            original["issue"]["pull_request"] = {"url": "https://api.github.com/x"}
            original["comment"]["body"] = "/help"
        read = {**SHAPES["*"], **SHAPES.get(name, {})}
        for index, path in enumerate(_paths(original)):
            dotted = _dotted(path)
            current = _kind_of(eval_path(original, path))
            mutants = [m for m in MUTANTS if _kind_of(m) != current]
            if dotted not in read and len(path) > 2:  # fields no handler reads: a sample
                mutants = [mutants[index % len(mutants)]]
            for value in mutants:
                cases += 1
                delivery = f"fuzz-{cases}"
                body = json.dumps(_mutated(original, path, value)).encode()
                caplog.clear()
                result = accept(store, router, headers(body, event=name, delivery=delivery),
                                body, secrets=[SECRET])
                where = f"{example.stem}: {dotted} = {value!r}"
                assert 200 <= result.status_code < 300 or 400 <= result.status_code < 500, where
                assert not [r for r in caplog.records if r.exc_info or r.levelname == "ERROR"], \
                    (where, caplog.text)
                assert "Traceback" not in caplog.text, where
                warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
                assert len(warnings) <= 1, (where, warnings)
                event = Event(name, original.get("action"), delivery, original)
                if dotted in read and value is not None and not is_kind(value, read[dotted]) \
                        and router.handlers(event):
                    assert len(warnings) == 1, where
                    assert delivery in warnings[0] and dotted.split(".*")[0] in \
                        warnings[0].replace("[0]", ""), (where, warnings)
    assert cases > 3000
    engine.dispose()


def eval_path(payload: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        payload = payload[step]
    return payload
