"""Shared fixtures: one way to start each kind of candidate, one planted-bug candidate."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from service import Service
from sqlalchemy import Engine

from bot.queue import SqlJobQueue
from bot.testing.github import GitHubServer
from checks import CandidateConfig, CandidateProcess, preset
from checks.spec import Spec, load_file

FIXTURES = Path(__file__).parent / "fixtures"
# The GitHub test server seeded and schema-checked, with PyGithub clients (server, integration,
# gh) for tests/test_testing_github_*.py.
pytest_plugins = ["testing_github"]


POSTGRES_URL = os.environ.get("ALIGNBOT_TEST_POSTGRES_URL")


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
    """The tests' PostgreSQL database (ALIGNBOT_TEST_POSTGRES_URL), emptied; the test is
    skipped where there is none."""
    if not POSTGRES_URL:
        pytest.skip("PostgreSQL tests need ALIGNBOT_TEST_POSTGRES_URL (make test sets it)")
    from sqlalchemy import MetaData

    from bot.storage import make_engine

    engine = make_engine(POSTGRES_URL)
    tables = MetaData()
    tables.reflect(engine)
    tables.drop_all(engine)
    engine.dispose()
    return POSTGRES_URL


@pytest.fixture()
def engine(database_url: str) -> Iterator[Engine]:
    """The App's database (SQLite, and PostgreSQL when configured), migrated to the current
    schema. tests/test_storage.py has its own, unmigrated."""
    from bot.storage import make_engine, migrate

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
