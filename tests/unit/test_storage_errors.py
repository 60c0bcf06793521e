"""One family of database errors (issue 25): `StorageError` under the root error, raised
by both backends for the same failures, and `sqlite3` (like psycopg) named only inside
its own backend, so no caller can come to depend on one driver's exceptions."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import psycopg.errors
import pytest

import memory_core.storage.pg.database as pg_database
from memory_core.base import errors
from memory_core.base.clock import ManualClock
from memory_core.base.errors import (
    ChatmemError,
    DatabaseBusy,
    DatabaseConflict,
    DatabaseCorrupt,
    DatabaseFailure,
    DatabaseForeign,
    DatabaseUnreachable,
    DatabaseUnwritable,
    IndexUnavailable,
    StorageError,
)
from memory_core.base.scope import MAIN
from memory_core.base.sql import Connection
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.storage import db
from tests.support import database

pytestmark = pytest.mark.storage

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("memory_core", "adapters", "tui")
SQLITE_BACKEND = frozenset({"memory_core/storage/db.py"})
"""The modules that may name `sqlite3`: where SQLite's statements run and its errors
become the family. Migrations, `SqliteBackend` and the index only hand it SQL."""
POSTGRES_BACKEND = "memory_core/storage/pg/"
"""The package that may name psycopg."""


def drivers_named(path: Path) -> set[str]:
    """The database drivers `path` imports anywhere (lazy imports too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        found.update(
            root
            for root in (name.split(".")[0] for name in names)
            if root in ("sqlite3", "psycopg", "psycopg_pool")
        )
    return found


def shipped_sources() -> Iterator[tuple[str, Path]]:
    for package in SHIPPED:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path


def test_sqlite3_is_named_only_by_the_sqlite_backend() -> None:
    naming = {name for name, path in shipped_sources() if "sqlite3" in drivers_named(path)}
    assert naming == SQLITE_BACKEND


def test_psycopg_is_named_only_by_the_postgres_backend() -> None:
    naming = {
        name
        for name, path in shipped_sources()
        if drivers_named(path) & {"psycopg", "psycopg_pool"}
    }
    assert naming and all(name.startswith(POSTGRES_BACKEND) for name in naming), naming


def test_the_family_stands_under_the_root_error_on_no_driver() -> None:
    kinds = (
        DatabaseBusy,
        DatabaseUnwritable,
        DatabaseUnreachable,
        DatabaseConflict,
        DatabaseForeign,
        DatabaseCorrupt,
        DatabaseFailure,
        IndexUnavailable,
    )
    assert issubclass(StorageError, ChatmemError)
    for kind in kinds:
        assert issubclass(kind, StorageError), kind
        assert all(base.__module__ == errors.__name__ for base in kind.__mro__[:-3]), kind
    # The kinds exclude each other: a caller that acts on one never catches another.
    for kind in kinds:
        assert [other for other in kinds if issubclass(kind, other)] == [kind]


def test_a_tool_hears_a_storage_failure_as_one_database_line() -> None:
    line = errors.refusal("memory_search", DatabaseCorrupt("the file is damaged\nat page 16"))
    assert line == "memory storage failed (database): the file is damaged"


# --- the translations, error by error ---------------------------------------------------------


def sqlite_failure(tmp_path: Path, provoke: str) -> sqlite3.Error:
    """A real `sqlite3` error, provoked on a file of the test's own."""
    path = tmp_path / "t.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None, timeout=0)
    conn.execute("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v TEXT NOT NULL UNIQUE)")
    conn.execute("INSERT OR IGNORE INTO t VALUES ('a', 'x')")
    other: sqlite3.Connection | None = None
    try:
        if provoke == "unique key":
            conn.execute("INSERT INTO t VALUES ('b', 'x')")
        elif provoke == "primary key":
            conn.execute("INSERT INTO t VALUES ('a', 'y')")
        elif provoke == "not null":
            conn.execute("INSERT INTO t VALUES ('c', NULL)")
        elif provoke == "no table":
            conn.execute("SELECT * FROM no_such_table")
        elif provoke == "read-only":
            conn.execute("PRAGMA query_only = ON")
            conn.execute("INSERT INTO t VALUES ('d', 'z')")
        elif provoke == "locked":
            other = sqlite3.connect(path, isolation_level=None, timeout=0)
            other.execute("BEGIN IMMEDIATE")
            conn.execute("BEGIN IMMEDIATE")
        elif provoke == "not a database":
            conn.close()
            path.write_bytes(random.Random(5).randbytes(8192))
            conn = sqlite3.connect(path, isolation_level=None)
            conn.execute("SELECT * FROM t")
    except sqlite3.Error as exc:
        return exc
    finally:
        conn.close()
        if other is not None:
            other.close()
    raise AssertionError(f"{provoke}: no error")


def pg_failure(kind: type[psycopg.Error]) -> psycopg.Error:
    return kind("what the server said")


SAME_FAILURES: list[tuple[str, type[psycopg.Error], type[StorageError]]] = [
    ("unique key", psycopg.errors.UniqueViolation, DatabaseConflict),
    ("primary key", psycopg.errors.UniqueViolation, DatabaseConflict),
    ("not null", psycopg.errors.NotNullViolation, DatabaseFailure),
    ("no table", psycopg.errors.UndefinedTable, DatabaseFailure),
    ("read-only", psycopg.errors.ReadOnlySqlTransaction, DatabaseUnwritable),
    ("locked", psycopg.errors.LockNotAvailable, DatabaseBusy),
    ("not a database", psycopg.errors.DataCorrupted, DatabaseCorrupt),
]


@pytest.mark.parametrize(("provoke", "pg_kind", "kind"), SAME_FAILURES)
def test_both_drivers_errors_become_the_same_kind(
    tmp_path: Path,
    provoke: str,
    pg_kind: type[psycopg.Error],
    kind: type[StorageError],
) -> None:
    from_sqlite = db.storage_error(sqlite_failure(tmp_path, provoke))
    from_pg = pg_database.translate(pg_failure(pg_kind))
    assert type(from_sqlite) is kind, from_sqlite
    assert type(from_pg) is kind, from_pg


def test_a_made_up_sqlite_error_still_has_a_kind() -> None:
    """An error raised by hand (a test's fake, a driver without result codes) carries no
    code: the message decides, and anything unknown is a failure, never a raw error."""
    assert type(db.storage_error(sqlite3.OperationalError("database is locked"))) is DatabaseBusy
    malformed = sqlite3.DatabaseError("database disk image is malformed")
    assert type(db.storage_error(malformed)) is DatabaseCorrupt
    unique = sqlite3.IntegrityError("UNIQUE constraint failed: t.k")
    assert type(db.storage_error(unique)) is DatabaseConflict
    assert type(db.storage_error(sqlite3.InterfaceError("bad parameter"))) is DatabaseFailure


# --- through a running core, on each backend ---------------------------------------------------


def table(conn: Connection) -> None:
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
    conn.execute("INSERT INTO t (k, v) VALUES ('a', 'x')")


def insert(k: str, v: str | None) -> Any:
    return lambda conn: conn.execute("INSERT INTO t (k, v) VALUES (?, ?)", (k, v))


def read_only_insert(conn: Connection) -> None:
    """A write the database refuses as read-only (SQLite's SQLITE_READONLY, PostgreSQL's
    read_only_sql_transaction): what a read-only file or replica answers."""
    if conn.dialect.name == "sqlite":
        conn.execute("PRAGMA query_only = ON")
        try:
            conn.execute("INSERT INTO t (k, v) VALUES ('r', 'o')")
        finally:
            conn.execute("PRAGMA query_only = OFF")
    else:
        conn.execute("SET TRANSACTION READ ONLY")
        conn.execute("INSERT INTO t (k, v) VALUES ('r', 'o')")


async def test_each_backend_raises_the_family_for_the_same_failures(core: MemoryCore) -> None:
    store = database(core)
    await store.write(table)
    with pytest.raises(DatabaseConflict):
        await store.write(insert("a", "y"))
    with pytest.raises(DatabaseFailure, match="database error"):
        await store.write(insert("b", None))
    with pytest.raises(DatabaseFailure, match="no_such_table"):
        await store.read(lambda conn: conn.execute("SELECT * FROM no_such_table").fetchall())
    with pytest.raises(DatabaseUnwritable):
        await store.write(read_only_insert)
    # Nothing of the failed writes stayed, and the database goes on as before.
    await store.write(insert("b", "y"))
    rows = await store.read(lambda conn: conn.execute("SELECT k, v FROM t ORDER BY k").fetchall())
    assert [tuple(r) for r in rows] == [("a", "x"), ("b", "y")]


@contextlib.contextmanager
def write_lock_held(core: MemoryCore) -> Iterator[None]:
    """Another process holds a write lock on `t` (SQLite: the database's; PostgreSQL: the
    table's) until the block ends."""
    if database(core).dialect.name == "sqlite":
        conn = sqlite3.connect(core.workspace.db_path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    with psycopg.connect(core.config.storage.postgres_dsn) as pg, pg.transaction():
        pg.execute("LOCK TABLE t IN ACCESS EXCLUSIVE MODE")
        yield


async def test_a_lock_held_past_waiting_is_busy_on_each_backend(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = database(core)
    await store.write(table)
    monkeypatch.setattr(db, "BUSY_RETRY_SECONDS", 0.2)
    if store.dialect.name == "sqlite":
        await store.autocommit(lambda conn: conn.execute("PRAGMA busy_timeout = 50"))

    def write(conn: Connection) -> None:
        if conn.dialect.name == "postgres":
            conn.execute("SET LOCAL lock_timeout = '50ms'")
        conn.execute("INSERT INTO t (k, v) VALUES ('b', 'y')")

    with write_lock_held(core), pytest.raises(DatabaseBusy) as caught:
        await store.write(write)
    assert "\n" not in str(caught.value)
    await store.write(write)  # the lock is gone: the same write goes through


def damage_the_chunks_table(path: Path) -> None:
    """Overwrite the first page of the index's chunks table with noise: the file still
    opens, and the damage is found when that table is read."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        [(page,)] = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'chunks'")
        [(size,)] = conn.execute("PRAGMA page_size")
    with path.open("r+b") as file:
        file.seek((page - 1) * size)
        file.write(random.Random(5).randbytes(size))


@pytest.mark.sqlite_only
async def test_a_file_damaged_under_a_core_is_corrupt_degrades_and_is_moved_aside(
    config: Config, clock: ManualClock
) -> None:
    """The damage is found by a search, not at open: `DatabaseCorrupt`, so the index
    degrades to the files, and a reindex moves the file aside and rebuilds it."""
    async with MemoryCore.open(config, clock=clock) as core:
        await core.notes.append(MAIN, "the kayak is red")
        path = core.workspace.db_path
    damage_the_chunks_table(path)

    async with MemoryCore.open(config, clock=clock) as core:
        assert core.degraded_reason is None  # it opened: the damage is further in
        assert [h.text for h in await core.finder.search(MAIN, "kayak")] == ["the kayak is red"]
        assert core.guard.index is None
        assert core.degraded_reason is not None and "damaged" in core.degraded_reason
        await core.reindex()
        assert list(path.parent.glob("index.sqlite3.corrupt-*"))
        assert core.degraded_reason is None and core.guard.index is not None
        hits = await core.guard.index.search(MAIN, "kayak")
        assert [h.text for h in hits] == ["the kayak is red"]


@pytest.mark.sqlite_only
async def test_a_database_that_is_not_open_is_a_storage_error(
    config: Config, clock: ManualClock
) -> None:
    """A core whose database could not be opened runs on its files; what needs the
    database fails in the family every caller catches, saying why."""
    path = config.workspace_path / ".chatmem" / "index.sqlite3"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"no database at all \x00\xff" * 200)
    async with MemoryCore.open(config, clock=clock) as core:
        with pytest.raises(StorageError) as raised:
            await core.audit.recent(MAIN)
    assert isinstance(raised.value, IndexUnavailable)
    assert "index.sqlite3" in str(raised.value)


@pytest.mark.sqlite_only
async def test_a_rebuild_that_meets_the_damage_first_moves_the_file_aside(
    config: Config, clock: ManualClock
) -> None:
    """`chatmem reindex` opens its core without syncing the files (`sync_files=False`),
    so the rebuild may be the first to read the damaged pages: it moves the file aside
    and rebuilds, as when the open or a search found the damage."""
    async with MemoryCore.open(config, clock=clock) as core:
        await core.notes.append(MAIN, "the kayak is red")
        path = core.workspace.db_path
    damage_the_chunks_table(path)

    async with MemoryCore.open(config, clock=clock, sync_files=False) as core:
        assert core.guard.index is not None  # nothing read the damaged pages yet
        stats = await core.reindex()
        assert stats.files_indexed >= 1
        assert list(path.parent.glob("index.sqlite3.corrupt-*"))
        assert core.guard.index is not None
        hits = await core.guard.index.search(MAIN, "kayak")
        assert [h.text for h in hits] == ["the kayak is red"]


async def test_a_server_that_cannot_be_reached_is_unreachable_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No server at all (nothing listens on the port): every call is a
    `DatabaseUnreachable`, and its line never carries the connection string."""
    monkeypatch.setattr(pg_database, "CONNECT_TIMEOUT_SECONDS", 1.0)
    dsn = "postgresql://chatmem:hunter2@127.0.0.1:1/nowhere"
    store = await pg_database.PgDatabase.open(dsn)
    try:
        with pytest.raises(DatabaseUnreachable) as caught:
            await store.read(lambda conn: conn.execute("SELECT 1").fetchall())
    finally:
        await asyncio.wait_for(store.close(), 10)
    assert isinstance(caught.value, StorageError)
    assert "hunter2" not in str(caught.value) and "\n" not in str(caught.value)
