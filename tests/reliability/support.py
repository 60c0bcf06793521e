"""Helpers of the reliability suite: real processes that die with rows in the journal,
and the journal's rows as another process would read them."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from memory_core.config import Config

REPO = Path(__file__).resolve().parents[2]

DYING_CHILD = """
import asyncio, os
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from memory_core.scope import ScopeKey

async def main() -> None:
    config = load_config(None, env={{}}, workspace={workspace!r})
    config = config.model_copy(
        update={{"long_term": config.long_term.model_copy(update={{"write_delay_seconds": 600.0}})}}
    )
    core = MemoryCore(config)
    await core.start()
    for scope, text, flush in {captures!r}:
        entry, _ = await core.capture(ScopeKey(scope), text)
        if flush:
            await core.flush()
        print(scope, entry.id, flush, flush=True)
    os._exit(0)  # dies with the rest journalled, not yet in any file

asyncio.run(main())
"""


def die_with_journalled(
    workspace: Path, captures: list[tuple[str, str, bool]]
) -> dict[str, list[str]]:
    """A real process captures `(scope, text, flush)` and dies without writing what it
    did not flush; the ids it was given, by scope (flushed ones included)."""
    script = DYING_CHILD.format(workspace=str(workspace), captures=captures)
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


def journal_rows(workspace: Path) -> dict[str, int]:
    """Rows in the capture journal by scope, read as another process would."""
    path = workspace / ".chatmem" / "journal.sqlite3"
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT scope, count(*) FROM captures GROUP BY scope").fetchall()
    conn.close()
    return {str(scope): int(n) for scope, n in rows}


def with_long_term(config: Config, **settings: object) -> Config:
    return config.model_copy(update={"long_term": config.long_term.model_copy(update=settings)})
