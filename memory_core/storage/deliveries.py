"""Inbound messages already taken by some process of the workspace.

Platforms deliver a message again (a DingTalk retry, a Telegram webhook retried after a
timeout), and with several bot processes behind one address the second delivery may
reach another process than the first. The first to insert the message's key answers it
and marks it answered; every other delivery finds the row and is dropped. A message
taken by a process that died before answering it (its owner lock is free) is taken over
by the next delivery, so a crash loses no message: answered once, not at most once.
Rows older than `KEEP` are pruned: no platform redelivers after days.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from memory_core.base.clock import format_when
from memory_core.base.sql import Connection, Db

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

    def __init__(self, db: Db, owner: str, is_gone: Callable[[str], Awaitable[bool]]) -> None:
        """`owner`: this process's id; `is_gone(owner)`: whether another owner's process
        has died (its owner lock is free)."""
        self._db = db
        self._owner = owner
        self._is_gone = is_gone
        self._claims = 0

    async def claim(self, channel: str, chat_id: str, message_id: str, at: datetime) -> bool:
        """True when this process should answer the message: its first delivery to any
        process, or a delivery of a message whose taker died before answering it."""
        key = (channel, chat_id, message_id)
        first = await self._db.autocommit(
            lambda conn: conn.execute(
                "INSERT INTO deliveries (channel, chat_id, message_id, at, owner, done)"
                " VALUES (?, ?, ?, ?, ?, 0) ON CONFLICT DO NOTHING RETURNING 1",
                (*key, format_when(at), self._owner),
            ).fetchall()
        )
        self._claims += 1
        if self._claims % PRUNE_EVERY == 0:
            await self.prune(at - KEEP)
        if first:
            return True
        rows = await self._db.read(
            lambda conn: conn.execute(
                "SELECT owner, done FROM deliveries WHERE channel = ? AND chat_id = ?"
                " AND message_id = ?",
                key,
            ).fetchall()
        )
        if not rows:
            return False
        owner, done = str(rows[0][0]), int(rows[0][1])
        if done or owner == self._owner or not owner or not await self._is_gone(owner):
            return False
        taken = await self._db.autocommit(
            lambda conn: (
                conn.execute(
                    "UPDATE deliveries SET owner = ? WHERE channel = ? AND chat_id = ?"
                    " AND message_id = ? AND owner = ? AND done = 0",
                    (self._owner, *key, owner),
                ).rowcount
            )
        )
        return bool(taken)

    async def answered(self, channel: str, chat_id: str, message_id: str) -> None:
        """The message's reply is made: no later delivery takes it over."""
        await self._db.autocommit(
            lambda conn: conn.execute(
                "UPDATE deliveries SET done = 1 WHERE channel = ? AND chat_id = ?"
                " AND message_id = ?",
                (channel, chat_id, message_id),
            )
        )

    async def prune(self, before: datetime) -> int:
        """Forget deliveries taken before `before`; how many."""
        cursor = await self._db.autocommit(
            lambda conn: (
                conn.execute("DELETE FROM deliveries WHERE at < ?", (format_when(before),)).rowcount
            )
        )
        return int(cursor)
