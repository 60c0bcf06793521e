"""The audit log: every change to an entry, with the text of forgotten entries kept until
a purge erases it."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from memory_core.base.clock import format_when, parse_when
from memory_core.base.merge_values import Change, ChangeKind
from memory_core.base.records import AuditRecord, ScopeEvent
from memory_core.base.scope import ScopeKey
from memory_core.base.sql import Connection, Db

AUDITED = frozenset(ChangeKind) - {ChangeKind.DECAYED}
"""Decay touches every entry at every merge; the log keeps the events a person cares about."""


AuditRow = tuple[str, str, str, str, float | None, float | None, str, str | None, str | None, str]
"""(at, scope, entry_id, action, old_score, new_score, source, category, content, detail)."""


def audit_rows(
    scope: ScopeKey, changes: Iterable[Change], source: str, at: datetime
) -> list[AuditRow]:
    """The rows `changes` make in the log (decay makes none)."""
    return [
        (
            format_when(at),
            scope.value,
            c.entry_id,
            c.kind.value,
            c.old_score,
            c.new_score,
            source,
            c.category,
            c.content,
            c.detail,
        )
        for c in changes
        if c.kind in AUDITED
    ]


def insert_rows(conn: Connection, rows: Sequence[Sequence[Any]]) -> None:
    conn.executemany(
        "INSERT INTO audit (at, scope, entry_id, action, old_score, new_score,"
        " source, category, content, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )


class AuditLog:
    def __init__(self, db: Db) -> None:
        self._db = db

    async def record(
        self, scope: ScopeKey, changes: Iterable[Change], source: str, at: datetime
    ) -> int:
        rows = audit_rows(scope, changes, source, at)
        if rows:
            await self._db.write(lambda conn: insert_rows(conn, rows))
        return len(rows)

    async def history(self, scope: ScopeKey, entry_id: str) -> list[AuditRecord]:
        return await self._select(
            "WHERE scope = ? AND entry_id = ? ORDER BY id", scope.value, entry_id
        )

    async def recent(
        self, scope: ScopeKey | None = None, limit: int = 100, after_id: int = 0
    ) -> list[AuditRecord]:
        """Newest first; `after_id` lets a live view fetch only what is new."""
        if scope is None:
            return await self._select("WHERE id > ? ORDER BY id DESC LIMIT ?", after_id, limit)
        return await self._select(
            "WHERE scope = ? AND id > ? ORDER BY id DESC LIMIT ?", scope.value, after_id, limit
        )

    async def forgotten(self, scope: ScopeKey, limit: int = 500) -> list[AuditRecord]:
        return await self._select(
            "WHERE scope = ? AND action = 'forget' ORDER BY id DESC LIMIT ?", scope.value, limit
        )

    async def purge(
        self, scope: ScopeKey, entry_ids: Collection[str], source: str, at: datetime
    ) -> None:
        """Erase the text of these entries from the log, for a person who wants it gone:
        their rows keep what happened and when, with the content emptied, and one `purge`
        row per entry records the erasure. See `vacuum` for the bytes SQLite keeps."""
        ids = sorted(set(entry_ids))
        when = format_when(at)

        def erase(conn: Connection) -> None:
            conn.executemany(
                "UPDATE audit SET content = NULL WHERE scope = ? AND entry_id = ?",
                [(scope.value, entry_id) for entry_id in ids],
            )
            conn.executemany(
                "INSERT INTO audit (at, scope, entry_id, action, old_score, new_score,"
                " source, category, content, detail)"
                " VALUES (?, ?, ?, 'purge', NULL, NULL, ?, NULL, NULL, 'purged by request')",
                [(when, scope.value, entry_id, source) for entry_id in ids],
            )

        if ids:
            await self._db.write(erase)

    async def vacuum(self, tables: Sequence[str] = ()) -> bool:
        """Rewrite the database file without free space, then empty its WAL: the last step
        of a purge. SQLite leaves deleted and overwritten text in free parts of its pages
        (unless built with secure_delete), and the old pages in the WAL. False when
        another process's open read kept the WAL from being emptied (its frames are
        overwritten by later writes). On PostgreSQL, `VACUUM FULL` of the tables a purge
        writes, and `tables` (an erasure's): their old row versions go, and with them the
        erased text."""
        purged = (*PURGED_TABLES, *tables)
        return await self._db.autocommit(lambda conn: conn.dialect.vacuum(conn, purged))

    async def last_id(self) -> int:
        return int(await self._scalar("SELECT COALESCE(MAX(id), 0) FROM audit"))

    async def action_counts(self) -> dict[str, int]:
        """How many audit rows each action has, over the whole workspace."""
        rows = await self._fetch("SELECT action, COUNT(*) FROM audit GROUP BY action")
        return {str(r[0]): int(r[1]) for r in rows}

    async def _fetch(self, sql: str, *params: object) -> list[Any]:
        return await self._db.read(lambda conn: conn.execute(sql, params).fetchall())

    async def _scalar(self, sql: str, *params: object) -> Any:
        rows = await self._fetch(sql, *params)
        return rows[0][0] if rows else None

    async def _select(self, where: str, *params: object) -> list[AuditRecord]:
        sql = (
            "SELECT id, at, scope, entry_id, action, old_score, new_score, source, category,"
            f" content, detail FROM audit {where}"
        )
        return [
            AuditRecord(
                id=r[0],
                at=parse_when(r[1]),
                scope=r[2],
                entry_id=r[3],
                action=r[4],
                old_score=r[5],
                new_score=r[6],
                source=r[7],
                category=r[8],
                content=r[9],
                detail=r[10],
            )
            for r in await self._fetch(sql, *params)
        ]

    # --- sessions already merged, and scope-level events ------------------------------
    async def seen_sessions(self, scope: ScopeKey) -> frozenset[str]:
        rows = await self._fetch("SELECT session_id FROM extractions WHERE scope = ?", scope.value)
        return frozenset(r[0] for r in rows)

    async def mark_session(
        self, scope: ScopeKey, session_id: str, at: datetime, stats: dict[str, int]
    ) -> None:
        await self._db.autocommit(
            lambda conn: conn.execute(
                "INSERT INTO extractions (scope, session_id, at, stats) VALUES (?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (scope.value, session_id, format_when(at), json.dumps(stats)),
            )
        )

    async def add_event(
        self, scope: ScopeKey, kind: str, at: datetime, detail: dict[str, object] | None = None
    ) -> None:
        await self._db.autocommit(
            lambda conn: conn.execute(
                "INSERT INTO events (at, scope, kind, detail) VALUES (?, ?, ?, ?)",
                (format_when(at), scope.value, kind, json.dumps(detail or {}, ensure_ascii=False)),
            )
        )

    async def events(
        self, scope: ScopeKey | None = None, kind: str | None = None, limit: int = 100
    ) -> list[ScopeEvent]:
        clauses, params = [], []
        if scope is not None:
            clauses.append("scope = ?")
            params.append(scope.value)
        if kind is not None:
            clauses.append("kind = ?")
            params.append(kind)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = await self._fetch(
            f"SELECT id, at, scope, kind, detail FROM events {where} ORDER BY id DESC LIMIT ?",
            *params,
            limit,
        )
        return [
            ScopeEvent(id=r[0], at=parse_when(r[1]), scope=r[2], kind=r[3], detail=json.loads(r[4]))
            for r in rows
        ]


PURGED_TABLES = ("audit", "chunks", "messages")
