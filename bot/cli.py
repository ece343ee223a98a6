"""``alignbot``: the engine's commands (``checks/cli.py``) and the GitHub App's.

The App's modules are imported only when one of its commands runs, so that ``alignbot
check`` works where only the engine is installed (``pip install alignbot``); an App command
there exits 2 with one line that says what to install."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the App's modules load only when one of its commands runs
    from alignbot.bot.serve import Role
    from alignbot.bot.settings import Settings

from alignbot.checks.api import UsageError, add_commands, new_parser, run

INSTALL_HINT = "pip install 'alignbot[app]'"
# What `serve --help` and `worker --help` list; every one is a setting (tests/test_bot_cli.py).
START_SETTINGS = ("ALIGNBOT_APP_ID", "ALIGNBOT_PRIVATE_KEY_FILE", "ALIGNBOT_WEBHOOK_SECRETS",
                  "ALIGNBOT_DATABASE_URL", "ALIGNBOT_DATABASE_WAIT_SECONDS",
                  "ALIGNBOT_GITHUB_API_URL", "ALIGNBOT_WORKERS", "ALIGNBOT_LOG_FORMAT")
SETTINGS_EPILOG = (
    "Settings come from the environment; those read at start: " + ", ".join(START_SETTINGS)
    + " (ALIGNBOT_PRIVATE_KEY may hold the key itself). Every setting, its default and "
    "meaning: docs/operations.md#settings, or `python -m alignbot.bot.settings_doc`. At start the "
    "key must sign a JWT that GitHub takes (GET /app; GitHub unreachable: a warning) and "
    "the database must answer within ALIGNBOT_DATABASE_WAIT_SECONDS; otherwise one line "
    "and exit status 2.")
# Modules of this project: one missing is a broken install, not a missing extra.
OWN_MODULES = frozenset({"alignbot"})


@contextmanager
def app_dependencies(command: str) -> Iterator[None]:
    """Turn a missing third-party module while importing the App into one usage line."""
    try:
        yield
    except ModuleNotFoundError as exc:
        top = (exc.name or "").partition(".")[0]
        if not top or top in OWN_MODULES:
            raise
        raise UsageError(f"alignbot {command} needs the GitHub App's dependencies (no module "
                         f"named {top!r}): {INSTALL_HINT}") from exc


def build_parser() -> argparse.ArgumentParser:
    """Every command: the engine's, then the App's."""
    parser, commands = new_parser()
    add_commands(commands)

    serve = commands.add_parser("serve", help="run the GitHub App (webhooks, worker)",
                                epilog=SETTINGS_EPILOG)
    serve.add_argument("--host", help="address to listen on (ALIGNBOT_HOST)")
    serve.add_argument("--port", type=int, help="port to listen on (ALIGNBOT_PORT)")
    serve.add_argument("--no-worker", action="store_true", help="webhooks only: `alignbot "
                       "worker` processes run the jobs (needs PostgreSQL)")
    serve.set_defaults(func=cmd_serve)

    worker = commands.add_parser("worker", help="run the GitHub App's jobs and reminder timer, "
                                 "beside `alignbot serve --no-worker` (needs PostgreSQL)",
                                 epilog=SETTINGS_EPILOG)
    worker.add_argument("--check-health", action="store_true", help="exit 0 if the worker "
                        "that writes ALIGNBOT_HEALTH_FILE is well (the file is fresh), else 1 "
                        "with one line: a container's health check")
    worker.set_defaults(func=cmd_worker)

    sweep = commands.add_parser("remind-sweep", help="run one reminder sweep now (for cron), "
                                "with the service's ALIGNBOT_* settings")
    sweep.add_argument("--force", action="store_true", help="sweep every repository now, not "
                       "only those whose weekly time has come (still one reminder a week)")
    sweep.set_defaults(func=cmd_remind_sweep)

    demo = commands.add_parser("demo", help="the app end to end against a GitHub test server")
    demo.set_defaults(func=cmd_demo)

    schema = commands.add_parser("config-schema",
                                 help="print the JSON schema of .github/alignbot.yml")
    schema.set_defaults(func=cmd_config_schema)

    manifest = commands.add_parser("app-manifest", help="print the GitHub App manifest (JSON) "
                                   "to register the App in one step")
    manifest.add_argument("--url", required=True, help="the service's public base URL; "
                          "webhooks go to URL/webhook")
    manifest.add_argument("--name", default="alignbot", help="the App's name (default alignbot)")
    manifest.add_argument("--redirect-url", help="where GitHub sends the browser after "
                          "registration (default: --url)")
    manifest.add_argument("--public", action="store_true",
                          help="let any account install it (default: only the owner's)")
    manifest.set_defaults(func=cmd_app_manifest)
    return parser


def cmd_serve(args: argparse.Namespace) -> int:
    with app_dependencies("serve"):
        from alignbot.bot.serve import Role, serve

    env = dict(os.environ)
    if args.host:
        env["ALIGNBOT_HOST"] = args.host
    if args.port is not None:
        env["ALIGNBOT_PORT"] = str(args.port)
    settings = _settings_for(Role.WEB if args.no_worker else Role.ALL, env)
    with _startup():
        serve(settings, worker=not args.no_worker)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    if args.check_health:  # every 30 s in a container: the health file alone, not the App
        with app_dependencies("worker"):
            from alignbot.bot.health import check_command
        code, line = check_command(os.environ)
        print(line)
        return code
    with app_dependencies("worker"):
        from alignbot.bot.serve import Role, work

    settings = _settings_for(Role.WORKER, dict(os.environ))
    with _startup():
        work(settings)
    return 0


@contextmanager
def _startup(what: str = "the service") -> Iterator[None]:
    """A process that cannot start (``alignbot.bot.startup.StartupError``) ends with its one
    line."""
    from alignbot.bot.startup import StartupError

    try:
        yield
    except StartupError as exc:
        raise UsageError(f"{what} cannot start: {exc}") from None


def _settings_for(role: Role, env: dict[str, str], what: str = "the service") -> Settings:
    """The settings of one process of the App, or one usage line saying why it cannot run."""
    from alignbot.bot.serve import role_problem
    from alignbot.bot.settings import SettingsError, load_settings

    try:
        settings = load_settings(env)
    except SettingsError as exc:
        raise UsageError(f"{what} cannot start:\n{exc}") from exc
    problem = role_problem(settings, role)
    if problem:
        raise UsageError(problem)
    return settings


def cmd_remind_sweep(args: argparse.Namespace) -> int:
    with app_dependencies("remind-sweep"):
        from alignbot.bot.reminders import run_from_settings
        from alignbot.bot.serve import Role, configure_logging

    # the checks `serve` and `worker` make at start, each problem one line (bot/startup.py)
    settings = _settings_for(Role.ALL, dict(os.environ), "the sweep")
    configure_logging(settings)
    with _startup("the sweep"):
        print(run_from_settings(settings, force=args.force).summary())
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    with app_dependencies("demo"):
        from alignbot.bot.demo import run_demo

    try:
        return run_demo()
    except (RuntimeError, TimeoutError) as exc:
        raise UsageError(f"the demo failed: {exc}") from exc


def cmd_config_schema(args: argparse.Namespace) -> int:
    with app_dependencies("config-schema"):
        from alignbot.bot.config import config_schema

    print(json.dumps(config_schema(), indent=2, sort_keys=True))
    return 0


def cmd_app_manifest(args: argparse.Namespace) -> int:
    with app_dependencies("app-manifest"):
        from alignbot.bot.manifest import ManifestError, build_manifest
        from alignbot.bot.serve import webhook_router

    try:
        manifest = build_manifest(webhook_router(), args.url, name=args.name,
                                  redirect_url=args.redirect_url, public=args.public)
    except ManifestError as exc:
        raise UsageError(str(exc)) from exc
    print(json.dumps(manifest, indent=2))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
