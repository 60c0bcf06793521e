"""The index's schema and writes, as functions run on the database thread.

Each takes the sqlite3 connection inside the caller's transaction (`Database.write`), so a
write of several statements costs one round trip from the event loop, not one each.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain

import memory_core.recall.index.long_term_lines as long_term_lines
from memory_core.base.chunks import Chunk, ChunkKind
from memory_core.base.clock import format_when
from memory_core.base.sql import Connection
from memory_core.base.turn_dates import encode_days
from memory_core.recall.index.line_moves import Run
from memory_core.recall.index.model import PreparedFile, SyncStats
from memory_core.recall.index.postings import postings
from memory_core.recall.index.search import BY_LINE, held_chunks

UPSERT_FILE = (
    "INSERT INTO files (path, scope_id, mtime_ns, size, hash, kind) VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (path) DO UPDATE SET mtime_ns = excluded.mtime_ns, size = excluded.size,"
    " hash = excluded.hash"
)


Counted = tuple[int, int, list[tuple[str, int]]]
"""What rows added to one scope count: (rows, words, (term, documents) sorted by term,
each term of them once), as `counted` makes it from their tokens."""


def counted(token_texts: Iterable[str]) -> Counted:
    """The counts `Tally.apply` makes of rows added, made from their tokens in hand (a
    rebuild's group whose rows were all inserted: `rebuild.write_rows`), without reading
    the rows back."""
    texts = list(token_texts)
    words = sum(token_count(tokens) for tokens in texts)
    # Each text's distinct terms, counted in C (no Python step per term).
    df = Counter(chain.from_iterable(map(set, map(str.split, texts))))
    return len(texts), words, sorted(df.items())


def _upsert_df(raw: Connection, rows: Sequence[tuple[int, str, int]]) -> None:
    """(scope id, term, documents gained or lost) added to the scope's counts; in one
    order: two writers of a shared PostgreSQL lock the rows they upsert, and the same
    order for both means neither waits for the other in a circle."""
    raw.executemany(
        "INSERT INTO terms (scope_id, term, df) VALUES (?, ?, ?)"
        " ON CONFLICT (scope_id, term) DO UPDATE SET df = terms.df + excluded.df",
        rows,
    )


def _apply_df(raw: Connection, sid: int, deltas: Counter[str]) -> None:
    """Per-scope document frequencies moved by `deltas` (term -> documents gained or lost)."""
    changed = sorted(term for term, delta in deltas.items() if delta)
    if not changed:
        return
    _upsert_df(raw, [(sid, term, deltas[term]) for term in changed])
    if any(deltas[term] < 0 for term in changed):
        raw.execute("DELETE FROM terms WHERE scope_id = ? AND df <= 0", (sid,))


class Tally:
    """What a write transaction did to the chunk rows, applied to the counters (the
    scopes' counts, the terms' document frequencies) once, at its end.

    Counters follow the rows really inserted or deleted, so they stay exact whatever
    another writer did at once; and every transaction takes its locks in one order (the
    chunk rows first, then terms and scopes by id), so on a shared PostgreSQL no two
    writers wait for each other in a circle."""

    def __init__(self) -> None:
        self._added: dict[int, list[str]] = {}
        self._removed: dict[int, list[str]] = {}
        self._counted: dict[int, Counted] = {}

    def added(self, sid: int, tokens: Iterable[str]) -> None:
        self._added.setdefault(sid, []).extend(tokens)

    def removed(self, sid: int, tokens: Iterable[str]) -> None:
        self._removed.setdefault(sid, []).extend(tokens)

    def counted(self, sid: int, counts: Counted) -> None:
        """Rows added whose counts were made already from their tokens (`counted`); one
        call per scope."""
        self._counted[sid] = counts

    def apply(self, raw: Connection) -> None:
        sids = sorted(set(self._added) | set(self._removed) | set(self._counted))
        for sid in sids:
            counts = self._counted.get(sid)
            if counts is not None and sid not in self._added and sid not in self._removed:
                _upsert_df(raw, [(sid, term, df) for term, df in counts[2]])
                continue
            deltas: Counter[str] = Counter(dict(counts[2]) if counts is not None else {})
            for tokens in self._added.get(sid, ()):
                deltas.update(set(tokens.split()))
            for tokens in self._removed.get(sid, ()):
                deltas.subtract(set(tokens.split()))
            _apply_df(raw, sid, deltas)
        changes = []
        for sid in sids:
            plus, minus = self._added.get(sid, []), self._removed.get(sid, [])
            counts = self._counted.get(sid, (0, 0, []))
            rows = counts[0] + len(plus) - len(minus)
            words = (
                counts[1] + sum(token_count(t) for t in plus) - sum(token_count(t) for t in minus)
            )
            if rows or words:
                changes.append((rows, words, sid))
        if changes:
            raw.executemany(
                "UPDATE scopes SET chunk_count = chunk_count + ?, token_count = token_count + ?"
                " WHERE id = ?",
                changes,
            )
        self._added.clear()
        self._removed.clear()
        self._counted.clear()


INSERT_CHUNK = (
    "INSERT INTO chunks (id, scope_id, path, line_from, line_to, piece, kind, created_at, ref,"
    " text, tokens, dates) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT DO NOTHING"
)
"""One chunk per (scope, path, line, piece), and of a long-term file one per (entry, piece),
enforced by the schema (`chunks_one_per_line`, `chunks_one_per_entry`): a chunk another
writer stored first (two reindexes at once) is left as it is, not doubled."""


def pieces(line_froms: Iterable[int]) -> list[int]:
    """Each chunk's place among the chunks of its batch that start on the same line (a
    long paragraph cut in pieces): 0, 1, 2... in order, so the same file always gives
    the same (line, piece) keys."""
    seen: Counter[int] = Counter()
    numbered = []
    for line in line_froms:
        numbered.append(seen[line])
        seen[line] += 1
    return numbered


def insert_chunks(
    raw: Connection,
    sid: int,
    path: str,
    kind: ChunkKind,
    chunks: Sequence[tuple[Chunk, str]],
    tally: Tally | None = None,
) -> None:
    """Store chunks and register them with the scope's FTS table, document frequencies
    and counters (at once, or with the caller's `tally`). Ids are assigned here, inside
    the caller's write transaction."""
    if not chunks:
        return
    kept = postings(raw)
    ids = kept.new_ids(raw, len(chunks))
    numbers = pieces(chunk.line_from for chunk, _ in chunks)
    # A long-term chunk's lines live in `long_term_lines` (its own 0 here).
    placed = kind is ChunkKind.LONG_TERM
    rows = [
        (
            chunk_id,
            sid,
            path,
            0 if placed else chunk.line_from,
            0 if placed else chunk.line_to,
            piece,
            kind.value,
            format_when(chunk.created_at) if chunk.created_at else None,
            chunk.ref,
            chunk.text,
            tokens,
            dates_text(chunk),
        )
        for chunk_id, piece, (chunk, tokens) in zip(ids, numbers, chunks, strict=True)
    ]
    raw.executemany(INSERT_CHUNK, rows)
    added = stored(raw, ids)
    if placed:
        at = {i: (c.line_from, c.line_to) for i, (c, _) in zip(ids, chunks, strict=True)}
        long_term_lines.place(raw, [(i, sid, path, *at[i]) for i, _ in added])
    kept.added(raw, [(chunk_id, sid, tokens) for chunk_id, tokens in added])
    own = tally or Tally()
    own.added(sid, (tokens for _, tokens in added))
    if tally is None:
        own.apply(raw)


def dates_text(chunk: Chunk) -> str | None:
    """The `dates` column of a chunk: its resolved days encoded ('' for none), NULL when
    its kind is not resolved so."""
    return encode_days(chunk.dates) if chunk.dates is not None else None


def stored(raw: Connection, ids: Sequence[int]) -> list[tuple[int, str]]:
    """(id, tokens) of the new ids that are rows now: the rest met a chunk already there."""
    found: list[tuple[int, str]] = []
    for start in range(0, len(ids), 500):
        part = list(ids[start : start + 500])
        found += [
            (int(r[0]), str(r[1]))
            for r in raw.execute(
                f"SELECT id, tokens FROM chunks WHERE id IN ({','.join('?' * len(part))})", part
            )
        ]
    return found


def token_count(tokens: str) -> int:
    return tokens.count(" ") + 1 if tokens else 0


def delete_path(raw: Connection, sid: int, path: str, tally: Tally | None = None) -> int:
    rows = raw.execute(
        "SELECT id, tokens FROM chunks WHERE scope_id = ? AND path = ?", (sid, path)
    ).fetchall()
    return delete_rows(raw, sid, rows, tally)


def delete_rows(
    raw: Connection, sid: int, rows: Iterable[Sequence[object]], tally: Tally | None = None
) -> int:
    """Delete chunks by id; counters and postings follow the rows really deleted, so two
    writers deleting the same chunk at once (PostgreSQL) take it off the counts once.
    Returns how many this call deleted."""
    ids = [int(str(r[0])) for r in rows]
    gone: list[tuple[int, str]] = []
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        gone += [
            (int(r[0]), str(r[1]))
            for r in raw.execute(
                f"DELETE FROM chunks WHERE id IN ({','.join('?' * len(part))}) RETURNING id, tokens",
                part,
            ).fetchall()
        ]
    if not gone:
        return 0
    long_term_lines.forget(raw, [chunk_id for chunk_id, _ in gone])
    postings(raw).removed(raw, sid, gone)
    own = tally or Tally()
    own.removed(sid, (t for _, t in gone))
    if tally is None:
        own.apply(raw)
    return len(gone)


def replace_file(raw: Connection, sid: int, item: PreparedFile, stats: SyncStats) -> None:
    """A prepared file's chunks instead of the stored ones, and its row in `files` (the
    stamp the next sync compares)."""
    postings(raw).hold_files(raw, [item.path])
    tally = Tally()
    stats.chunks_removed += delete_path(raw, sid, item.path, tally)
    insert_chunks(raw, sid, item.path, item.kind, item.chunks, tally)
    tally.apply(raw)
    raw.execute(UPSERT_FILE, (item.path, sid, item.mtime_ns, item.size, item.hash, item.kind.value))
    stats.files_indexed += 1
    stats.chunks_added += len(item.chunks)


def replace_files(
    raw: Connection,
    sid: int,
    items: Sequence[PreparedFile],
    restamped: Sequence[PreparedFile],
    stats: SyncStats,
) -> None:
    """`replace_file` for a group of files in one transaction (a sync that finds many
    files changed: a workspace copied in, the index's first sight of 100 000 notes),
    and the rows of `restamped` files (same bytes, new stamp) moved to their stamps.
    Every file lock first, then the chunk rows, the counters, the file rows: the order
    every writer takes them in."""
    postings(raw).hold_files(raw, sorted(item.path for item in items))
    tally = Tally()
    for item in items:
        stats.chunks_removed += delete_path(raw, sid, item.path, tally)
        insert_chunks(raw, sid, item.path, item.kind, item.chunks, tally)
        stats.files_indexed += 1
        stats.chunks_added += len(item.chunks)
    tally.apply(raw)
    for item in sorted(items, key=lambda i: i.path):
        raw.execute(
            UPSERT_FILE, (item.path, sid, item.mtime_ns, item.size, item.hash, item.kind.value)
        )
    for item in sorted(restamped, key=lambda i: i.path):
        restamp_file(raw, item.path, item.mtime_ns, item.size, item.hash)


def add_appended_rows(
    raw: Connection,
    sid: int,
    path: str,
    kind: ChunkKind,
    prepared: Sequence[tuple[Chunk, str]],
    stamp: tuple[int, int] | None,
    previous: tuple[int, int] | None,
) -> bool:
    """The write of `SearchIndex.add_prepared`; true when the file must be read again.

    The appended chunks are only right beside the stored ones when the index holds the
    file exactly as it was before the append (`previous`). That is checked by the very
    statement that moves the file row to `stamp`, after the chunks are inserted: on a
    shared PostgreSQL a reset or another process's rewrite of the file may commit
    between a separate check and this transaction's end, and the row would then say
    "up to date" over chunks that miss lines of the file. Row lock and check in one
    statement, taken after the chunk rows (every writer's lock order), leave no gap."""
    insert_chunks(raw, sid, path, kind, prepared)
    if stamp is None:
        return False
    if previous is None:
        raw.execute(UPSERT_FILE, (path, sid, stamp[0], stamp[1], "", kind.value))
        return False
    if _restamp_appended(raw, sid, path, kind, stamp, previous):
        return False
    # Not the file as it was before the append: a sync that read the file after it
    # already holds the note (its row has `stamp`); anything else is read again.
    row = raw.execute("SELECT mtime_ns, size FROM files WHERE path = ?", (path,)).fetchone()
    return row is None or (int(row[0]), int(row[1])) != stamp


def _restamp_appended(
    raw: Connection,
    sid: int,
    path: str,
    kind: ChunkKind,
    stamp: tuple[int, int],
    previous: tuple[int, int],
) -> bool:
    """The file row moved from `previous` to `stamp` (its hash forgotten: the old one
    no longer describes the file, and a hand edit that removes the appended note must
    not look unchanged), in one statement; false when the row is not at `previous`."""
    if previous == (0, 0):
        # A file the append created: no row yet, unless someone indexed it since.
        done = raw.execute(
            "INSERT INTO files (path, scope_id, mtime_ns, size, hash, kind)"
            " VALUES (?, ?, ?, ?, '', ?) ON CONFLICT (path) DO NOTHING RETURNING path",
            (path, sid, stamp[0], stamp[1], kind.value),
        ).fetchone()
    else:
        done = raw.execute(
            "UPDATE files SET mtime_ns = ?, size = ?, hash = '' WHERE path = ?"
            " AND mtime_ns = ? AND size = ? RETURNING path",
            (stamp[0], stamp[1], path, previous[0], previous[1]),
        ).fetchone()
    return done is not None


def update_hidden(raw: Connection, sid: int) -> None:
    """A monthly summary hides that month's daily summaries from recall."""
    daily = [
        str(r[0])
        for r in raw.execute(
            "SELECT DISTINCT path FROM chunks WHERE scope_id = ? AND kind = 'summary'", (sid,)
        )
        if DAILY_SUMMARY.search(str(r[0]))
    ]
    months = sorted({monthly_of(path) for path in daily})
    present: set[str] = set()
    for start in range(0, len(months), 500):
        part = months[start : start + 500]
        present.update(
            str(r[0])
            for r in raw.execute(
                f"SELECT path FROM files WHERE scope_id = ? AND path IN ({','.join('?' * len(part))})",
                (sid, *part),
            )
        )
    hidden = [path for path in daily if monthly_of(path) in present]
    raw.execute("UPDATE chunks SET hidden = 0 WHERE scope_id = ? AND kind = 'summary'", (sid,))
    for start in range(0, len(hidden), 500):
        part = hidden[start : start + 500]
        raw.execute(
            "UPDATE chunks SET hidden = 1 WHERE scope_id = ? AND kind = 'summary'"
            f" AND path IN ({','.join('?' * len(part))})",
            (sid, *part),
        )


DAILY_SUMMARY = re.compile(r"/summary/\d{4}-\d{2}-\d{2}\.md$")
"""A day's summary of archived history; its month's summary replaces it in recall."""


def monthly_of(daily_path: str) -> str:
    """`…/summary/2026-03-01.md` → `…/summary/2026-03.md`."""
    return daily_path[: -len("-01.md")] + ".md"


def ensure_scope(conn: Connection, key: str) -> int:
    """The scope's id, its row and FTS table made on first use."""
    conn.execute("INSERT INTO scopes (key) VALUES (?) ON CONFLICT DO NOTHING", (key,))
    row = conn.execute("SELECT id FROM scopes WHERE key = ?", (key,)).fetchone()
    sid = int(row[0])
    postings(conn).scope_created(conn, sid)
    return sid


def restamp_file(conn: Connection, path: str, mtime_ns: int, size: int, digest: str) -> None:
    """A file whose content is unchanged (same hash) under a new stamp; only while the
    row still holds that hash (another process may have indexed an older read since)."""
    conn.execute(
        "UPDATE files SET mtime_ns = ?, size = ? WHERE path = ? AND hash = ?",
        (mtime_ns, size, path, digest),
    )


def remove_file(conn: Connection, sid: int, path: str) -> int:
    """A file gone from disk: its chunks and its row; returns the chunks removed."""
    removed = delete_path(conn, sid, path)
    conn.execute("DELETE FROM files WHERE path = ?", (path,))
    return removed


def remove_messages(conn: Connection, sid: int, message_ids: Sequence[int]) -> None:
    """Message chunks of history trimmed after archiving."""
    rows: list[Sequence[object]] = []
    for start in range(0, len(message_ids), 500):
        part = list(message_ids[start : start + 500])
        rows += conn.execute(
            f"SELECT id, tokens FROM chunks WHERE scope_id = ? AND kind = 'message'"
            f" AND {BY_LINE} AND line_from IN ({','.join('?' * len(part))})",
            (sid, *part),
        ).fetchall()
    delete_rows(conn, sid, rows)


class StaleDifference(Exception):
    """The chunks of a file changed between the read a difference was computed from and
    the transaction that would apply it (another process indexed the file meanwhile):
    the difference no longer applies, and the file is indexed whole instead."""


def apply_long_term(
    conn: Connection,
    sid: int,
    path: str,
    stale: Sequence[str],
    fresh: Sequence[tuple[Chunk, str]],
    lines: dict[str, tuple[int, int]],
    stamp: tuple[int, int],
    digest: str = "",
    *,
    held: Mapping[str, tuple[str, str]] | None = None,
    held_stamp: tuple[int, int] | None = None,
    runs: Sequence[Run] | None = None,
) -> None:
    """One long-term write by difference: chunks of removed and edited entries out, of
    added and edited ones in, every other entry moved to its new lines, the file row
    stamped (with the hash of the bytes it now describes, when the caller read them: a
    write knows its own, `''` forgets the old one).

    The difference was computed from a read made before this transaction: `held` (ref →
    (text, created_at) of the file's chunks) or `held_stamp` (the file row's stamp) is
    what that read saw, checked again once the file is held; if another writer changed
    it meanwhile, `StaleDifference` (nothing written). `runs` move the chunks
    that stay, when the caller knows them (from the version a write replaced:
    `line_moves.segment_runs`, `shift_runs`); otherwise the chunks' lines are read."""
    postings(conn).hold_files(conn, [path])
    if held is not None and held_chunks(conn, sid, path) != held:
        raise StaleDifference(path)
    if held_stamp is not None:
        row = conn.execute("SELECT mtime_ns, size FROM files WHERE path = ?", (path,)).fetchone()
        if row is None or (int(row[0]), int(row[1])) != held_stamp:
            raise StaleDifference(path)
    tally = Tally()
    for start in range(0, len(stale), 500):
        part = list(stale[start : start + 500])
        # The file's chunks are all long-term ones: said so, the rows are found through
        # `chunks_one_per_entry` by ref, not by a pass over the file's 100 000.
        old = conn.execute(
            f"SELECT id, tokens FROM chunks WHERE scope_id = ? AND path = ?"
            f" AND kind = 'long_term' AND ref IN ({','.join('?' * len(part))})",
            (sid, path, *part),
        ).fetchall()
        delete_rows(conn, sid, old, tally)
    long_term_lines.move_kept(conn, sid, path, runs, lines)
    insert_chunks(conn, sid, path, ChunkKind.LONG_TERM, fresh, tally)
    tally.apply(conn)
    conn.execute(UPSERT_FILE, (path, sid, *stamp, digest, ChunkKind.LONG_TERM.value))
