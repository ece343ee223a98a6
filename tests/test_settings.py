"""bot/settings.py: environment settings, one error line per bad variable, hidden secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from alignbot.bot.github import api_options
from alignbot.bot.settings import Settings, SettingsError, load_settings

PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n-----END RSA PRIVATE KEY-----\n"  # noqa: E501
VALID = {
    "ALIGNBOT_APP_ID": "1234",
    "ALIGNBOT_PRIVATE_KEY": PEM,
    "ALIGNBOT_WEBHOOK_SECRETS": "first-secret",
}


def error_lines(env: dict[str, str]) -> list[str]:
    with pytest.raises(SettingsError) as caught:
        load_settings(env)
    lines = str(caught.value).splitlines()
    assert lines[0] == "invalid alignbot settings:"
    return [line.strip() for line in lines[1:]]


def test_defaults() -> None:
    settings = load_settings(VALID)
    assert settings.app_id == 1234
    assert settings.private_key.get_secret_value() == PEM
    assert settings.webhook_secret_bytes() == [b"first-secret"]
    assert settings.database_url == "sqlite:///alignbot.db"
    assert settings.github_api_url == "https://api.github.com"
    assert (settings.host, settings.port, settings.workers) == ("127.0.0.1", 8080, 1)
    assert settings.job_timeout_seconds == 1800
    assert settings.max_body_bytes == 25 * 1024 * 1024
    assert settings.baseline is True  # pull requests are judged against their merge base
    assert load_settings({**VALID, "ALIGNBOT_BASELINE": "false"}).baseline is False


def test_each_missing_variable_has_its_own_line() -> None:
    lines = error_lines({})
    assert [line.split(":")[0] for line in lines] == [
        "ALIGNBOT_APP_ID",
        "ALIGNBOT_PRIVATE_KEY",
        "ALIGNBOT_WEBHOOK_SECRETS",
    ]
    assert all("missing; expected" in line for line in lines)
    assert "ALIGNBOT_PRIVATE_KEY_FILE" in lines[1]  # says the alternative


def test_each_malformed_variable_has_its_own_line() -> None:
    env = {
        **VALID,
        "ALIGNBOT_APP_ID": "twelve",
        "ALIGNBOT_PORT": "99999",
        "ALIGNBOT_WORKERS": "0",
        "ALIGNBOT_JOB_TIMEOUT_SECONDS": "soon",
        "ALIGNBOT_MAX_BODY_BYTES": "-1",
        "ALIGNBOT_DATABASE_URL": "mysql://localhost/x",
        "ALIGNBOT_GITHUB_API_URL": "api.github.com",
    }
    lines = error_lines(env)
    names = [line.split(":")[0] for line in lines]
    assert sorted(names) == sorted(
        [
            "ALIGNBOT_APP_ID",
            "ALIGNBOT_PORT",
            "ALIGNBOT_WORKERS",
            "ALIGNBOT_JOB_TIMEOUT_SECONDS",
            "ALIGNBOT_MAX_BODY_BYTES",
            "ALIGNBOT_DATABASE_URL",
            "ALIGNBOT_GITHUB_API_URL",
        ]
    )
    by_name = dict(zip(names, lines, strict=True))
    assert "'twelve'" in by_name["ALIGNBOT_APP_ID"]
    assert "0 to 65535" in by_name["ALIGNBOT_PORT"]
    assert "unsupported database 'mysql'" in by_name["ALIGNBOT_DATABASE_URL"]
    text = "\n".join(lines)
    for noise in ("validation error", "pydantic", "Input should", "Traceback"):
        assert noise not in text


def test_a_malformed_secret_is_not_echoed() -> None:
    lines = error_lines({**VALID, "ALIGNBOT_PRIVATE_KEY": "hunter2-not-a-pem"})
    assert len(lines) == 1
    assert lines[0].startswith("ALIGNBOT_PRIVATE_KEY: not a PEM private key")
    assert "hunter2" not in lines[0]


def test_private_key_file(tmp_path: Path) -> None:
    key_file = tmp_path / "app.pem"
    key_file.write_text(PEM)
    env = {key: value for key, value in VALID.items() if key != "ALIGNBOT_PRIVATE_KEY"}
    settings = load_settings({**env, "ALIGNBOT_PRIVATE_KEY_FILE": str(key_file)})
    assert settings.private_key.get_secret_value() == PEM

    lines = error_lines({**env, "ALIGNBOT_PRIVATE_KEY_FILE": str(tmp_path / "absent.pem")})
    assert len(lines) == 1  # not also "ALIGNBOT_PRIVATE_KEY: missing"
    assert lines[0].startswith("ALIGNBOT_PRIVATE_KEY_FILE: cannot read")


def test_a_pem_squeezed_into_one_line() -> None:
    settings = load_settings({**VALID, "ALIGNBOT_PRIVATE_KEY": PEM.replace("\n", "\\n")})
    assert settings.private_key.get_secret_value() == PEM


def test_several_webhook_secrets_for_rotation() -> None:
    settings = load_settings({**VALID, "ALIGNBOT_WEBHOOK_SECRETS": " new-secret , old-secret ,"})
    assert settings.webhook_secret_bytes() == [b"new-secret", b"old-secret"]
    assert error_lines({**VALID, "ALIGNBOT_WEBHOOK_SECRETS": " , "})[0].startswith(
        "ALIGNBOT_WEBHOOK_SECRETS"
    )


def test_secrets_never_appear_in_repr() -> None:
    settings = load_settings(
        {
            **VALID,
            "ALIGNBOT_WEBHOOK_SECRETS": "rotate-me-1,rotate-me-2",
            "ALIGNBOT_DATABASE_URL": "postgresql+psycopg://bot:db-password@db/alignbot",
        }
    )
    for text in (repr(settings), str(settings), f"{settings}"):
        assert "rotate-me" not in text
        assert "MIIBOg" not in text
        assert "db-password" not in text
    assert "postgresql+psycopg://bot:***@db/alignbot" in repr(settings)


def test_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in VALID.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ALIGNBOT_WEBHOOK_SECRETS", "a,b")
    monkeypatch.setenv("ALIGNBOT_PORT", "9000")
    assert load_settings().port == 9000
    direct = Settings()  # type: ignore[call-arg]  # the plain pydantic-settings path
    assert direct.port == 9000
    assert direct.webhook_secret_bytes() == [b"a", b"b"]


def test_an_explicit_mapping_ignores_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALIGNBOT_PORT", "9000")
    assert load_settings(VALID).port == 8080
    assert load_settings({**VALID, "ALIGNBOT_PORT": ""}).port == 8080  # empty means unset


def test_sandbox_and_retry_settings_are_read_from_the_environment() -> None:
    settings = load_settings({**VALID, "ALIGNBOT_SANDBOX_INTERPRETERS": "/opt/a, /opt/b/venv,",
                              "ALIGNBOT_SANDBOX_HIDE": "/srv/secrets",
                              "ALIGNBOT_SANDBOX_DIR": "/var/lib/alignbot/sandboxes",
                              "ALIGNBOT_GITHUB_RETRY_HORIZON": "60",
                              "ALIGNBOT_GITHUB_RETRY_BASE": "0.5",
                              "ALIGNBOT_GITHUB_RETRY_CAP": "10",
                              "ALIGNBOT_GITHUB_REQUEST_RETRIES": "1"})
    assert settings.sandbox_interpreters == [Path("/opt/a"), Path("/opt/b/venv")]
    assert settings.sandbox_hide == [Path("/srv/secrets")]
    assert settings.sandbox_dir == Path("/var/lib/alignbot/sandboxes")
    assert (settings.github_retry_horizon, settings.github_retry_base,
            settings.github_retry_cap) == (60, 0.5, 10)
    assert api_options(settings).retries == 1
    defaults = load_settings(VALID)
    assert api_options(defaults).retries == 5
    assert defaults.sandbox_interpreters == [] and defaults.sandbox_hide == []
    assert defaults.github_retry_horizon == 1800


@pytest.mark.parametrize("name", ["ALIGNBOT_SANDBOX_INTERPRETERS", "ALIGNBOT_SANDBOX_HIDE",
                                  "ALIGNBOT_SANDBOX_DIR"])
def test_sandbox_paths_must_be_absolute(name: str) -> None:
    (line,) = error_lines({**VALID, name: "relative/folder"})
    assert line.startswith(name) and "absolute" in line, line


def test_the_start_up_wait_and_the_health_file() -> None:
    defaults = load_settings(VALID)
    assert defaults.database_wait_seconds == 60 and defaults.health_file is None
    settings = load_settings({**VALID, "ALIGNBOT_DATABASE_WAIT_SECONDS": "0",
                              "ALIGNBOT_HEALTH_FILE": "/tmp/worker.health"})
    assert settings.database_wait_seconds == 0
    assert settings.health_file == Path("/tmp/worker.health")
    (line,) = error_lines({**VALID, "ALIGNBOT_DATABASE_WAIT_SECONDS": "-1"})
    assert line.startswith("ALIGNBOT_DATABASE_WAIT_SECONDS: got '-1'; expected seconds, 0 to")
