"""An erasure's database work, each function one step inside `Db.write`/`Db.read`: the
rows a scope (or a person's lines in a group) owns counted, then deleted, the audit
rows' text emptied and one content-free `erase` row per kind written.

Same SQL on both backends; the index's own bookkeeping (postings, counters) goes
through `recall.index.writes`, as every other chunk deletion does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memory_core.base.sql import Connection
from memory_core.erasure.people import GroupRow
from memory_core.recall.index import writes

OWNED = ("messages", "sessions", "archive_runs", "extractions", "activations", "events")
"""Tables whose rows of a scope go with it (each has a `scope` column)."""

ERASE_ACTION = "erase"
"""The audit action of an erasure's own rows: what kind went, how many, by whom."""


def scope_counts(conn: Connection, scope: str) -> dict[str, int]:
    """Rows the scope owns per table, its audit rows, and its chunks in the index."""
    counts = {
        table: int(
            conn.execute(f"SELECT COUNT(*) FROM {table} WHERE scope = ?", (scope,)).fetchone()[0]
        )
        for table in (*OWNED, "audit")
    }
    sid = _sid(conn, scope)
    counts["chunks"] = (
        0
        if sid is None
        else int(
            conn.execute("SELECT COUNT(*) FROM chunks WHERE scope_id = ?", (sid,)).fetchone()[0]
        )
    )
    return counts


def erase_scope(conn: Connection, scope: str) -> None:
    """Every row of the scope gone, its audit rows' text emptied (the rows stay: what
    happened and when), its chunks, postings, terms, files and vectors out of the index.
    The scope's row in the index stays (emptied): a process may still hold its id."""
    sid = _sid(conn, scope)
    if sid is not None:
        rows = conn.execute("SELECT id, tokens FROM chunks WHERE scope_id = ?", (sid,)).fetchall()
        writes.delete_rows(conn, sid, rows)
        for table in ("files", "terms", "chunk_vectors", "scope_summaries"):
            conn.execute(f"DELETE FROM {table} WHERE scope_id = ?", (sid,))
        conn.execute("UPDATE scopes SET chunk_count = 0, token_count = 0 WHERE id = ?", (sid,))
    for table in OWNED:
        conn.execute(f"DELETE FROM {table} WHERE scope = ?", (scope,))
    conn.execute("UPDATE audit SET content = NULL, detail = '' WHERE scope = ?", (scope,))


def group_messages(conn: Connection, scope: str) -> list[GroupRow]:
    """A group's messages as `(id, session, role, speaker, speaker_id, content)`, by
    session and id (`speaker_id` None where the message kept none)."""
    return [
        (int(r[0]), str(r[1]), str(r[2]), str(r[3]), None if r[4] is None else str(r[4]), str(r[5]))
        for r in conn.execute(
            "SELECT id, session_id, role, speaker, speaker_id, content FROM messages"
            " WHERE scope = ? ORDER BY session_id, id",
            (scope,),
        ).fetchall()
    ]


def scopes_spoken_in(conn: Connection, speaker_id: str, prefix: str) -> list[str]:
    """The scopes starting with `prefix` (a channel's groups) where `speaker_id` spoke."""
    return [
        str(r[0])
        for r in conn.execute(
            "SELECT DISTINCT scope FROM messages WHERE speaker_id = ? AND role = 'user'",
            (speaker_id,),
        ).fetchall()
        if str(r[0]).startswith(prefix)
    ]


def erase_lines(
    conn: Connection, scope: str, message_ids: Sequence[int], entry_ids: Sequence[str]
) -> None:
    """Some messages of a group (with their index chunks) and the audit text of some of
    its entries."""
    sid = _sid(conn, scope)
    ids = list(message_ids)
    if sid is not None and ids:
        writes.remove_messages(conn, sid, ids)
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        conn.execute(f"DELETE FROM messages WHERE id IN ({','.join('?' * len(part))})", part)
    conn.executemany(
        "UPDATE audit SET content = NULL, detail = '' WHERE scope = ? AND entry_id = ?",
        [(scope, entry_id) for entry_id in entry_ids],
    )


def record(conn: Connection, scope: str, at: str, by: str, kinds: Mapping[str, int]) -> None:
    """One content-free audit row per kind erased: `entry_id` names the kind, `detail`
    the count, `source` who asked."""
    conn.executemany(
        "INSERT INTO audit (at, scope, entry_id, action, old_score, new_score, source,"
        " category, content, detail) VALUES (?, ?, ?, ?, NULL, NULL, ?, NULL, NULL, ?)",
        [
            (at, scope, kind, ERASE_ACTION, by, f"{count} erased")
            for kind, count in sorted(kinds.items())
            if count
        ],
    )


def drop_captures(conn: Connection, scope: str) -> int:
    """The scope's rows of the capture journal (another process's captures not yet in
    the files, or rows no process could read)."""
    return max(conn.execute("DELETE FROM captures WHERE scope = ?", (scope,)).rowcount, 0)


def _sid(conn: Connection, scope: str) -> int | None:
    row = conn.execute("SELECT id FROM scopes WHERE key = ?", (scope,)).fetchone()
    return None if row is None else int(row[0])
