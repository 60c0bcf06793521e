"""A logical dump of the workspace's PostgreSQL tables, and loading one back (`chatmem
backup` / `chatmem restore`).

The dump is every table of the schema the DSN works in, read with COPY inside one
REPEATABLE READ transaction: one snapshot of the whole database while bots go on
writing. Loading wants the same migrations applied as the dump had (the migrations
are run first, on an empty database); it empties the tables and COPYs the rows back in
one transaction, moves the identity sequences past the restored ids, and leaves out
columns the target lacks (pgvector's, when the target has not added them yet: vectors
are made again).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg

from memory_core.base.errors import ChatmemError
from memory_core.storage.pg import in_use
from memory_core.storage.pg.connection import PgConnection
from memory_core.storage.pg.database import (
    CONNECT_TIMEOUT_SECONDS,
    OWNED_TABLES,
    _configure,
    migrate,
    translate,
)

NOT_DUMPED = frozenset({"writers"})
"""Per-process commit counters: meaningless in another database."""
NOT_LOADED = frozenset({"_migrations", *NOT_DUMPED})
"""The target keeps its own record of the migrations it applied (it must match)."""

LOAD_LOCK_TIMEOUT = "5s"
"""How long the restore's TRUNCATE waits for another session's locks (one not marked
as chatmem's: psql, a dump) before it stops with one line, nothing changed."""

RUN_TIME_STEPS = ("m011_", "m012_")
"""Migrations applied when vectors are first used (`database.apply_step`), not at open."""


def _connect(dsn: str) -> psycopg.Connection[Any]:
    try:
        raw = psycopg.connect(dsn, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT_SECONDS))
    except psycopg.Error as exc:
        raise translate(exc) from exc
    _configure(raw)
    return raw


def _tables(raw: psycopg.Connection[Any]) -> dict[str, list[str]]:
    """The schema's tables (`current_schema()`) with their stored columns, in order."""
    rows = raw.execute(
        "SELECT c.table_name, c.column_name FROM information_schema.columns c"
        " JOIN information_schema.tables t ON t.table_schema = c.table_schema"
        " AND t.table_name = c.table_name"
        " WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'"
        " AND c.is_generated = 'NEVER' ORDER BY c.table_name, c.ordinal_position"
    ).fetchall()
    tables: dict[str, list[str]] = {}
    for table, column in rows:
        tables.setdefault(str(table), []).append(str(column))
    return tables


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def dump(dsn: str, directory: Path) -> tuple[dict[str, tuple[list[str], int]], list[str]]:
    """Write `<table>.copy` (COPY text format) for every table into `directory`: per
    table its columns and rows, and the migrations applied. Blocking."""
    directory.mkdir(parents=True, exist_ok=True)
    out: dict[str, tuple[list[str], int]] = {}
    try:
        with _connect(dsn) as raw, raw.transaction():
            raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            tables = _tables(raw)
            if "_migrations" not in tables:
                raise ChatmemError("the PostgreSQL database holds no chatmem tables")
            migrations = [
                str(r[0]) for r in raw.execute("SELECT name FROM _migrations ORDER BY name")
            ]
            for table, columns in sorted(tables.items()):
                if table in NOT_DUMPED:
                    continue
                names = ", ".join(_ident(c) for c in columns)
                rows = 0
                sql = f"COPY {_ident(table)} ({names}) TO STDOUT"
                target = directory / f"{table}.copy"
                with target.open("wb") as handle, raw.cursor().copy(sql.encode()) as copy:
                    for block in copy:
                        handle.write(block)
                        rows += bytes(block).count(b"\n")
                out[table] = (columns, rows)
    except psycopg.Error as exc:
        raise translate(exc) from exc
    return out, migrations


def used(dsn: str) -> str | None:
    """What makes the database not empty (its workspace id, or 'rows'), or None; the
    migrations are applied first, so a new database is ready to load. Blocking."""
    try:
        with _connect(dsn) as raw:
            in_use.refuse(in_use.holders(raw))
            migrate(PgConnection(raw, uuid.uuid4().hex))
            row = raw.execute("SELECT id FROM workspace").fetchone()
            if row is not None:
                return f"it belongs to workspace {row[0]}"
            for table in OWNED_TABLES:
                if raw.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone()[0]:  # type: ignore[index]
                    return f"its table {table} holds rows"
    except psycopg.Error as exc:
        raise translate(exc) from exc
    return None


