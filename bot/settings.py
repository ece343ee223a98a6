"""Environment settings for the GitHub App (``ALIGNBOT_*``), with one clear error per bad value."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from sqlalchemy.engine import make_url

ENV_PREFIX = "ALIGNBOT_"
MIB = 1024 * 1024

# Set while load_settings() validates an explicit mapping, so that os.environ is not merged in.
_ONLY_INIT: ContextVar[bool] = ContextVar("alignbot_settings_only_init", default=False)


class SettingsError(ValueError):
    """Settings are missing or malformed; the message has one line per variable."""


class Settings(BaseSettings):
    """The service's configuration. Secrets are ``SecretStr`` and never appear in ``repr``."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="ignore", frozen=True
    )

    app_id: int = Field(gt=0, description="the GitHub App's numeric id (a positive integer)")
    # Declared before private_key: its validator reads the file named here.
    private_key_file: Path | None = Field(
        default=None, description="the path of a readable PEM private key file"
    )
    private_key: SecretStr = Field(
        default=SecretStr(""),
        validate_default=True,
        description=(
            "the GitHub App's PEM private key (-----BEGIN ... PRIVATE KEY-----), "
            f"or set {ENV_PREFIX}PRIVATE_KEY_FILE"
        ),
    )
    webhook_secrets: Annotated[list[SecretStr], NoDecode] = Field(
        min_length=1,
        description="one or more webhook secrets, comma-separated (several during rotation)",
    )
    database_url: str = Field(
        default="sqlite:///alignbot.db",
        description="an SQLAlchemy URL: sqlite:///path.db (relative to the current folder, "
                    "with its -wal and -shm files beside it) or "
                    "postgresql+psycopg://user:password@host/db",
    )
    database_wait_seconds: float = Field(
        default=60, ge=0, le=3600,
        description="seconds, 0 to 3600, that `serve`, `worker` and `remind-sweep` wait at "
                    "start for an unreachable PostgreSQL server (trying every 2 s), before "
                    "they exit",
    )
    github_api_url: str = Field(
        default="https://api.github.com",
        description="the GitHub REST API base URL (http:// or https://)",
    )
    github_web_url: str = Field(
        default="https://github.com",
        description="GitHub's web address (http:// or https://), where people sign in to the "
                    "status pages (/login/oauth/…)",
    )
    public_url: str | None = Field(
        default=None,
        description="the App's address as people reach it (http:// or https://): the status "
                    "pages' links in check runs and the sign-in's callback; unset: check runs "
                    "link no page",
    )
    oauth_client_id: str = Field(
        default="", max_length=100,
        description="the GitHub App's client id (Iv…), for signing in to private "
                    "repositories' status pages; empty: those pages need no one and show "
                    "nothing",
    )
    oauth_client_secret: SecretStr = Field(
        default=SecretStr(""), description="the GitHub App's client secret (with the client id)")
    session_key: SecretStr = Field(
        default=SecretStr(""),
        description="at least 32 characters that sign and encrypt the status pages' session "
                    "cookie (needed with the client id); changing it signs everyone out",
    )
    status_history: int = Field(
        default=20, ge=1, le=500,
        description="the default branch's runs a status page shows, 1 to 500")
    host: str = Field(default="127.0.0.1", min_length=1, description="the address to listen on")
    port: int = Field(default=8080, ge=0, le=65535,
                      description="the TCP port the web service listens on, 0 to 65535")
    workers: int = Field(default=1, ge=1, le=64,
                         description="worker threads (jobs run at once) of `serve` or "
                                     "`worker`, 1 to 64")
    metrics_port: int | None = Field(
        default=None, ge=1, le=65535,
        description="the port an `alignbot worker` serves its /metrics on (on host); "
                    "unset: none (the web process serves /metrics on its own port)")
    health_file: Path | None = Field(
        default=None,
        description="a file an `alignbot worker` rewrites every 10 s while its threads run "
                    "and its database answers, which `alignbot worker --check-health` reads "
                    "(compose.yaml's health check); unset: none",
    )
    log_format: Literal["json", "text"] = Field(
        default="text", description="json (one object a line) or text")
    job_timeout_seconds: float = Field(
        default=1800, gt=0,
        description="a positive number of seconds: the longest one job (a check with its "
                    "merge base's run, a shard, a command, a reminder sweep) may run; past "
                    "it the worker kills its sandbox, fails it for good and its check run "
                    "says so (default: two sandboxed runs of "
                    f"{ENV_PREFIX}SANDBOX_WALL_SECONDS' default, the head's and the base's)",
    )
    job_lease_seconds: float = Field(
        default=60, ge=3, le=3600,
        description="seconds a running job stays its worker's without a heartbeat (3 to "
                    "3600; the same for every process on one database)",
    )
    max_body_bytes: int = Field(
        default=25 * MIB, gt=0,
        description="a positive number of bytes: the largest webhook body taken (a larger one "
                    "is answered 413; GitHub sends up to 25 MiB)",
    )
    # What an unauthenticated sender can hold: bodies are read before their signature is known.
    body_timeout_seconds: float = Field(
        default=10, gt=0, le=600,
        description="seconds a webhook body may take to arrive, above 0 and at most 600 "
        "(GitHub itself gives up on a delivery after 10 s); a slower one is cut with 408")
    max_unverified_bodies: int = Field(
        default=16, ge=1, le=10_000,
        description="webhook bodies read at once before their signature is checked, 1 to "
        "10000; more are answered 503 with Retry-After")
    max_connections: int = Field(
        default=256, ge=1, le=100_000,
        description="open HTTP connections and requests the web service takes at once, 1 to "
        "100000; more are answered 503")
    github_max_wait: float = Field(
        default=120, gt=0, description="the longest rate-limit wait in seconds (positive)"
    )
    github_write_interval: float = Field(
        default=1.0, ge=0,
        description="seconds, 0 or more, between two writes to GitHub (comments, check runs) "
                    "by one client, as GitHub asks of integrations that create content",
    )
    github_request_retries: int = Field(
        default=5, ge=0, le=10,
        description="times one GitHub request is retried within the call on a 5xx answer or a "
        "connection error (0 to 10; 5: about 15 s), before the job's own retries take over",
    )
    github_retry_horizon: float = Field(
        default=1800, ge=0,
        description="seconds a job keeps retrying after its first GitHub 5xx or network error "
        "(0 or more)",
    )
    github_retry_base: float = Field(
        default=5, gt=0,
        description="the first retry's delay in seconds, doubled per retry (positive)",
    )
    github_retry_cap: float = Field(
        default=300, gt=0,
        description="the longest delay between two retries in seconds (positive)",
    )
    max_shards: int = Field(
        default=4, ge=1, le=16, description="the most shard jobs one check is split into, 1 "
        "to 16 (a repository asks for them with `shards`; 1 runs every check whole)"
    )
    baseline: bool = Field(
        default=True, description="check each pull request's merge base too (cached) and fail "
        "only on new divergences, for repositories that leave `baseline: enabled` on; false: "
        "no merge-base check anywhere (every finding is new)"
    )
    sandbox_wall_seconds: int = Field(
        default=900, gt=0,
        description="a positive number of seconds: the wall-clock time one sandboxed check "
                    "(setup commands and engine) may take before it is killed (at most the "
                    "repository's timeout_minutes)",
    )
    sandbox_memory_bytes: int = Field(
        default=4 * 1024 * MIB, gt=0,
        description="a positive number of bytes: the memory of one sandbox, all its processes "
        "together and the files it writes in its work folder (a cgroup), and each process's "
        "address space",
    )
    sandbox_processes: int = Field(
        default=256, gt=0,
        description="a positive number: the processes and threads of one sandbox together",
    )
    sandbox_cpus: float = Field(
        default=4.0, gt=0,
        description="a positive number of cores: the CPU time one sandbox may use per second, "
        "all its processes together",
    )
    sandbox_disk_bytes: int = Field(
        default=2 * 1024 * MIB, ge=0,
        description="bytes of the work folder of one sandbox (a size-limited tmpfs: its files "
        "count against its memory as well); 0 for no disk quota",
    )
    sandbox_bwrap: str = Field(
        default="bwrap",
        description="the bubblewrap command that gives each sandbox its own namespaces and a "
        "file system of the system folders and the work folder alone (a name on PATH or an "
        "absolute path); empty to run without namespaces",
    )
    # The sandbox's allow-list: only the service says what pull-request code may read.
    sandbox_interpreters: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="absolute folders, comma-separated: candidate interpreters or virtual "
        "environments an operator installed, which the sandbox may read and "
        "`candidate.python` may name",
    )
    sandbox_hide: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="absolute folders, comma-separated, hidden from the sandbox besides the "
        "database's and the key's folders, /run/secrets and the service user's home",
    )
    sandbox_dir: Path | None = Field(
        default=None,
        description="an absolute folder for the sandboxes' work folders (default: the temp "
        "folder); what a previous run left there is removed at start-up",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        if _ONLY_INIT.get():
            return (init_settings,)
        return (init_settings, env_settings, dotenv_settings, file_secret_settings)

    @field_validator("webhook_secrets", mode="before")
    @classmethod
    def _split_secrets(cls, value: Any) -> Any:
        if isinstance(value, str | SecretStr):
            text = value.get_secret_value() if isinstance(value, SecretStr) else value
            return [part.strip() for part in text.split(",") if part.strip()]
        return value

    @field_validator("sandbox_interpreters", "sandbox_hide", mode="before")
    @classmethod
    def _split_paths(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("sandbox_interpreters", "sandbox_hide")
    @classmethod
    def _absolute_paths(cls, value: list[Path]) -> list[Path]:
        for path in value:
            if not path.is_absolute():
                raise ValueError(f"{str(path)!r} is not an absolute path")
        return value

    @field_validator("sandbox_dir")
    @classmethod
    def _absolute_dir(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_absolute():
            raise ValueError(f"{str(value)!r} is not an absolute path")
        return value

    @field_validator("private_key_file")
    @classmethod
    def _readable_file(cls, value: Path | None) -> Path | None:
        if value is not None:
            _read_pem(value)
        return value

    @field_validator("private_key")
    @classmethod
    def _load_private_key(cls, value: SecretStr, info: ValidationInfo) -> SecretStr:
        text = value.get_secret_value()
        key_file = info.data.get("private_key_file")
        if not text and key_file is not None:
            text = _read_pem(key_file)
        if not text:
            raise ValueError("missing")
        if "\n" not in text and "\\n" in text:  # a PEM squeezed into one env line
            text = text.replace("\\n", "\n")
        if not _looks_like_pem(text):
            raise ValueError("not a PEM private key")
        return SecretStr(text)

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        try:
            url = make_url(value)
        except Exception as error:  # SQLAlchemy raises ArgumentError, ValueError, …
            raise ValueError("not a database URL") from error
        if url.get_backend_name() not in ("sqlite", "postgresql"):
            raise ValueError(f"unsupported database {url.get_backend_name()!r}")
        return value

    @field_validator("github_api_url", "github_web_url", "public_url")
    @classmethod
    def _api_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"got {value!r}")
        return value.rstrip("/")

    @field_validator("session_key")
    @classmethod
    def _session_key(cls, value: SecretStr, info: ValidationInfo) -> SecretStr:
        if info.data.get("oauth_client_id") and len(value.get_secret_value()) < 32:
            raise ValueError("shorter than 32 characters (a GitHub login needs it)")
        return value

    @field_validator("oauth_client_secret")
    @classmethod
    def _client_secret(cls, value: SecretStr, info: ValidationInfo) -> SecretStr:
        if info.data.get("oauth_client_id") and not value.get_secret_value():
            raise ValueError("missing (the client id is set)")
        return value

    @property
    def sign_in(self) -> bool:
        """Whether people can sign in with GitHub (the client and the cookie key are set)."""
        return bool(self.oauth_client_id and self.oauth_client_secret.get_secret_value()
                    and self.session_key.get_secret_value())

    def webhook_secret_bytes(self) -> list[bytes]:
        """The webhook secrets as the bytes HMAC keys are made of."""
        return [secret.get_secret_value().encode() for secret in self.webhook_secrets]

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            if name == "database_url":
                value = redact_url(str(value))
            yield name, value


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``, for logs and reprs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparsable URL>"


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Settings from ``env`` (default ``os.environ``); ``SettingsError`` names each problem."""
    source = os.environ if env is None else env
    prefixed = {key.upper(): value for key, value in source.items()}
    values: dict[str, Any] = {}
    for name in Settings.model_fields:
        raw = prefixed.get(env_name(name))
        if raw is not None and raw.strip() != "":
            values[name] = raw
    token = _ONLY_INIT.set(True)
    try:
        return Settings(**values)
    except ValidationError as error:
        raise SettingsError(format_errors(error, values)) from None
    finally:
        _ONLY_INIT.reset(token)


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def format_errors(error: ValidationError, values: Mapping[str, Any]) -> str:
    """One line per variable: its name, what is wrong, and what it should be."""
    problems: dict[str, str] = {}
    for item in error.errors(include_url=False, include_input=False):
        field = str(item["loc"][0]) if item["loc"] else ""
        if field not in Settings.model_fields or field in problems:
            continue
        problems[field] = _problem(field, item["type"], item["msg"], values.get(field))
    if "private_key_file" in problems:  # the key's own "missing" would only repeat it
        problems.pop("private_key", None)
    lines = []
    for field, problem in problems.items():
        expected = Settings.model_fields[field].description or "a valid value"
        lines.append(f"{env_name(field)}: {problem}; expected {expected}")
    return "invalid alignbot settings:\n" + "\n".join(f"  {line}" for line in lines)


def _problem(field: str, kind: str, message: str, raw: Any) -> str:
    if kind == "missing":
        return "missing"
    if kind == "value_error":
        return message.removeprefix("Value error, ")
    if field in ("private_key", "webhook_secrets", "oauth_client_secret", "session_key") \
            or raw is None:
        return "invalid value"
    shown = str(raw)
    return f"got {shown[:60]!r}" + ("…" if len(shown) > 60 else "")


def _read_pem(path: Path) -> str:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or error
        raise ValueError(f"cannot read {str(path)!r}: {reason}") from None
    if not _looks_like_pem(text):
        raise ValueError(f"{str(path)!r} does not hold a PEM private key")
    return text


def _looks_like_pem(text: str) -> bool:
    return "-----BEGIN" in text and "PRIVATE KEY-----" in text
