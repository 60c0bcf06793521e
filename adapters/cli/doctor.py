"""`chatmem doctor`: what an operator gets wrong, one line per check (memory_core/ops).

Each line is `ok`, `warn` (works, but act on it), `fail` (will not work) or `skip` (not
checked: not configured, or it needs `--online`). Exit 0 when no line is `warn` or
`fail`, 1 when one is, 2 when the doctor cannot run (bad arguments). A config that does
not load is a `fail` line, not a refusal: finding it is the doctor's job. Nothing is
printed of a secret; the database is given at most five seconds; the model server is
called only with `--online`. With a workspace and a database that answer, it opens the
workspace as `chatmem validate` does (which brings the index up to date with the files).
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapters.cli import Output, command

if TYPE_CHECKING:
    from memory_core.config import Config
    from memory_core.ops.report import Check

TELEGRAM_TOKEN = re.compile(r"^\d{3,15}:[A-Za-z0-9_-]{30,64}$")
"""A Bot API token as @BotFather hands it out: the bot's id, a colon, ~35 characters."""
_DSN_PASSWORD = (re.compile(r"://[^:/@\s]*:([^@\s]+)@"), re.compile(r"password\s*=\s*'?([^\s']+)"))


@command(
    "doctor",
    "check the config, the workspace, the database and the models, one line each; "
    "exit 1 on a warning or a failure",
    own_config=True,
    reads_only=True,
    scoped=False,
)
class Doctor:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--online",
            action="store_true",
            help="also call the model server (one short completion) and a remote embedder",
        )

    @staticmethod
    async def run(_: None, args: argparse.Namespace) -> int:
        from memory_core.ops.report import exit_code, summary

        checks = await diagnose(args)
        code = exit_code(checks)
        data = {"ok": code == 0, "checks": [c.as_json() for c in checks]}
        human = "\n".join([*(c.line() for c in checks), summary(checks)])
        Output(args.json).emit(data, human)
        return code


async def diagnose(args: argparse.Namespace) -> list[Check]:
    import asyncio  # here: the parser (`--help`) never needs it

    from adapters.cli.logs import setup_logging
    from adapters.settings import AppConfig, load_app_config
    from memory_core.base.errors import ChatmemError
    from memory_core.config import env_bindings, secret_values
    from memory_core.ops import checks as files
    from memory_core.ops.report import fail, ok, without_secrets

    path = config_path(args.config)
    known_env = {name for name, _ in env_bindings(AppConfig)}
    try:
        config = load_app_config(args.config, workspace=args.workspace)
    except ChatmemError as exc:
        setup_logging(AppConfig(), "doctor")
        found = [fail("config", str(exc)), files.environment_check(os.environ, known_env)]
        return found
    setup_logging(config, "doctor")
    found = [
        ok("config", f"{path or 'defaults'} and the environment: valid"),
        files.config_file_check(path, await asyncio.to_thread(file_secrets, path)),
        files.environment_check(os.environ, known_env),
    ]
    found += await storage_checks(config, args)
    return without_secrets(found, [*secret_values(config), *dsn_passwords(config)])


async def storage_checks(config: Config, args: argparse.Namespace) -> list[Check]:
    """The workspace, the disk, the database and what it holds, the models."""
    import asyncio  # here: the parser (`--help`) never needs it

    from adapters.settings import AppConfig
    from memory_core.base.workspace import Workspace
    from memory_core.engine import MemoryCore
    from memory_core.ops import checks as files
    from memory_core.ops import database, live
    from memory_core.storage.dialects import dialect_for

    workspace = Workspace.at(config.workspace_path)
    exists = await asyncio.to_thread(MemoryCore.workspace_exists, workspace.root)
    backend = config.storage.backend
    found = [
        await asyncio.to_thread(files.workspace_check, workspace.root, exists),
        await asyncio.to_thread(files.disk_check, workspace.root),
    ]
    if dialect_for(backend).is_server:
        dsn = config.storage.postgres_dsn
        visit: Any = lambda: database.visit_postgres(dsn)  # noqa: E731
    elif exists:
        visit = lambda: database.visit_sqlite(workspace.state_dir)  # noqa: E731
    else:
        visit = database.Visit
    outcome = await asyncio.to_thread(database.bounded, visit, database.TIMEOUT_SECONDS)
    found += [
        database.database_check(backend, outcome),
        database.pgvector_check(backend, outcome),
        database.journal_check(outcome),
        await asyncio.to_thread(files.spool_check, workspace.state_dir, backend),
    ]
    embedding, model = await live.embedding_check(config, args.online)
    found += [embedding, await live.llm_check(config, args.online)]
    found.append(telegram_token_check(AppConfig.of(config).telegram.bot_token))
    found += await opened_checks(config, exists, outcome, model)
    return found


async def opened_checks(
    config: Config, exists: bool, outcome: object, model: str | None
) -> list[Check]:
    """What the open workspace tells (`live.workspace_checks`), when it can be opened
    without changing its schema: it exists, and its database answered and is current."""
    from memory_core.base.errors import ChatmemError
    from memory_core.engine import MemoryCore
    from memory_core.ops import database, live
    from memory_core.ops.report import fail, skip

    names = ("index", "memory files", "scopes")
    if not exists:
        return [skip(name, "no workspace yet") for name in names]
    current = isinstance(outcome, database.Visit) and all(
        s.applied == s.code and not s.newer for s in outcome.schemas
    )
    if not current:
        why = "the database is not reachable or its schema is not this chatmem's"
        return [skip(name, why) for name in names]
    try:
        async with MemoryCore.open(config, serving=False) as core:
            scopes = await core.known_scopes()
            problems = await core.memories.validate()
            coverage = await core.vector_coverage(model) if model else (0, 0)
            return live.workspace_checks(core.degraded_reason, scopes, problems, model, coverage)
    except ChatmemError as exc:
        return [fail("index", f"the workspace does not open: {exc}")]


def config_path(given: str | None) -> Path | None:
    """The config file `load_config` reads: the one given, else ./chatmem.toml."""
    from memory_core.config import DEFAULT_CONFIG_NAME

    if given is not None:
        return Path(given)
    return Path(DEFAULT_CONFIG_NAME) if Path(DEFAULT_CONFIG_NAME).is_file() else None


def file_secrets(path: Path | None) -> list[str]:
    """The secret keys the config file itself sets (blocking: reads it)."""
    import tomllib

    from adapters.settings import AppConfig
    from memory_core.config import secret_keys
    from memory_core.ops.checks import secrets_in_file

    if path is None:
        return []
    with path.open("rb") as file:
        values: dict[str, Any] = tomllib.load(file)
    return secrets_in_file(values, secret_keys(AppConfig))


def dsn_passwords(config: Config) -> list[str]:
    """The password inside the DSN, which an error may quote without the rest of it."""
    dsn = config.storage.postgres_dsn
    return [m.group(1) for pattern in _DSN_PASSWORD if (m := pattern.search(dsn))]


def telegram_token_check(token: str) -> Check:
    """Whether the token has a token's form; the token itself is never shown."""
    from memory_core.ops.report import fail, ok, skip

    name = "telegram token"
    if not token:
        return skip(name, "not set (only `chatmem telegram` needs TELEGRAM_BOT_TOKEN)")
    if token != token.strip():
        return fail(name, "has spaces or a line break around it (copied with them?)")
    if not TELEGRAM_TOKEN.match(token):
        return fail(
            name,
            f"is not of a token's form (digits, a colon, ~35 letters, digits, - or _; "
            f"{len(token)} characters given)",
        )
    return ok(name, "well-formed (not checked with Telegram)")