def load(
    dsn: str, directory: Path, tables: dict[str, list[str]], migrations: list[str]
) -> list[str]:
    """Replace the database's rows with the dump in `directory` (one transaction); the
    columns left out because the target lacks them. Blocking."""
    left_out: list[str] = []
    try:
        with _connect(dsn) as raw, raw.transaction():
            in_use.claim(raw)  # held to the commit: a bot starting now waits for it
            raw.execute(f"SET LOCAL lock_timeout = '{LOAD_LOCK_TIMEOUT}'")
            have = [str(r[0]) for r in raw.execute("SELECT name FROM _migrations")]
            _same_schema(migrations, have)
            target = _tables(raw)
            missing = sorted(t for t in tables if t not in target and t not in NOT_LOADED)
            if missing:
                raise ChatmemError(
                    f"the backup has tables this chatmem does not know ({', '.join(missing)}):"
                    " restore it with the chatmem version that made it"
                )
            loaded = [t for t in sorted(tables) if t not in NOT_LOADED]
            raw.execute("TRUNCATE " + ", ".join(_ident(t) for t in loaded) + " RESTART IDENTITY")
            for table in _parents_first(raw, loaded):
                kept = [c for c in tables[table] if c in target[table]]
                left_out += [f"{table}.{c}" for c in tables[table] if c not in kept]
                _copy_in(raw, directory / f"{table}.copy", table, tables[table], kept)
                _advance_sequences(raw, table)
    except psycopg.Error as exc:
        raise translate(exc) from exc
    return left_out


def _parents_first(raw: psycopg.Connection[Any], tables: list[str]) -> list[str]:
    """`tables` ordered so that a table referenced by a foreign key comes before the
    tables that reference it (the constraints are checked row by row)."""
    edges = raw.execute(
        "SELECT c.conrelid::regclass::text, c.confrelid::regclass::text FROM pg_constraint c"
        " JOIN pg_namespace n ON n.oid = c.connamespace"
        " WHERE c.contype = 'f' AND n.nspname = current_schema()"
    ).fetchall()
    parents: dict[str, set[str]] = {t: set() for t in tables}
    for child, parent in edges:
        child, parent = str(child).strip('"'), str(parent).strip('"')
        if child in parents and parent in parents and child != parent:
            parents[child].add(parent)
    ordered: list[str] = []
    while parents:
        ready = sorted(t for t, needs in parents.items() if not needs - set(ordered))
        if not ready:  # a cycle: no order satisfies it; load the rest as they come
            ready = sorted(parents)
        for table in ready:
            ordered.append(table)
            del parents[table]
    return ordered


def _same_schema(dumped: list[str], have: list[str]) -> None:
    """The dump's schema is the target's, steps made at run time (pgvector's) aside."""
    newer = sorted(_static(dumped) - _static(have))
    if newer:
        raise ChatmemError(
            f"the backup was made by a newer chatmem (migrations {', '.join(newer)}):"
            " restore it with that version"
        )
    older = sorted(_static(have) - _static(dumped))
    if older:
        raise ChatmemError(
            f"the database has migrations the backup lacks ({', '.join(older)}): restore it"
            " into an empty database (a new one, or its schema dropped and made again) with"
            " the chatmem version that made the backup"
        )


def _static(migrations: list[str]) -> set[str]:
    return {m for m in migrations if not m.startswith(RUN_TIME_STEPS)}


def _copy_in(
    raw: psycopg.Connection[Any], path: Path, table: str, columns: list[str], kept: list[str]
) -> None:
    """COPY the dump file in; a column the target lacks is cut out of each line."""
    names = ", ".join(_ident(c) for c in kept)
    keep = [columns.index(c) for c in kept]
    whole = len(keep) == len(columns)
    with (
        path.open("rb") as handle,
        raw.cursor().copy(f"COPY {_ident(table)} ({names}) FROM STDIN".encode()) as copy,
    ):
        if whole:
            while block := handle.read(1 << 20):
                copy.write(block)
            return
        for line in handle:
            fields = line.rstrip(b"\n").split(b"\t")
            copy.write(b"\t".join(fields[i] for i in keep) + b"\n")


def _advance_sequences(raw: psycopg.Connection[Any], table: str) -> None:
    """Identity columns continue after the restored ids (TRUNCATE restarted them)."""
    columns = raw.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema ="
        " current_schema() AND table_name = %s AND is_identity = 'YES'",
        (table,),
    ).fetchall()
    for (column,) in columns:
        raw.execute(
            f"SELECT setval(pg_get_serial_sequence(%s, %s),"
            f" GREATEST((SELECT COALESCE(MAX({_ident(str(column))}), 0)"
            f" FROM {_ident(table)}), 1))",
            (_ident(table), str(column)),
        )
