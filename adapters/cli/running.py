"""Running one parsed command: its config, its core, its event loop.

Imported by `adapters.cli` only once the arguments are parsed, so `chatmem --help` and
a mistyped option never pay for asyncio, the config or the engine. The core
a command opens is a command's (`MemoryCore.open(serving=False)`: no tokenizer loaded
in advance, no vectors made; memory_core/services.py), except for the commands that
serve until stopped (`SERVES`: the bots, the TUI, MCP).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from adapters.cli import (
    COMMANDS,
    CREATES,
    KNOWN_SHOWN,
    OWN_CONFIG,
    OWN_CORE,
    OWN_SCOPES,
    READS_ONLY,
    SERVES,
    UNSCOPED,
    ConfigHandler,
    Handler,
)
from adapters.cli.logs import notice, setup_logging
from adapters.settings import AppConfig, load_app_config
from memory_core.base.errors import ChatmemError
from memory_core.base.scope import ScopeKey, printable_key
from memory_core.base.workspace import Workspace
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.storage.dialects import dialect_for

if TYPE_CHECKING:
    from adapters.metrics import MetricsServer

REBUILDS_INDEX = frozenset({"reindex", "rebuild-index"})
"""Commands that rebuild the index from the files: their core's open does not first
bring the index in line with the files (hand-added notes would be parsed twice)."""


def run_command(args: argparse.Namespace) -> int:
    """The parsed command, run to its exit code (errors are the caller's to report)."""
    if args.command in OWN_CONFIG:
        loads: ConfigHandler = COMMANDS[args.command][2]  # type: ignore[assignment]
        return asyncio.run(loads(None, args))  # type: ignore[arg-type]
    config = load_app_config(args.config, workspace=args.workspace)
    setup_logging(config, args.command)
    args.scope_key = ScopeKey.parse(args.scope)
    if args.command in OWN_SCOPES and not args.scope_key.is_main:
        raise ChatmemError(
            f"`chatmem {args.command}` does not take --scope: "
            f"{OWN_SCOPES[args.command]} (nothing was done)"
        )
    handler = COMMANDS[args.command][2]
    if args.command in OWN_CORE:
        own: ConfigHandler = handler  # type: ignore[assignment]
        return asyncio.run(own(config, args))
    announce_workspace(config, args)
    return asyncio.run(run_core(config, handler, args))


async def run_core(config: Config, handler: Handler, args: argparse.Namespace) -> int:
    """`handler` on the workspace's core, opened as the command needs it."""
    reads_only = args.command in READS_ONLY and READS_ONLY[args.command](args)
    read_only = await asyncio.to_thread(read_only_workspace, config)
    if read_only and not reads_only:
        raise ChatmemError(
            f"workspace {config.workspace_path} is read-only and `{args.command}` would "
            "change it: nothing was done (commands that only read, such as status and "
            "search, still work)"
        )
    served = dialect_for(config.storage.backend).is_server
    if args.command in NEEDS_DATABASE and served:
        await asyncio.to_thread(require_database, config, args.command)
    async with contextlib.AsyncExitStack() as stack:
        metrics = await _metrics_server(config, args, stack)
        with _start_quietly() if read_only else contextlib.nullcontext():
            opened = MemoryCore.open(
                config,
                create=args.command in CREATES,
                serving=args.command in SERVES,
                sync_files=args.command not in REBUILDS_INDEX,
                meter=metrics.meter if metrics is not None else None,
            )
            core = await stack.enter_async_context(opened)
        if metrics is not None:
            metrics.core = core
            stack.callback(setattr, metrics, "core", None)  # before the core closes
        if reads_only and args.command not in UNSCOPED:
            await refuse_unknown_scope(core, args.scope_key)
        return await handler(core, args)


NEEDS_DATABASE = frozenset({"backup", "export", "import", "erase"})
"""Commands that cannot do their work from the files while PostgreSQL is away: refused
in one line before the core opens (degraded, with its warnings) for nothing."""


def require_database(config: Config, command: str) -> None:
    """One line when a server the workspace reached before does not answer now
    (blocking). One never reached is left to the core's open, whose line says to check
    the DSN."""
    from memory_core.ops.database import known_server_down

    why = known_server_down(config.storage.postgres_dsn, config.workspace_path)
    if why is not None:
        raise ChatmemError(f"`chatmem {command}` needs PostgreSQL, and {why} (nothing was done)")


METERED = frozenset({"telegram", "dingtalk", "chat"})
"""Serving commands that serve `[metrics] listen` (and `mcp --http`)."""


def metered(args: argparse.Namespace) -> bool:
    """Whether the command serves `[metrics] listen`: a bot, the console, MCP over HTTP."""
    return args.command in METERED or (args.command == "mcp" and bool(args.http))


async def _metrics_server(
    config: Config, args: argparse.Namespace, stack: contextlib.AsyncExitStack
) -> MetricsServer | None:
    """With `metrics.listen` set, a serving command's health and metrics server, started
    before its core opens (`/healthz` answers at once, `/readyz` once the core is open)."""
    address = AppConfig.of(config).metrics.address() if metered(args) else None
    if address is None:
        return None
    try:
        from adapters.metrics import serve_metrics  # prometheus_client only when metrics are on
    except ImportError as exc:  # an install from before it was a dependency
        raise ChatmemError(
            f"metrics.listen is set but {exc.name or 'prometheus_client'} is not installed: "
            "python -m pip install -e . in the checkout (nothing was started)"
        ) from None
    return await stack.enter_async_context(serve_metrics(*address))


def read_only_workspace(config: Config) -> bool:
    """Whether this process may not write the workspace (a read-only mount, or files it
    does not own); False for one that does not exist yet (blocking: two access calls)."""
    workspace = Workspace.at(config.workspace_path)
    return any(
        path.is_dir() and not os.access(path, os.W_OK)
        for path in (workspace.root, workspace.state_dir)
    )


@contextlib.contextmanager
def _start_quietly() -> Iterator[None]:
    """In a read-only workspace the core starts without its database and journal and
    warns so; a command that only reads needs neither, and the person knows the
    workspace is read-only: the warnings would only be noise."""
    logger = logging.getLogger("memory_core")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


async def is_new_scope(core: MemoryCore, scope: ScopeKey) -> bool:
    """Whether a write to `scope` makes it (main always exists): the output says so."""
    return not scope.is_main and not await core.knows_scope(scope)


async def refuse_unknown_scope(core: MemoryCore, scope: ScopeKey, hint: str = "") -> None:
    """A read of a scope that holds nothing (or serving it over MCP) is most often a typo
    (`--scope mian`): say so, and which scopes there are, instead of an empty scope."""
    if scope.is_main or await core.knows_scope(scope):
        return
    known = await core.known_scopes()
    shown = ", ".join(printable_key(k) for k in known[:KNOWN_SHOWN])
    more = f" and {len(known) - KNOWN_SHOWN} more" if len(known) > KNOWN_SHOWN else ""
    raise ChatmemError(
        f"no memories in scope {printable_key(scope)} (known: {shown}{more}; `chatmem scopes` "
        f"lists them){hint}"
    )


def announce_workspace(config: Config, args: argparse.Namespace) -> None:
    """On stderr: which workspace a command uses when the command line did not name it,
    and that a command is about to create one (a mistyped path shows at once)."""
    root = config.workspace_path
    if args.workspace is None:
        if os.environ.get("CHATMEM_WORKSPACE"):
            origin = "from CHATMEM_WORKSPACE"
        elif config.workspace:
            origin = "from the config file"
        else:
            origin = "the default; --workspace DIR chooses another"
        notice(f"chatmem: using workspace {root} ({origin})")
    if args.command in CREATES and not MemoryCore.workspace_exists(root):
        notice(f"chatmem: creating workspace at {root}")
