"""Search reads, as functions run on the database thread."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from memory_core.base.sql import Connection
from memory_core.base.turn_dates import decode_days, overlaps
from memory_core.recall.index.postings import CANDIDATE_COLUMNS, postings
from memory_core.recall.index.ranking import CorpusStats
from memory_core.recall.index.topk import Scoring


def corpus_stats(conn: Connection, sid: int, terms: set[str]) -> CorpusStats:
    """N, average length and document frequencies of a scope (on the database thread)."""
    placeholders = ",".join("?" * len(terms))
    rows = conn.execute(
        "SELECT NULL, chunk_count, token_count FROM scopes WHERE id = ? UNION ALL"
        f" SELECT term, df, 0 FROM terms WHERE scope_id = ? AND term IN ({placeholders})",
        (sid, sid, *terms),
    ).fetchall()
    docs = tokens = 0
    freq: dict[str, int] = {}
    for term, count, total in rows:
        if term is None:
            docs, tokens = int(count), int(total)
        else:
            freq[str(term)] = int(count)
    return CorpusStats(docs=max(docs, 1), avg_len=tokens / docs if docs else 1.0, doc_freq=freq)


def find_scope(conn: Connection, key: str) -> int | None:
    row = conn.execute("SELECT id FROM scopes WHERE key = ?", (key,)).fetchone()
    return int(row[0]) if row else None


def scope_ids(conn: Connection) -> list[int]:
    """Every scope's id in the index."""
    return [int(r[0]) for r in conn.execute("SELECT id FROM scopes ORDER BY id")]


def candidates(
    conn: Connection,
    sid: int,
    scoring: Scoring,
    filters: list[str],
    params: list[object],
    wanted: int,
) -> list[Any]:
    """The scope's visible chunks holding any of the query's terms but its boosts: the
    exact best `wanted` by its BM25, every term counted (`postings.py`, `topk.py`)."""
    return postings(conn).candidates(conn, sid, scoring, filters, params, wanted)


MENTIONS_WINDOW = (
    "c.dates <> '' AND substr(c.dates, 1, 10) <= ? AND substr(c.dates, length(c.dates) - 9) >= ?"
)
"""A chunk whose text may speak of a day of a window (parameters: the window's last local
date, then its first, ISO): its earliest day named is not after the window and its
latest not before. Ranges are
stored sorted and disjoint (`turn_dates.encode_days`), so this holds for every chunk with
a range in the window; one whose ranges fall around it is read too, and ranked by the
exact test (`rerank.time_factor`). The first test uses the `chunks_scope_dates` index."""


@dataclass(frozen=True, slots=True)
class Window:
    """A question's named time, as the index selects by it."""

    since: str
    until: str
    """Instants bounding its local days (`created_at` is compared with them)."""
    first: date
    last: date
    """Its local days (a chunk's `dates` are compared with them)."""

    def filter(self) -> tuple[str, list[object]]:
        """Chunks of the window: made then, or speaking of a day in it."""
        sql = f"((c.created_at >= ? AND c.created_at < ?) OR ({MENTIONS_WINDOW}))"
        return sql, [self.since, self.until, self.last.isoformat(), self.first.isoformat()]


def dated(
    conn: Connection,
    sid: int,
    filters: list[str],
    params: list[object],
    window: Window,
    wanted: int,
) -> list[Any]:
    """The scope's newest chunks of a time, for a question that names a time and no other
    word ("what did we talk about yesterday?"): those made then, and those that speak of
    a day then (each read by its own index)."""
    where = " AND ".join(
        ["c.scope_id = ?", "c.hidden = 0", "c.created_at >= ?", "c.created_at < ?", *filters]
    )
    sql = f"SELECT {CANDIDATE_COLUMNS} FROM chunks AS c WHERE {where} ORDER BY c.created_at DESC LIMIT ?"
    made = conn.execute(sql, [sid, window.since, window.until, *params, wanted]).fetchall()
    where = " AND ".join(["c.scope_id = ?", "c.hidden = 0", MENTIONS_WINDOW, *filters])
    # In the order of `chunks_scope_dates`, from the window down: the index is read from
    # the window's end and the scan stops at `wanted` rows (by `created_at`, PostgreSQL
    # walked the whole scope, not knowing how few rows the day tests keep).
    sql = (
        f"SELECT {CANDIDATE_COLUMNS} FROM chunks AS c WHERE {where}"
        " ORDER BY substr(c.dates, 1, 10) DESC LIMIT ?"
    )
    bounds = [window.last.isoformat(), window.first.isoformat()]
    spoken = conn.execute(sql, [sid, *bounds, *params, wanted]).fetchall()
    return made + [
        row for row in spoken if overlaps(decode_days(row[9]), window.first, window.last)
    ]


