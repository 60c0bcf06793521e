"""Uses of long-term entries in replies, waiting for the next merge to reinforce them.

A chat turn records which entries its prompt used here, in the same commit as the reply,
so a turn never rewrites MEMORY.md; the next merge of the scope applies and clears them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from memory_core.base.scope import ScopeKey
from memory_core.base.sql import Connection, Db
from memory_core.storage.interfaces import Activation


def record_step(
    scope: ScopeKey, entry_ids: Iterable[str], session_id: str, at: str
) -> Callable[[Connection], None]:
    """The insert as a step of a caller's write transaction on the database thread."""
    rows = [(scope.value, entry_id, session_id, at) for entry_id in dict.fromkeys(entry_ids)]

    def write(conn: Connection) -> None:
        if rows:
            conn.executemany(
                "INSERT INTO activations (scope, entry_id, session_id, at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                rows,
            )

    return write


class Activations:
    """The `activations` table; the only module that touches it."""

    def __init__(self, db: Db) -> None:
        self._db = db

    async def record(
        self, scope: ScopeKey, entry_ids: Iterable[str], session_id: str, at: str
    ) -> None:
        await self._db.write(record_step(scope, entry_ids, session_id, at))

    async def pending(self, scope: ScopeKey) -> list[Activation]:
        rows = await self._db.read(
            lambda conn: conn.execute(
                "SELECT entry_id, session_id FROM activations WHERE scope = ? ORDER BY at",
                (scope.value,),
            ).fetchall()
        )
        return [(str(r[0]), str(r[1])) for r in rows]

    async def clear(self, scope: ScopeKey, pairs: list[Activation]) -> None:
        if pairs:
            await self._db.write(
                lambda conn: conn.executemany(
                    "DELETE FROM activations WHERE scope = ? AND entry_id = ? AND session_id = ?",
                    [(scope.value, e, s) for e, s in pairs],
                )
            )
