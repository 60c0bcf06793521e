"""The database checks of `chatmem doctor`: reachable within `TIMEOUT_SECONDS`, its
schema, pgvector, and the capture journal's backlog.

Everything is read in one short visit on a thread of its own that the doctor waits for
at most `TIMEOUT_SECONDS`: libpq's `connect_timeout` bounds a connection, not a host
name that takes long to resolve, and a server that accepts and never answers would
hold a plain call for ever. A visit still under way then is left behind (a daemon
thread) and the check fails saying so. Nothing is written: SQLite files are opened
read-only, PostgreSQL is only read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memory_core.ops.report import Check, fail, ok, skip, warn
from memory_core.ops.versions import SchemaState, schema_state
from memory_core.storage.dialects import dialect_for

TIMEOUT_SECONDS = 5.0
"""The longest the doctor waits for the database (the issue's bound for a bad DSN)."""
CONNECT_SECONDS = 4
"""libpq's own connection timeout, whole seconds, inside `TIMEOUT_SECONDS`."""
JOURNAL_WARN_ROWS = 100
"""Captures waiting in the journal beyond this many are a backlog (a bot writes a few
at a time, within seconds); fewer are a running bot's normal state."""
PGVECTOR_MIN = (0, 8)
"""The pgvector version the PostgreSQL backend uses (storage/pg/vectors.py)."""


@dataclass
class Visit:
    """What one visit of the database found."""

    schemas: list[SchemaState] = field(default_factory=list)
    journal_rows: int | None = None
    pgvector: str | None = None
    """The installed version, "" when the server has none, None when unknown."""
    pgvector_available: bool = False


def bounded(work: Callable[[], Visit], seconds: float) -> Visit | BaseException | None:
    """`work`'s result or its error, or None when it took longer than `seconds`."""
    result: list[Visit | BaseException] = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # handed to the caller, said in one line
            result.append(exc)

    thread = threading.Thread(target=run, name="chatmem-doctor-db", daemon=True)
    thread.start()
    thread.join(seconds)
    return result[0] if result else None


def visit_sqlite(state_dir: Path) -> Visit:
    from memory_core.ops.versions import sqlite_states

    found = Visit(schemas=sqlite_states(state_dir))
    journal = state_dir / "journal.sqlite3"
    if journal.is_file():
        from memory_core.storage.db import read_only_rows

        rows = read_only_rows(journal, "SELECT COUNT(*) FROM captures")
        found.journal_rows = int(rows[0][0]) if rows else 0  # no table: never journalled
    return found


def visit_postgres(dsn: str) -> Visit:
    from memory_core.storage.pg.migrations import PG_MIGRATIONS
    from memory_core.storage.pg.probe import probe

    found = probe(dsn, CONNECT_SECONDS)
    names = [name for name, _ in PG_MIGRATIONS]
    return Visit(
        schemas=[schema_state("postgres", found.migrations, names)],
        journal_rows=found.journal_rows,
        pgvector=found.pgvector,
        pgvector_available=found.pgvector_available,
    )


def database_check(backend: str, outcome: Visit | BaseException | None) -> Check:
    name = "database"
    if outcome is None:
        return fail(name, f"{backend}: no answer within {TIMEOUT_SECONDS:.0f} s")
    if isinstance(outcome, BaseException):
        refused = server_refusal(outcome)
        if refused is not None:
            return fail(name, f"{backend}: the server refused the connection: {refused}")
        return fail(name, f"{backend}: unreachable: {first_line(outcome)}")
    if not outcome.schemas:
        return ok(name, f"{backend}: not made yet (the first command makes it)")
    states = "; ".join(s.summary for s in outcome.schemas)
    if any(s.newer for s in outcome.schemas):
        return fail(name, f"reachable; {states}: upgrade chatmem or restore a backup")
    if any(s.applied < s.code for s in outcome.schemas):
        return warn(name, f"reachable; {states}")
    return ok(name, f"reachable; {states}")


def pgvector_check(backend: str, outcome: Visit | BaseException | None) -> Check:
    name = "pgvector"
    if not dialect_for(backend).is_server:
        return skip(name, "not used with SQLite")
    if not isinstance(outcome, Visit) or outcome.pgvector is None:
        return skip(name, "unknown: the database was not read")
    if outcome.pgvector:
        version = tuple(int(p) for p in outcome.pgvector.split(".")[:2] if p.isdigit())
        if version < PGVECTOR_MIN:
            return warn(
                name,
                f"{outcome.pgvector} is older than {'.'.join(map(str, PGVECTOR_MIN))}: "
                "not used (vectors are searched in each process)",
            )
        return ok(name, f"{outcome.pgvector} installed")
    if outcome.pgvector_available:
        return ok(name, "available, not created yet: the next open creates it")
    return warn(
        name,
        "not installed on the server: vectors are searched in each process alone "
        "(install pgvector 0.8+ for large scopes)",
    )


def journal_check(outcome: Visit | BaseException | None) -> Check:
    name = "journal"
    if not isinstance(outcome, Visit):
        return skip(name, "unknown: the database was not read")
    rows = outcome.journal_rows
    if rows is None:
        return ok(name, "not made yet")
    if rows > JOURNAL_WARN_ROWS:
        return warn(
            name,
            f"{rows} acknowledged captures wait to be written to MEMORY.md (the next open "
            "replays them; a bot that keeps failing to shows why in its log)",
        )
    return ok(name, f"{rows} captures waiting" if rows else "empty")


def server_refusal(exc: BaseException) -> str | None:
    """The server's own words when it answered and refused (no such database or role, a
    password refused), as libpq passes them on: the server was reached, so the line
    must not say unreachable."""
    text = str(exc)
    if "FATAL:" not in text:
        return None
    said = text.split("FATAL:", 1)[1].strip().splitlines()
    return said[0].strip() if said else None


def first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def known_server_down(dsn: str, workspace_path: Path) -> str | None:
    """Why a PostgreSQL server this workspace reached before does not answer now, or None
    (blocking, bounded by the connect timeout). A server never reached is left to the
    core's open, whose line says to check the DSN."""
    from memory_core.base.workspace import Workspace
    from memory_core.storage.pg.database import CONNECT_TIMEOUT_SECONDS
    from memory_core.storage.pg.probe import unreachable
    from memory_core.storage.pg.reached import ReachedServers

    state_dir = Workspace.at(workspace_path).state_dir
    if not state_dir.is_dir() or not ReachedServers(state_dir).known(dsn):
        return None
    return unreachable(dsn, int(CONNECT_TIMEOUT_SECONDS))
