"""Inbound messages already taken by some process of the workspace.

Platforms deliver a message again (a DingTalk retry, a Telegram webhook retried after a
timeout), and with several bot processes behind one address the second delivery may
reach another process than the first. The first to insert the message's key answers it;
every other delivery finds the row and is dropped. Rows older than `KEEP` are pruned: no
platform redelivers after days.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from memory_core.clock import format_when
from memory_core.sql import Connection, Db

KEEP = timedelta(days=7)
PRUNE_EVERY = 1000
"""Claims between two prunes of old rows (per process)."""


def claim_step(
    channel: str, chat_id: str, message_id: str, at: datetime
) -> Callable[[Connection], bool]:
    """The claim as a step of a caller's write transaction: True when this is the first
    (the caller goes on), False when the key is taken (the caller writes nothing)."""
    key = (channel, chat_id, message_id, format_when(at))

    def claim(conn: Connection) -> bool:
        return bool(
            conn.execute(
                "INSERT INTO deliveries (channel, chat_id, message_id, at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING RETURNING 1",
                key,
            ).fetchall()
        )

    return claim


class Deliveries:
    """The `deliveries` table; the only module that touches it."""

    def __init__(self, db: Db) -> None:
        self._db = db
        self._claims = 0

    async def claim(self, channel: str, chat_id: str, message_id: str, at: datetime) -> bool:
        """True for the first delivery of this message to any process, False after."""
        taken = await self._db.call(claim_step(channel, chat_id, message_id, at))
        self._claims += 1
        if self._claims % PRUNE_EVERY == 0:
            await self.prune(at - KEEP)
        return taken

    async def prune(self, before: datetime) -> int:
        """Forget deliveries taken before `before`; how many."""
        cursor = await self._db.call(
            lambda conn: (
                conn.execute("DELETE FROM deliveries WHERE at < ?", (format_when(before),)).rowcount
            )
        )
        return int(cursor)
