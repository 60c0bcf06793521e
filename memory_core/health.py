"""Whether an open workspace can serve (`readiness`), and the backlogs a running process
reports as metrics (`backlogs`): what `/readyz` and `/metrics` of a serving process read
(adapters/metrics.py), through the facade.

Both read the open services only, with a short timeout per database call: a probe must
answer while the database is away, and say so, never hang. Counts are workspace totals:
no scope is named in what they return.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from memory_core.base.errors import ChatmemError
from memory_core.base.sql import Connection, Db
from memory_core.services import Services

PROBE_SECONDS = 2.0
"""The longest a probe waits for one database call."""


@dataclass(frozen=True, slots=True)
class Readiness:
    """Each check's word: "ok", or why not (`ready` only when every one is ok)."""

    checks: dict[str, str] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return all(value == "ok" for value in self.checks.values())


@dataclass(frozen=True, slots=True)
class Backlogs:
    """Work waiting, over the whole workspace; None where this process cannot tell (no
    database, no journal, no embedder)."""

    journal_depth: int | None
    vector_backlog: int | None


async def readiness(services: Services, reason: str | None) -> Readiness:
    """The database answers a query, the journal's rows left by dead processes were
    replayed at the open, and the search index is usable (`reason`: why not)."""
    checks: dict[str, str] = {}
    db = services.db
    if db is None:
        checks["database"] = f"not open: {reason or 'unknown'}"
    else:
        checks["database"] = await _probe(db, _select_one)
    if services.journal is not None:  # the staging exists exactly when a journal does
        checks["journal"] = "ok" if services.replayed else "not replayed: the server was away"
    checks["index"] = "ok" if services.memory.guard.index is not None else f"unusable: {reason}"
    return Readiness(checks)


async def backlogs(services: Services) -> Backlogs:
    """Captures in the journal not yet in MEMORY.md, and texts without a vector of the
    embedder in use; a count that fails is None."""
    journal = services.journal
    depth = await _count(journal.db, _journal_rows) if journal is not None else None
    backlog: int | None = None
    if services.db is not None and services.vector_model:
        model = services.vector_model
        backlog = await _count(services.db, lambda conn: _missing_vectors(conn, model))
    return Backlogs(depth, backlog)


async def _probe(db: Db, work: Callable[[Connection], object]) -> str:
    try:
        await asyncio.wait_for(db.read(work), PROBE_SECONDS)
    except TimeoutError:
        return f"no answer within {PROBE_SECONDS:g}s"
    except ChatmemError as exc:  # unreachable, closed, refused: one line, never a crash
        return f"unreachable: {exc}"
    return "ok"


async def _count(db: Db, work: Callable[[Connection], int]) -> int | None:
    try:
        return await asyncio.wait_for(db.read(work), PROBE_SECONDS)
    except (TimeoutError, ChatmemError):
        return None


def _select_one(conn: Connection) -> object:
    return conn.execute("SELECT 1").fetchone()


def _journal_rows(conn: Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM captures").fetchone()[0])


def _missing_vectors(conn: Connection, model: str) -> int:
    """Chunks of every scope less their vectors of `model` (both from counts the index
    keeps: no chunk is read)."""
    chunks = conn.execute("SELECT COALESCE(SUM(chunk_count), 0) FROM scopes").fetchone()[0]
    vectors = conn.execute(
        "SELECT count(*) FROM chunk_vectors WHERE model = ?", (model,)
    ).fetchone()[0]
    return max(0, int(chunks) - int(vectors))
