"""Shared fixtures: one way to start each kind of candidate, one planted-bug candidate."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service import Service
from sqlalchemy import Engine

from alignbot.bot.queue import SqlJobQueue
from alignbot.bot.testing.github import GitHubServer
from alignbot.checks import CandidateConfig, CandidateProcess, preset
from alignbot.checks.cli import main as check_main
from alignbot.checks.spec import Spec
from alignbot.checks.spec_loading import load_file

FIXTURES = Path(__file__).parent / "fixtures"
# The GitHub test server seeded and schema-checked, with PyGithub clients (server, integration,
# gh) for tests/test_testing_github_*.py.
pytest_plugins = ["testing_github"]


POSTGRES_URL = os.environ.get("ALIGNBOT_TEST_POSTGRES_URL")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under `pytest -n 2 --dist loadgroup` (make test), the tests that share a module-scoped
    fixture (a whole check run, a built wheel) go to one worker, which makes it once; the other
    tests are spread one by one.

    A test that shares such a fixture with a test marked ``slow`` is slow too: under
    ``make test-fast`` (``-m "not slow"``) it would make the fixture all the same."""
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        if "planted_report_text" in info.names_closure:  # one worker makes it, for all
            group = "planted-report"
        elif any(defs and defs[-1].scope == "module" for defs in info.name2fixturedefs.values()):
            group = item.nodeid.split("::", 1)[0]
        else:
            continue
        item.add_marker(pytest.mark.xdist_group(group))
        groups.setdefault(group, []).append(item)
    for members in groups.values():
        if any(member.get_closest_marker("slow") for member in members):
            for member in members:
                member.add_marker(pytest.mark.slow)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The app's database: a SQLite file, and PostgreSQL too when `make test` started one
    (ALIGNBOT_TEST_POSTGRES_URL); the PostgreSQL database is emptied for each test."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'bot.db'}"
        return
    yield empty_postgres()


@pytest.fixture()
def postgres_url() -> str:
    """PostgreSQL only (several processes sharing one queue), emptied for the test."""
    return empty_postgres()


def empty_postgres() -> str:
    """This test process's PostgreSQL database (see ``_worker_database``), emptied; the test
    is skipped where there is none (no ALIGNBOT_TEST_POSTGRES_URL)."""
    if not POSTGRES_URL:
        pytest.skip("PostgreSQL tests need ALIGNBOT_TEST_POSTGRES_URL (make test sets it)")
    from sqlalchemy import MetaData

    from alignbot.bot.storage import make_engine

    url = _worker_database(POSTGRES_URL, os.environ.get("PYTEST_XDIST_WORKER"))
    engine = make_engine(url)
    tables = MetaData()
    tables.reflect(engine)
    tables.drop_all(engine)
    engine.dispose()
    return url


@functools.cache
def _worker_database(url: str, worker: str | None) -> str:
    """``url`` itself without pytest-xdist; under it, a database of its own for each xdist
    worker (``<database>_gw0``, …) on the same server, created on first use, so that one
    worker's emptying never drops the tables of a test running on another."""
    if worker is None:
        return url
    from sqlalchemy import create_engine, make_url, text

    base = make_url(url)
    name = f"{base.database}_{worker}"
    server = create_engine(base, isolation_level="AUTOCOMMIT")  # CREATE DATABASE: no transaction
    try:
        with server.connect() as conn:
            exists = conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :name"),
                                  {"name": name}).first()
            if exists is None:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        server.dispose()
    return base.set(database=name).render_as_string(hide_password=False)


@pytest.fixture()
def engine(database_url: str) -> Iterator[Engine]:
    """The App's database (SQLite, and PostgreSQL when configured), migrated to the current
    schema. tests/test_storage.py has its own, unmigrated."""
    from alignbot.bot.storage import make_engine, migrate

    engine = make_engine(database_url)
    migrate(engine)
    yield engine
    engine.dispose()


@pytest.fixture()
def queue(engine: Engine) -> SqlJobQueue:
    """The job queue on ``engine``."""
    return SqlJobQueue(engine)


@pytest.fixture()
def github_server() -> Iterator[GitHubServer]:
    """The one fake GitHub: a real HTTP server on 127.0.0.1 checked against GitHub's
    OpenAPI description (tests/github_server.py)."""
    with GitHubServer() as server:
        yield server


@pytest.fixture()
def make_service(github_server: GitHubServer, tmp_path: Path) -> Iterator[object]:
    """``make_service(**env)`` starts `alignbot serve` in its own process against
    ``github_server`` (tests/service.py); every service started is stopped after the test."""
    started: list[Service] = []

    def make(folder: Path | None = None, **env: str) -> Service:
        folder = folder or tmp_path / f"service-{len(started)}"
        folder.mkdir(parents=True, exist_ok=True)
        service = Service(github_server, folder, **env)
        started.append(service)
        service.start()
        return service

    yield make
    for service in started:
        service.stop()


@pytest.fixture(scope="session")
def torch_candidate() -> Iterator[CandidateProcess]:
    """The reference checked against itself, in its own worker process."""
    with CandidateProcess(preset("torch")) as candidate:
        yield candidate


@pytest.fixture(scope="session")
def planted_specs() -> dict[str, Spec]:
    return {spec.name.rsplit(".", 1)[-1]: spec for spec in load_file(FIXTURES / "planted_specs.py")}


@pytest.fixture(scope="session")
def planted_prelude() -> str:
    return (FIXTURES / "planted_prelude.py").read_text()


@pytest.fixture(scope="session")
def planted_report_text(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The JSON text, as written, of the minimized, verified and triaged report of every
    planted bug (seed 7), made once per session (with timings: a test reads the seconds).
    One job: the report does not depend on how many (tests/test_jobs.py), and worker
    processes would each import torch and start a candidate of their own."""
    path = tmp_path_factory.mktemp("planted") / "report.json"
    code = check_main(["check", "--prelude", (FIXTURES / "planted_prelude.py").read_text(),
                       "--spec-file", str(FIXTURES / "planted_specs.py"), "--timeout", "3",
                       "--seed", "7", "--jobs", "1", "--json", str(path), "--no-progress"])
    assert code == 1
    return path.read_text()


@pytest.fixture(scope="session")
def planted_report(planted_report_text: str) -> dict[str, Any]:
    """The planted-bug report, parsed: the repro, minimizer and triage tests all read it."""
    report: dict[str, Any] = json.loads(planted_report_text)
    assert report["findings"]
    return report


@pytest.fixture()
def make_candidate() -> Iterator[object]:
    """``make_candidate(prelude, **config)`` starts a worker that is closed after the test."""
    started: list[CandidateProcess] = []

    def make(prelude: str, **kwargs: object) -> CandidateProcess:
        process = CandidateProcess(CandidateConfig(name="test", prelude=prelude, **kwargs))  # type: ignore[arg-type]
        started.append(process)
        process.start()
        return process

    yield make
    for process in started:
        process.close()
