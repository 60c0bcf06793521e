"""When each scheduled job last ran, so a restart neither skips nor repeats a day's job."""

from __future__ import annotations

from memory_core.base.sql import Db


class ScheduleState:
    """The `schedule_state` table; the only module that touches it."""

    def __init__(self, db: Db) -> None:
        self._db = db

    async def last(self, name: str) -> str | None:
        rows = await self._db.read(
            lambda conn: conn.execute(
                "SELECT last_run FROM schedule_state WHERE name = ?", (name,)
            ).fetchall()
        )
        return str(rows[0][0]) if rows else None

    async def mark(self, name: str, value: str) -> None:
        await self._db.autocommit(
            lambda conn: conn.execute(
                "INSERT INTO schedule_state (name, last_run) VALUES (?, ?) ON CONFLICT (name)"
                " DO UPDATE SET last_run = excluded.last_run",
                (name, value),
            )
        )
