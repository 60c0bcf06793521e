"""Helpers of the reliability suite: real processes that die with rows in the journal,
and the journal's rows as another process would read them."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path

import psycopg

from memory_core.base.clock import ManualMonotonic
from memory_core.base.errors import DatabaseUnreachable
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall.guard import RETRY_SECONDS
from memory_core.storage.pg.database import DOWN_SECONDS
from testkit.waiting import until
from tests.support import assert_lines_placed, sql

REPO = Path(__file__).resolve().parents[2]

DYING_CHILD = """
import asyncio, os
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from memory_core.base.scope import ScopeKey

async def main() -> None:
    config = load_config(None, env={env!r}, workspace={workspace!r})
    config = config.model_copy(
        update={{"long_term": config.long_term.model_copy(update={{"write_delay_seconds": 600.0}})}}
    )
    opened = MemoryCore.open(config)  # held: a collected one would close the core
    core = await opened.__aenter__()  # never left: the process is killed
    for scope, text, flush in {captures!r}:
        entry, _ = await core.memories.capture(ScopeKey(scope), text)
        if flush:
            await core.memories.flush()
        print(scope, entry.id, flush, flush=True)
    os._exit(0)  # dies with the rest journalled, not yet in any file

asyncio.run(main())
"""


def die_with_journalled(
    config: Config, captures: list[tuple[str, str, bool]]
) -> dict[str, list[str]]:
    """A real process on `config`'s workspace and storage captures `(scope, text, flush)`
    and dies without writing what it did not flush; the ids it was given, by scope
    (flushed ones included)."""
    script = DYING_CHILD.format(
        workspace=str(config.workspace_path), env=storage_env_of(config), captures=captures
    )
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    ids: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        scope, entry_id, _ = line.split(" ")
        ids.setdefault(scope, []).append(entry_id)
    return ids


def journal_rows(config: Config) -> dict[str, int]:
    """Rows in the capture journal by scope, read as another process would."""
    query = "SELECT scope, count(*) FROM captures GROUP BY scope"
    if config.storage.backend == "sqlite":
        path = config.workspace_path / ".chatmem" / "journal.sqlite3"
        with sqlite3.connect(path) as conn:
            rows = conn.execute(query).fetchall()
        conn.close()
    else:
        with psycopg.connect(config.storage.postgres_dsn) as pg:
            rows = pg.execute(query).fetchall()
    return {str(scope): int(n) for scope, n in rows}


def cli(*args: str) -> list[str]:
    """The command line of `chatmem ARGS` from this checkout (not an installed copy)."""
    return [sys.executable, "-m", "adapters.cli", *args]


def storage_env_of(config: Config) -> dict[str, str]:
    """The environment that gives a child process `config`'s storage."""
    if config.storage.backend == "sqlite":
        return {}
    return {
        "CHATMEM_STORAGE_BACKEND": config.storage.backend,
        "CHATMEM_POSTGRES_DSN": config.storage.postgres_dsn,
    }


def with_long_term(config: Config, **settings: object) -> Config:
    return config.model_copy(update={"long_term": config.long_term.model_copy(update=settings)})


async def eventually(check: object, within: float = 30.0) -> None:
    """Wait until `await check()` holds (a state, not a pause): the database may be away
    meanwhile; fails with the last assertion after `within` seconds."""
    failure: list[BaseException] = []

    async def holds() -> bool:
        try:
            assert await check()  # type: ignore[operator]
        except (AssertionError, DatabaseUnreachable) as exc:
            failure[:] = [exc]
            return False
        return True

    try:
        await until(holds, within=within, pause=0.2, what="the state")
    except AssertionError:
        if failure:
            raise failure[0] from None
        raise


async def past_cool_downs(
    monotonic: ManualMonotonic, check: Callable[[], Awaitable[bool]], within: float = 30.0
) -> None:
    """`eventually(check)`, each try made after the cool-downs the one before began (the
    core runs on `monotonic`): the unreachable database's (`DOWN_SECONDS`) and the
    unusable index's (`RETRY_SECONDS`). What is left to wait for is the server itself."""

    async def later() -> bool:
        monotonic.advance(max(DOWN_SECONDS, RETRY_SECONDS))
        return await check()

    await eventually(later, within)


COUNTS = (
    "SELECT s.key, s.chunk_count, s.token_count,"
    " (SELECT COUNT(*) FROM chunks AS c WHERE c.scope_id = s.id),"
    " (SELECT COALESCE(SUM(length(tokens) - length(replace(tokens, ' ', ''))"
    " + CASE WHEN tokens <> '' THEN 1 ELSE 0 END), 0) FROM chunks AS c"
    " WHERE c.scope_id = s.id) FROM scopes AS s"
)
"""Each scope's stored chunk and token counts beside the counts of its chunk rows."""


async def assert_counts_exact(core: MemoryCore) -> None:
    """The index's bookkeeping equals what its rows hold, in every scope, and every
    long-term chunk has its line row."""
    for key, chunks, tokens, real_chunks, real_tokens in await sql(core, COUNTS):
        assert (int(chunks), int(tokens)) == (int(real_chunks), int(real_tokens)), key
    await assert_lines_placed(core)