def by_ids(
    conn: Connection, sid: int, ids: list[int], filters: list[str], params: list[object]
) -> list[Any]:
    """Chunks by id, only the scope's and visible ones: a vector hit is read back through
    the scope, so a stale vector can never show another scope's text."""
    if not ids:
        return []
    # `+`: SQLite then looks the few ids up by rowid instead of walking the scope's index.
    among, id_params = conn.dialect.any_of("c.id", ids)
    where = " AND ".join(["+c.scope_id = ?", "+c.hidden = 0", among, *filters])
    return conn.execute(
        f"SELECT {CANDIDATE_COLUMNS} FROM chunks AS c WHERE {where}", [sid, *id_params, *params]
    ).fetchall()


BY_LINE = "kind <> 'long_term'"
"""The condition of the index of chunks by line (`chunks_one_per_line`): a lookup by line
names it, or SQLite cannot use that index. Neutral in results: a path holds one kind,
and these paths (conversations) hold no long-term chunks, which are keyed by entry."""


def neighbours(
    conn: Connection, sid: int, anchors: list[tuple[int, str, int]], reach: int
) -> list[tuple[int, int, Any]]:
    """(anchor id, distance, row) of the `reach` turns before and after each anchor in its
    own conversation (same scope, same path)."""
    out: list[tuple[int, int, Any]] = []
    before = (
        f"SELECT {CANDIDATE_COLUMNS} FROM chunks AS c WHERE c.scope_id = ? AND c.path = ?"
        f" AND {BY_LINE} AND c.line_from < ? AND c.hidden = 0 ORDER BY c.line_from DESC LIMIT ?"
    )
    after = (
        f"SELECT {CANDIDATE_COLUMNS} FROM chunks AS c WHERE c.scope_id = ? AND c.path = ?"
        f" AND {BY_LINE} AND c.line_from > ? AND c.hidden = 0 ORDER BY c.line_from LIMIT ?"
    )
    for anchor, path, line in anchors:
        for sql in (before, after):
            rows = conn.execute(sql, (sid, path, line, reach)).fetchall()
            out.extend((anchor, distance, row) for distance, row in enumerate(rows, start=1))
    return out


def session_messages(
    conn: Connection, sid: int, session_id: str, first_id: int, count: int
) -> list[tuple[int, str]]:
    rows = conn.execute(
        "SELECT line_from, text FROM chunks WHERE scope_id = ? AND path = ? AND kind = 'message'"
        f" AND {BY_LINE} AND line_from >= ? ORDER BY line_from LIMIT ?",
        (sid, f"sessions/{session_id}", first_id, count),
    ).fetchall()
    return [(int(r[0]), str(r[1])) for r in rows]


def message_context(
    conn: Connection, sid: int, session_id: str, message_id: int, before: int, after: int
) -> list[tuple[int, str]]:
    path = f"sessions/{session_id}"
    rows = conn.execute(
        "SELECT line_from, text FROM (SELECT line_from, text FROM chunks WHERE scope_id = ?"
        f" AND path = ? AND kind = 'message' AND {BY_LINE} AND line_from < ?"
        " ORDER BY line_from DESC LIMIT ?) AS earlier UNION ALL SELECT line_from, text FROM"
        " (SELECT line_from, text FROM chunks WHERE scope_id = ? AND path = ?"
        f" AND kind = 'message' AND {BY_LINE} AND line_from >= ?"
        " ORDER BY line_from LIMIT ?) AS later ORDER BY line_from",
        (sid, path, message_id, before, sid, path, message_id, after + 1),
    ).fetchall()
    return [(int(r[0]), str(r[1])) for r in rows]


def file_stamps(conn: Connection, sid: int) -> dict[str, tuple[int, int, str]]:
    """(mtime_ns, size, hash) of every file the index holds for the scope."""
    rows = conn.execute(
        "SELECT path, mtime_ns, size, hash FROM files WHERE scope_id = ?", (sid,)
    ).fetchall()
    return {str(r[0]): (int(r[1]), int(r[2]), str(r[3])) for r in rows}


def file_stamp(conn: Connection, path: str) -> tuple[int, int] | None:
    row = conn.execute("SELECT mtime_ns, size FROM files WHERE path = ?", (path,)).fetchone()
    return (int(row[0]), int(row[1])) if row else None


def held_chunks(conn: Connection, sid: int, path: str) -> dict[str, tuple[str, str]] | None:
    """Ref → (text, created_at) of a long-term file's chunks, as a difference is computed
    from; None when they are not one chunk per entry (none should be: the file is then
    indexed whole)."""
    held: dict[str, tuple[str, str]] = {}
    for ref, text, created_at in conn.execute(
        "SELECT ref, text, created_at FROM chunks WHERE scope_id = ? AND path = ?", (sid, path)
    ).fetchall():
        if ref is None or str(ref) in held:
            return None
        held[str(ref)] = (str(text), str(created_at))
    return held
