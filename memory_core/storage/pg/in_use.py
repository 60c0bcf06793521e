"""Which processes use a PostgreSQL workspace now, so `chatmem restore` can refuse at once
instead of waiting on their row locks (and then replacing the rows under them).

Every connection of a serving pool holds a shared session-level advisory lock named
after the schema it works in (`mark`); `claim` takes the same lock exclusively for one
transaction, and names the other holders when it cannot. Advisory locks are visible to
every role in `pg_locks`, whatever the DSN's application_name, and they end with the
connection, so a process that died leaves none behind.
"""

from __future__ import annotations

from typing import Any

import psycopg

from memory_core.base.errors import ChatmemError
from memory_core.base.wording import counted

IN_USE_LOCK = "chatmem:in-use"
_KEY = "hashtextextended(COALESCE(current_schema(), '') || %s, 0)"


class WorkspaceInUse(ChatmemError):
    """Other chatmem processes hold connections to the schema: one line."""


def mark(raw: psycopg.Connection[Any]) -> None:
    """Mark a pooled connection as one of a serving process (held until it closes)."""
    raw.execute(f"SELECT pg_advisory_lock_shared({_KEY})", (IN_USE_LOCK,))


def holders(raw: psycopg.Connection[Any]) -> list[int]:
    """The server process ids of the other connections that hold the mark."""
    rows = raw.execute(
        "SELECT DISTINCT l.pid FROM pg_locks l, (SELECT " + _KEY + " AS k) key"
        " WHERE l.locktype = 'advisory' AND l.granted AND l.database ="
        " (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND l.classid::bigint = ((key.k >> 32) & 4294967295)"
        " AND l.objid::bigint = (key.k & 4294967295) AND l.objsubid = 1"
        " AND l.pid <> pg_backend_pid() ORDER BY l.pid",
        (IN_USE_LOCK,),
    ).fetchall()
    return [int(r[0]) for r in rows]


def claim(raw: psycopg.Connection[Any]) -> None:
    """Take the mark exclusively until the transaction `raw` is in ends; a
    `WorkspaceInUse` when other connections hold it (nothing waits)."""
    got = raw.execute(f"SELECT pg_try_advisory_xact_lock({_KEY})", (IN_USE_LOCK,)).fetchone()
    if got is None or not got[0]:
        refuse(holders(raw))


def refuse(pids: list[int]) -> None:
    """A `WorkspaceInUse` naming the connections, when there are any."""
    if pids:
        shown = ", ".join(str(p) for p in pids[:5]) + (" …" if len(pids) > 5 else "")
        raise WorkspaceInUse(
            f"chatmem processes are connected to this PostgreSQL database and schema"
            f" ({counted(len(pids), 'connection')}, server pids {shown}): stop the bots"
            " first (nothing was done)"
        )
