"""The SQLite search index: chunks of every memory file and message, BM25 per scope.

Each scope has its own FTS5 table (`fts_<scope id>`) over pre-tokenized text, so a query
costs what its scope holds, not what the workspace holds, and no query can reach another
scope's postings. The `chunks` table is the FTS tables' external content and the one place
chunk text lives. Files are the source of truth: `sync_scope` brings the index in line with
them at one stat per unchanged file, and `rebuild` recreates everything from files.

FTS5's `bm25()` is BM25 with k1 = 1.2 and b = 0.75, the parameters recall asks for.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import math
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from functools import partial
from pathlib import Path

import aiosqlite

from memory_core.chunking import Chunk, ChunkKind, chunk_file, classify, summary_period
from memory_core.clock import format_when, parse_when
from memory_core.db import Database, on_db_thread
from memory_core.scope import ScopeKey
from memory_core.store import WriteRecord
from memory_core.text import tokenize
from memory_core.workspace import Workspace

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class Appended:
    """Tokenized chunks just appended to a file, with the file's stamps around the
    append (see `SearchIndex.add_prepared`)."""

    prepared: list[tuple[Chunk, str]]
    stamp: tuple[int, int]
    previous: tuple[int, int]


@dataclass(frozen=True, slots=True)
class Hit:
    path: str
    line_from: int
    line_to: int
    score: float
    text: str
    kind: ChunkKind
    created_at: datetime | None
    ref: str | None = None

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line_from}"


@dataclass(slots=True)
class SyncStats:
    files_seen: int = 0
    files_indexed: int = 0
    files_removed: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0

    def add(self, other: SyncStats) -> None:
        self.files_seen += other.files_seen
        self.files_indexed += other.files_indexed
        self.files_removed += other.files_removed
        self.chunks_added += other.chunks_added
        self.chunks_removed += other.chunks_removed


@dataclass(frozen=True, slots=True)
class PreparedFile:
    """A file read, chunked and tokenized off the event loop, ready to write."""

    path: str
    mtime_ns: int
    size: int
    hash: str
    kind: ChunkKind
    chunks: list[tuple[Chunk, str]]


K1 = 1.2
B = 0.75
CANDIDATE_FACTOR = 5
MIN_CANDIDATES = 50
REBUILD_GROUP = 64
"""Files read, tokenized and written together during a rebuild."""
RANK_BUDGET = 2000
"""Postings FTS5 may rank for one explicit search before only the rarest terms pick
candidates. FTS5 ranks ~0.4 M postings/s here, so this bounds a query's ranking at a few
ms. Measured over the bench's 100 000-chunk scope (bench/recall_bench.py, same machine):
budget 3 000: query p50 5.1 ms, recall@5 of the source sentence 71.5%; 2 000: 3.0 ms,
67.0%; 1 500: 2.8 ms, 65.0%. Automatic recall in a chat turn uses `recall.rank_budget`
(1 500): it runs on every turn."""


@dataclass(frozen=True, slots=True)
class CorpusStats:
    docs: int
    avg_len: float
    doc_freq: dict[str, int]


def idf(docs: int, containing: int) -> float:
    """BM25 idf in the form that stays positive: log(1 + (N - n + 0.5) / (n + 0.5)).

    FTS5's own bm25() clamps the classic form to 1e-6 once a term is in half the
    documents, which in a scope of one or two memories means nothing ever scores.
    """
    return math.log(1.0 + (docs - containing + 0.5) / (containing + 0.5))


def bm25_score(query_terms: Sequence[str], doc_terms: Sequence[str], stats: CorpusStats) -> float:
    """BM25 (k1 = 1.2, b = 0.75) of one document for a bag of query terms."""
    if not doc_terms:
        return 0.0
    counts: dict[str, int] = {}
    for term in doc_terms:
        counts[term] = counts.get(term, 0) + 1
    norm = K1 * (1.0 - B + B * len(doc_terms) / stats.avg_len)
    score = 0.0
    for term in dict.fromkeys(query_terms):
        tf = counts.get(term)
        if tf:
            n = stats.doc_freq.get(term, 1)
            score += idf(stats.docs, n) * tf * (K1 + 1.0) / (tf + norm)
    return score


def bm25_scorer(query_terms: Sequence[str], stats: CorpusStats) -> Callable[[str], float]:
    """`bm25_score` for many documents of one query, taking a stored `tokens` string:
    each term's idf is computed once per query instead of once per document, and term
    frequencies are counted for the query's terms only. The arithmetic is the same, in
    the same order, so the scores are identical."""
    weights = [(t, idf(stats.docs, stats.doc_freq.get(t, 1))) for t in dict.fromkeys(query_terms)]
    avg_len = stats.avg_len

    def score(tokens: str) -> float:
        doc = tokens.split()
        if not doc:
            return 0.0
        norm = K1 * (1.0 - B + B * len(doc) / avg_len)
        total = 0.0
        for term, weight in weights:
            tf = doc.count(term)
            if tf:
                total += weight * tf * (K1 + 1.0) / (tf + norm)
        return total

    return score


def candidate_terms(
    terms: Sequence[str], stats: CorpusStats, budget: int = RANK_BUDGET
) -> list[str]:
    """Terms that choose candidates: all of them when their postings fit the budget,
    else the rarest ones that fit (at least one). Terms absent from the scope drop out."""
    present = sorted((t for t in terms if stats.doc_freq.get(t)), key=lambda t: stats.doc_freq[t])
    chosen: list[str] = []
    postings = 0
    for term in present:
        postings += stats.doc_freq[term]
        if chosen and postings > budget:
            break
        chosen.append(term)
    return chosen


def fts_query(terms: Iterable[str]) -> str:
    """An FTS5 MATCH string that can only mean 'any of these terms'.

    Terms are alphanumeric by construction; quoting each one still makes FTS5 operators
    (NEAR, OR, AND, NOT, *, ^, -, :) inert even if that ever changed.
    """
    unique = dict.fromkeys(t for t in terms if t)
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in unique)


def scope_files(workspace: Workspace, scope: ScopeKey) -> list[Path]:
    """Every file of the scope that the index covers (blocking: directory listing)."""
    out: list[Path] = []
    long_term = workspace.long_term_path(scope)
    if long_term.is_file():
        out.append(long_term)
    directory = workspace.memory_dir(scope)
    for sub in (directory, directory / "summary"):
        if not sub.is_dir():
            continue
        for entry in os.scandir(sub):
            if entry.is_file(follow_symlinks=False) and entry.name.endswith(".md"):
                path = Path(entry.path)
                # A scope's LONG_TERM.md sits in its own directory: list it once.
                if path != long_term:
                    out.append(path)
    return out


def prepare_file(workspace: Workspace, path: Path, zone: tzinfo = UTC) -> PreparedFile | None:
    """Read + chunk + tokenize one file (blocking, CPU): run it in a worker thread."""
    relative = workspace.relative(path)
    classified = classify(relative)
    if classified is None:
        return None
    try:
        st = path.stat()
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    text = data.decode("utf-8", errors="replace")
    chunks = chunk_file(relative, text, zone)
    return PreparedFile(
        path=relative,
        mtime_ns=st.st_mtime_ns,
        # The size of what was read: a note appended between the stat and the read then
        # leaves a (time, size) pair no later stat matches, so nothing trusts it.
        size=len(data),
        hash=hashlib.blake2b(data, digest_size=16).hexdigest(),
        kind=classified[0],
        chunks=[(c, " ".join(tokenize(c.text))) for c in chunks],
    )


class SearchIndex:
    def __init__(
        self,
        db: Database,
        workspace: Workspace,
        sync_min_interval: float = 2.0,
        zone: tzinfo = UTC,
    ) -> None:
        self._zone = zone
        self._db = db
        self._conn = db.conn
        self._ws = workspace
        self._scope_ids: dict[str, int] = {}
        self._scope_locks: dict[str, asyncio.Lock] = {}
        self._last_sync: dict[str, float] = {}
        self._sync_min_interval = sync_min_interval

    # --- scopes and their FTS tables ------------------------------------------------
    async def scope_id(self, scope: ScopeKey, *, create: bool = True) -> int | None:
        cached = self._scope_ids.get(scope.value)
        if cached is not None:
            return cached
        async with self._conn.execute("SELECT id FROM scopes WHERE key = ?", (scope.value,)) as cur:
            row = await cur.fetchone()
        if row is None:
            if not create:
                return None
            async with self._db.transaction() as conn:
                await conn.execute("INSERT OR IGNORE INTO scopes (key) VALUES (?)", (scope.value,))
                async with conn.execute(
                    "SELECT id FROM scopes WHERE key = ?", (scope.value,)
                ) as cur:
                    row = await cur.fetchone()
                assert row is not None
                for statement in _create_fts(int(row[0])):
                    await conn.execute(statement)
        self._scope_ids[scope.value] = int(row[0])
        return int(row[0])

    def _lock(self, scope: ScopeKey) -> asyncio.Lock:
        return self._scope_locks.setdefault(scope.value, asyncio.Lock())

    # --- syncing files --------------------------------------------------------------
    async def sync_scope(self, scope: ScopeKey, *, force: bool = False) -> SyncStats:
        """Bring the scope's chunks in line with its files (one stat per unchanged file)."""
        async with self._lock(scope):
            stats = await self._sync_scope_locked(scope, force)
            self._last_sync[scope.value] = time.monotonic()
            return stats

    async def sync_if_stale(self, scope: ScopeKey) -> None:
        """Before a search: pick up hand edits, at most once per min interval."""
        last = self._last_sync.get(scope.value)
        if last is None or time.monotonic() - last >= self._sync_min_interval:
            await self.sync_scope(scope)

    async def _sync_scope_locked(self, scope: ScopeKey, force: bool) -> SyncStats:
        sid = await self.scope_id(scope)
        assert sid is not None
        stats = SyncStats()
        async with self._conn.execute(
            "SELECT path, mtime_ns, size, hash FROM files WHERE scope_id = ?", (sid,)
        ) as cur:
            known = {r[0]: (r[1], r[2], r[3]) for r in await cur.fetchall()}
        current = await asyncio.to_thread(_stat_files, self._ws, scope)
        stats.files_seen = len(current)
        changed = [
            path
            for path, (rel, mtime, size) in current.items()
            if force or known.get(rel, (None, None, None))[:2] != (mtime, size)
        ]
        if changed:
            prepared = await asyncio.to_thread(
                lambda: [
                    p for p in (prepare_file(self._ws, path, self._zone) for path in changed) if p
                ]
            )
            for item in prepared:
                if not force and known.get(item.path, (0, 0, ""))[2] == item.hash:
                    async with self._db.transaction() as conn:
                        await conn.execute(
                            "UPDATE files SET mtime_ns = ?, size = ? WHERE path = ?",
                            (item.mtime_ns, item.size, item.path),
                        )
                    continue
                await self._write_file(sid, item, stats)
        present = {rel for rel, _, _ in current.values()}
        for gone in sorted(set(known) - present):
            async with self._db.transaction() as conn:
                stats.chunks_removed += await _delete_path(conn, sid, gone)
                await conn.execute("DELETE FROM files WHERE path = ?", (gone,))
            stats.files_removed += 1
        if changed or stats.files_removed:
            await self._update_hidden(sid)
        return stats

    async def sync_file(self, scope: ScopeKey, relative_path: str) -> None:
        """Re-index one file the core just wrote (no directory scan)."""
        async with self._lock(scope):
            sid = await self.scope_id(scope)
            assert sid is not None
            path = self._ws.root / relative_path
            item = await asyncio.to_thread(prepare_file, self._ws, path, self._zone)
            stats = SyncStats()
            if item is None:
                async with self._db.transaction() as conn:
                    await _delete_path(conn, sid, relative_path)
                    await conn.execute("DELETE FROM files WHERE path = ?", (relative_path,))
            else:
                await self._write_file(sid, item, stats)
            if summary_period(relative_path):
                await self._update_hidden(sid)

    async def add_chunks(
        self,
        scope: ScopeKey,
        relative_path: str,
        kind: ChunkKind,
        chunks: Sequence[Chunk],
        *,
        file_backed: bool = True,
        previous: tuple[int, int] | None = None,
    ) -> None:
        """Index new chunks of a file something appended to, or of a non-file source
        when `file_backed` is false: tokenizes them and takes the file's stat in one
        worker-thread call, then `add_prepared`."""
        path = self._ws.root / relative_path if file_backed else None
        prepared, stamp = await asyncio.to_thread(_tokenize_and_stat, chunks, path)
        await self.add_prepared(
            scope, relative_path, kind, prepared, stamp=stamp, previous=previous
        )

    async def add_prepared(
        self,
        scope: ScopeKey,
        relative_path: str,
        kind: ChunkKind,
        prepared: Sequence[tuple[Chunk, str]],
        *,
        stamp: tuple[int, int] | None,
        previous: tuple[int, int] | None = None,
    ) -> None:
        """Index tokenized chunks appended to a file (a daily note) in one transaction
        and one round trip to the database thread.

        `stamp` is the file's (mtime_ns, size) right after the append, None for a
        non-file source; the file row takes it, so the next sync does not re-chunk the
        file. `previous` is the file's stamp before the append, (0, 0) if it did not
        exist: the chunks are only added when the index holds the file exactly as it was
        then. Otherwise the index does not hold what precedes them (a hand edit it has not
        synced) or already holds them (a sync that read the file after the append), and
        the whole file is read again instead. If this write fails, the file row keeps the
        old stamp, so the next sync reads the file again and the note is not lost.
        """
        async with self._lock(scope):
            sid = await self.scope_id(scope)
            assert sid is not None
            reread = await self._db.run(
                lambda raw: _add_raw(raw, sid, relative_path, kind, prepared, stamp, previous)
            )
            if reread:
                await self._reread(sid, relative_path)

    async def add_appended(
        self,
        scope: ScopeKey,
        relative_path: str,
        kind: ChunkKind,
        append: Callable[[], Appended | None],
    ) -> Appended | None:
        """`add_prepared` for a note that `append` writes to its file on the database
        thread, right before the index write and in the same round trip: one hop from the
        event loop for the whole note. `append` returns None when it cannot write now (the
        file is locked by another process); nothing is indexed then and None comes back.

        The file is written before the transaction's statements run, so if they fail the
        note stays in the file (the exception says so) and the next sync indexes it.
        """
        async with self._lock(scope):
            sid = await self.scope_id(scope)
            assert sid is not None

            def work(raw: sqlite3.Connection) -> tuple[Appended | None, bool]:
                done = append()
                if done is None:
                    return None, False
                reread = _add_raw(
                    raw, sid, relative_path, kind, done.prepared, done.stamp, done.previous
                )
                return done, reread

            done, reread = await self._db.run(work)
            if reread:
                await self._reread(sid, relative_path)
            return done

    async def _reread(self, sid: int, relative_path: str) -> None:
        path = self._ws.root / relative_path
        item = await asyncio.to_thread(prepare_file, self._ws, path, self._zone)
        if item is not None:
            await self._write_file(sid, item, SyncStats())

    async def update_long_term(
        self, scope: ScopeKey, relative_path: str, record: WriteRecord
    ) -> None:
        """Apply one write of the scope's long-term file by difference: added, edited and
        removed entries are (re)tokenized, the others only get their new line numbers.

        Only when the index holds exactly the version that was replaced; otherwise (a hand
        edit not yet synced, a first write) the file is simply indexed again.
        """
        before = {e.id: e for e in record.before}
        after = {e.id: e for e in record.after.entries}
        stale = [i for i, e in before.items() if i not in after or after[i].content != e.content]
        fresh = [e for i, e in after.items() if i not in before or before[i].content != e.content]
        prepared = await asyncio.to_thread(
            _tokenize_chunks,
            [
                Chunk(*record.after.lines.get(e.id, (0, 0)), e.content, e.created_at, ref=e.id)
                for e in fresh
            ],
        )
        async with self._lock(scope):
            sid = await self.scope_id(scope)
            assert sid is not None
            rows = await self._conn.execute_fetchall(
                "SELECT mtime_ns, size FROM files WHERE path = ?", (relative_path,)
            )
            known = next(iter(rows), None)
            in_step = (
                record.before_stamp is not None
                and known is not None
                and (int(known[0]), int(known[1])) == record.before_stamp[:2]
            )
            if not in_step or record.after_stamp is None:
                item = await asyncio.to_thread(
                    prepare_file, self._ws, self._ws.root / relative_path, self._zone
                )
                if item is not None:
                    await self._write_file(sid, item, SyncStats())
                return
            async with self._db.transaction() as conn:
                for start in range(0, len(stale), 500):
                    part = stale[start : start + 500]
                    old = await conn.execute_fetchall(
                        f"SELECT id, tokens FROM chunks WHERE scope_id = ? AND path = ?"
                        f" AND ref IN ({','.join('?' * len(part))})",
                        (sid, relative_path, *part),
                    )
                    await _delete_rows(conn, sid, list(old))
                await _insert_chunks(conn, sid, relative_path, ChunkKind.LONG_TERM, prepared)
                # Entries shift when others are added or re-sorted: keep every line true.
                placed = await conn.execute_fetchall(
                    "SELECT id, ref, line_from, line_to FROM chunks WHERE scope_id = ?"
                    " AND path = ?",
                    (sid, relative_path),
                )
                moves = [
                    (*record.after.lines[str(ref)], chunk_id)
                    for chunk_id, ref, line_from, line_to in placed
                    if str(ref) in record.after.lines
                    and record.after.lines[str(ref)] != (line_from, line_to)
                ]
                if moves:
                    await conn.executemany(
                        "UPDATE chunks SET line_from = ?, line_to = ? WHERE id = ?", moves
                    )
                await conn.execute(
                    "UPDATE files SET mtime_ns = ?, size = ?, hash = '' WHERE path = ?",
                    (record.after_stamp[0], record.after_stamp[1], relative_path),
                )

    async def add_message(
        self,
        scope: ScopeKey,
        session_id: str,
        message_id: int,
        speaker: str,
        text: str,
        created_at: datetime,
    ) -> None:
        """Index a stored session message as a `message` chunk of `sessions/<session>`."""
        chunk = Chunk(message_id, message_id, f"{speaker}: {text}", created_at, ref=str(message_id))
        tokens = " ".join(tokenize(text))
        async with self._lock(scope):
            sid = await self.scope_id(scope)
            assert sid is not None
            async with self._db.transaction() as conn:
                await _insert_chunks(
                    conn, sid, f"sessions/{session_id}", ChunkKind.MESSAGE, [(chunk, tokens)]
                )

    def add_message_in(
        self,
        sid: int,
        session_id: str,
        speaker: str,
        text: str,
        created_at: datetime,
    ) -> Callable[[sqlite3.Connection, int], None]:
        """`add_message` as a step of the caller's write transaction, run on the database
        thread (`Database.run`) with the new message's id: a chat turn stores a
        message and its chunk in one commit and one round trip.

        What it writes is what `add_message` writes (`_insert_chunks` + `_register` for one
        row; the chunk's id is MAX(id) + 1 either way). The text is tokenized here, before.
        """
        tokens = " ".join(tokenize(text))
        terms = set(tokens.split())

        def write(conn: sqlite3.Connection, message_id: int) -> None:
            cursor = conn.execute(
                "INSERT INTO chunks (scope_id, path, line_from, line_to, kind, created_at,"
                " ref, text, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sid,
                    f"sessions/{session_id}",
                    message_id,
                    message_id,
                    ChunkKind.MESSAGE.value,
                    format_when(created_at),
                    str(message_id),
                    f"{speaker}: {text}",
                    tokens,
                ),
            )
            conn.execute(
                f"INSERT INTO fts_{sid} (rowid, tokens) VALUES (?, ?)", (cursor.lastrowid, tokens)
            )
            if terms:
                conn.executemany(
                    "INSERT INTO terms (scope_id, term, df) VALUES (?, ?, ?)"
                    " ON CONFLICT (scope_id, term) DO UPDATE SET df = df + excluded.df",
                    [(sid, term, 1) for term in terms],
                )
            conn.execute(
                "UPDATE scopes SET chunk_count = chunk_count + ?, token_count = token_count + ?"
                " WHERE id = ?",
                (1, _token_count(tokens), sid),
            )

        return write

    async def remove_messages(self, scope: ScopeKey, message_ids: Sequence[int]) -> None:
        """Drop message chunks (history trimmed after archiving) from the scope's index."""
        sid = await self.scope_id(scope, create=False)
        if sid is None or not message_ids:
            return
        async with self._lock(scope), self._db.transaction() as conn:
            rows: list[Sequence[object]] = []
            for start in range(0, len(message_ids), 500):
                part = list(message_ids[start : start + 500])
                placeholders = ",".join("?" * len(part))
                async with conn.execute(
                    f"SELECT id, tokens FROM chunks WHERE scope_id = ? AND kind = 'message'"
                    f" AND line_from IN ({placeholders})",
                    (sid, *part),
                ) as cur:
                    rows.extend(await cur.fetchall())
            await _delete_rows(conn, sid, rows)

    async def _write_file(self, sid: int, item: PreparedFile, stats: SyncStats) -> None:
        await self._db.run(lambda raw: _replace_file_raw(raw, sid, item, stats))

    async def _update_hidden(self, sid: int) -> None:
        """A monthly summary hides that month's daily summaries from recall."""
        await self._db.run(lambda raw: _update_hidden_raw(raw, sid))

    # --- whole workspace ------------------------------------------------------------
    async def sync_all(self, progress: Progress | None = None) -> SyncStats:
        total = SyncStats()
        scopes = await asyncio.to_thread(self._ws.scopes)
        for number, scope in enumerate(scopes, start=1):
            total.add(await self.sync_scope(scope))
            if progress:
                progress(number, len(scopes))
        return total

    async def rebuild(self, progress: Progress | None = None) -> SyncStats:
        """Drop every file-derived chunk and index all files again (messages are kept).

        Files are read, chunked and tokenized in worker processes (tokenizing holds the
        GIL), in groups of `REBUILD_GROUP`, into the plain row tuples the database takes.
        While they work, this process empties the index and then writes each group in
        one transaction and one round trip to the database thread, where `executemany`
        binds chunk and FTS rows in C. Counters are kept per group; document frequencies
        are copied from FTS5's own vocabulary once a scope's last group is written, while
        the workers go on with the next scope.
        """
        scopes, listed = await asyncio.to_thread(_list_workspace, self._ws)
        sids: dict[str, int] = {}
        for scope in scopes:
            sid = await self.scope_id(scope)
            assert sid is not None
            sids[scope.value] = sid
        paths = [(sids[scope.value], path) for scope, path in listed]
        total = SyncStats(files_seen=len(paths))
        groups = [paths[i : i + REBUILD_GROUP] for i in range(0, len(paths), REBUILD_GROUP)]
        groups_left = Counter(sid for group in groups for sid in {sid for sid, _ in group})
        loop = asyncio.get_running_loop()
        workers = min(os.cpu_count() or 1, 4) if len(groups) > 2 else 0
        pool = ProcessPoolExecutor(max_workers=workers) if workers else None
        ahead = max(workers, 1) + 1
        pending: list[asyncio.Future[PreparedRows]] = []

        def submit(index: int) -> None:
            if index >= len(groups):
                return
            if pool is not None:
                pending.append(
                    loop.run_in_executor(pool, _prepare_rows, self._ws, groups[index], self._zone)
                )
            else:
                pending.append(
                    asyncio.ensure_future(
                        asyncio.to_thread(_prepare_rows, self._ws, groups[index], self._zone)
                    )
                )

        finished: set[int] = set()
        done = 0
        try:
            for index in range(ahead):
                submit(index)
            # The workers read and tokenize the first groups meanwhile.
            kept = await self._db.run(_reset_raw)
            for number, group in enumerate(groups):
                rows = await pending.pop(0)
                submit(number + ahead)
                await self._db.run(partial(_write_rows_raw, rows=rows))
                total.files_indexed += len(rows[0])
                total.chunks_added += len(rows[1])
                for sid in {sid for sid, _ in group}:
                    groups_left[sid] -= 1
                    if not groups_left[sid]:
                        await self._db.run(partial(_finish_scope_raw, sid=sid))
                        finished.add(sid)
                done += len(group)
                if progress:
                    progress(done, len(paths))
        finally:
            for future in pending:
                future.cancel()
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        for sid in sorted((set(sids.values()) | set(kept)) - finished):
            await self._db.run(partial(_finish_scope_raw, sid=sid))
        now = time.monotonic()
        for scope in scopes:
            self._last_sync[scope.value] = now
        return total

    # --- search ---------------------------------------------------------------------
    async def search(
        self,
        scope: ScopeKey,
        query: str | Sequence[str],
        *,
        limit: int = 10,
        kinds: Iterable[ChunkKind] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        min_score: float = 0.0,
        rank_budget: int = RANK_BUDGET,
    ) -> list[Hit]:
        """BM25 hits of one scope, best first; `query` is text or pre-made terms.

        The scope is the FTS table itself (and `c.scope_id` again in the join), so no
        other scope's chunk can be a candidate. FTS5 picks candidates, then every
        candidate is scored with all query terms by `bm25_score`. When the terms' postings
        exceed `rank_budget`, the rarest terms alone pick the candidates: ranking every
        posting of a term found in thousands of chunks costs milliseconds and rarely
        changes the top hits.
        """
        terms = list(
            dict.fromkeys(
                tokenize(query)
                if isinstance(query, str)
                else [t for q in query for t in tokenize(q)]
            )
        )
        if not terms or limit <= 0:
            return []
        sid = await self.scope_id(scope, create=False)
        if sid is None:
            return []
        filters = ["c.scope_id = ?", "c.hidden = 0"]
        filter_params: list[object] = [sid]
        if kinds is not None:
            kind_list = [ChunkKind(k).value for k in kinds]
            filters.append(f"c.kind IN ({','.join('?' * len(kind_list))})")
            filter_params.extend(kind_list)
        if since is not None:
            filters.append("c.created_at >= ?")
            filter_params.append(format_when(since))
        if until is not None:
            filters.append("c.created_at < ?")
            filter_params.append(format_when(until))
        wanted = max(limit * CANDIDATE_FACTOR, MIN_CANDIDATES)
        columns = "c.path, c.line_from, c.line_to, c.tokens, c.text, c.kind, c.created_at, c.ref"

        def fetch(conn: sqlite3.Connection) -> tuple[CorpusStats, list[sqlite3.Row]]:
            """Statistics, then candidates: one call on the database thread, not two."""
            stats = _corpus_stats_blocking(conn, sid, set(terms))
            chosen = candidate_terms(terms, stats, rank_budget)
            if not chosen:
                return stats, []
            if len(filters) == 2:
                # No filter beyond scope: let FTS5 take its top-N before the join.
                sql = (
                    f"SELECT {columns} FROM (SELECT rowid, rank FROM fts_{sid} WHERE fts_{sid}"
                    f" MATCH ? ORDER BY rank LIMIT ?) AS f JOIN chunks AS c ON c.id = f.rowid"
                    f" WHERE {' AND '.join(filters)} ORDER BY f.rank"
                )
                params: list[object] = [fts_query(chosen), wanted, *filter_params]
            else:
                sql = (
                    f"SELECT {columns} FROM fts_{sid} AS f JOIN chunks AS c ON c.id = f.rowid"
                    f" WHERE fts_{sid} MATCH ? AND {' AND '.join(filters)}"
                    " ORDER BY f.rank LIMIT ?"
                )
                params = [fts_query(chosen), *filter_params, wanted]
            return stats, conn.execute(sql, params).fetchall()

        stats, rows = await on_db_thread(self._conn, fetch)
        if not rows:
            return []
        score_of = bm25_scorer(terms, stats)
        scored = []
        for r in rows:
            score = score_of(str(r[3]))
            if score >= min_score:
                scored.append((score, r))
        scored.sort(key=lambda pair: -pair[0])
        return [
            Hit(
                path=r[0],
                line_from=r[1],
                line_to=r[2],
                score=score,
                text=r[4],
                kind=ChunkKind(r[5]),
                created_at=parse_when(r[6]) if r[6] else None,
                ref=r[7],
            )
            for score, r in scored[:limit]
        ]

    async def _corpus_stats(self, sid: int, terms: set[str]) -> CorpusStats:
        """N, average length and document frequencies in one round trip."""
        return await on_db_thread(self._conn, lambda conn: _corpus_stats_blocking(conn, sid, terms))

    async def session_messages(
        self, scope: ScopeKey, session_id: str, first_id: int, count: int
    ) -> list[tuple[int, str]]:
        """(message id, 'speaker: text') of one session of this scope, from `first_id` on."""
        sid = await self.scope_id(scope, create=False)
        if sid is None:
            return []
        async with self._conn.execute(
            "SELECT line_from, text FROM chunks WHERE scope_id = ? AND path = ? AND kind = ?"
            " AND line_from >= ? ORDER BY line_from LIMIT ?",
            (sid, f"sessions/{session_id}", ChunkKind.MESSAGE.value, first_id, count),
        ) as cur:
            return [(int(r[0]), str(r[1])) for r in await cur.fetchall()]

    async def message_context(
        self, scope: ScopeKey, session_id: str, message_id: int, before: int = 1, after: int = 2
    ) -> list[tuple[int, str]]:
        """The message and its neighbours in the session, oldest first."""
        sid = await self.scope_id(scope, create=False)
        if sid is None:
            return []
        path = f"sessions/{session_id}"
        rows = await self._conn.execute_fetchall(
            "SELECT line_from, text FROM (SELECT line_from, text FROM chunks WHERE scope_id = ?1"
            " AND path = ?2 AND kind = 'message' AND line_from < ?3 ORDER BY line_from DESC"
            " LIMIT ?4) UNION ALL SELECT line_from, text FROM (SELECT line_from, text FROM chunks"
            " WHERE scope_id = ?1 AND path = ?2 AND kind = 'message' AND line_from >= ?3"
            " ORDER BY line_from LIMIT ?5) ORDER BY line_from",
            (sid, path, message_id, before, after + 1),
        )
        return [(int(r[0]), str(r[1])) for r in rows]

    async def counts(self, scope: ScopeKey) -> dict[str, int]:
        sid = await self.scope_id(scope, create=False)
        if sid is None:
            return {}
        async with self._conn.execute(
            "SELECT kind, COUNT(*) FROM chunks WHERE scope_id = ? GROUP BY kind", (sid,)
        ) as cur:
            return {r[0]: r[1] for r in await cur.fetchall()}


def _corpus_stats_blocking(conn: sqlite3.Connection, sid: int, terms: set[str]) -> CorpusStats:
    """N, average length and document frequencies of a scope (on the database thread)."""
    placeholders = ",".join("?" * len(terms))
    rows = conn.execute(
        "SELECT NULL, chunk_count, token_count FROM scopes WHERE id = ?1 UNION ALL"
        f" SELECT term, df, 0 FROM terms WHERE scope_id = ?1 AND term IN ({placeholders})",
        (sid, *terms),
    ).fetchall()
    docs = tokens = 0
    freq: dict[str, int] = {}
    for term, count, total in rows:
        if term is None:
            docs, tokens = int(count), int(total)
        else:
            freq[str(term)] = int(count)
    return CorpusStats(docs=max(docs, 1), avg_len=tokens / docs if docs else 1.0, doc_freq=freq)


def _create_fts(sid: int) -> list[str]:
    return [
        f"CREATE VIRTUAL TABLE IF NOT EXISTS fts_{sid} USING fts5(tokens, content='chunks',"
        " content_rowid='id', tokenize='unicode61 remove_diacritics 0')",
    ]


# --- writing, on the database thread ------------------------------------------------
# Each `*_raw` function takes the sqlite3 connection and runs on aiosqlite's thread (through
# `Database.run` or `on_db_thread`), so a write of several statements costs one round trip
# from the event loop instead of one per statement.

FileRow = tuple[str, int, int, int, str, str]
"""(path, scope id, mtime_ns, size, hash, kind) of a `files` row."""
ChunkRow = tuple[int, str, int, int, str, str | None, str | None, str, str]
"""(scope id, path, line_from, line_to, kind, created_at, ref, text, tokens) of a chunk."""

_UPSERT_FILE = (
    "INSERT INTO files (path, scope_id, mtime_ns, size, hash, kind) VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (path) DO UPDATE SET mtime_ns = excluded.mtime_ns, size = excluded.size,"
    " hash = excluded.hash"
)


def _adjust_df_raw(
    raw: sqlite3.Connection, sid: int, token_strings: Iterable[str], sign: int
) -> None:
    """Keep per-scope document frequencies, counted once per batch, not per chunk."""
    counts: Counter[str] = Counter()
    for tokens in token_strings:
        counts.update(set(tokens.split()))
    if not counts:
        return
    raw.executemany(
        "INSERT INTO terms (scope_id, term, df) VALUES (?, ?, ?)"
        " ON CONFLICT (scope_id, term) DO UPDATE SET df = df + excluded.df",
        [(sid, term, sign * n) for term, n in counts.items()],
    )
    if sign < 0:
        raw.execute("DELETE FROM terms WHERE scope_id = ? AND df <= 0", (sid,))


def _insert_chunks_raw(
    raw: sqlite3.Connection,
    sid: int,
    path: str,
    kind: ChunkKind,
    chunks: Sequence[tuple[Chunk, str]],
) -> None:
    """Store chunks and register them with the scope's FTS table, document frequencies
    and counters. Ids are assigned here, inside the caller's write transaction."""
    if not chunks:
        return
    row = raw.execute("SELECT COALESCE(MAX(id), 0) FROM chunks").fetchone()
    first = int(row[0]) + 1
    rows = []
    fts_rows = []
    for offset, (chunk, tokens) in enumerate(chunks):
        chunk_id = first + offset
        rows.append(
            (
                chunk_id,
                sid,
                path,
                chunk.line_from,
                chunk.line_to,
                kind.value,
                format_when(chunk.created_at) if chunk.created_at else None,
                chunk.ref,
                chunk.text,
                tokens,
            )
        )
        fts_rows.append((chunk_id, tokens))
    raw.executemany(
        "INSERT INTO chunks (id, scope_id, path, line_from, line_to, kind, created_at, ref,"
        " text, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    raw.executemany(f"INSERT INTO fts_{sid} (rowid, tokens) VALUES (?, ?)", fts_rows)
    _adjust_df_raw(raw, sid, (tokens for _, tokens in fts_rows), +1)
    raw.execute(
        "UPDATE scopes SET chunk_count = chunk_count + ?, token_count = token_count + ?"
        " WHERE id = ?",
        (len(fts_rows), sum(_token_count(t) for _, t in fts_rows), sid),
    )


def _token_count(tokens: str) -> int:
    return tokens.count(" ") + 1 if tokens else 0


def _delete_path_raw(raw: sqlite3.Connection, sid: int, path: str) -> int:
    rows = raw.execute(
        "SELECT id, tokens FROM chunks WHERE scope_id = ? AND path = ?", (sid, path)
    ).fetchall()
    _delete_rows_raw(raw, sid, rows)
    return len(rows)


def _delete_rows_raw(raw: sqlite3.Connection, sid: int, rows: Iterable[Sequence[object]]) -> None:
    pairs = [(r[0], str(r[1])) for r in rows]
    if not pairs:
        return
    raw.executemany(
        f"INSERT INTO fts_{sid} (fts_{sid}, rowid, tokens) VALUES ('delete', ?, ?)", pairs
    )
    raw.executemany("DELETE FROM chunks WHERE id = ?", [(p[0],) for p in pairs])
    _adjust_df_raw(raw, sid, (t for _, t in pairs), -1)
    raw.execute(
        "UPDATE scopes SET chunk_count = chunk_count - ?, token_count = token_count - ?"
        " WHERE id = ?",
        (len(pairs), sum(_token_count(t) for _, t in pairs), sid),
    )


def _replace_file_raw(
    raw: sqlite3.Connection, sid: int, item: PreparedFile, stats: SyncStats
) -> None:
    """A prepared file's chunks instead of the stored ones, and its row in `files` (the
    stamp the next sync compares)."""
    stats.chunks_removed += _delete_path_raw(raw, sid, item.path)
    _insert_chunks_raw(raw, sid, item.path, item.kind, item.chunks)
    raw.execute(
        _UPSERT_FILE, (item.path, sid, item.mtime_ns, item.size, item.hash, item.kind.value)
    )
    stats.files_indexed += 1
    stats.chunks_added += len(item.chunks)


def _add_raw(
    raw: sqlite3.Connection,
    sid: int,
    path: str,
    kind: ChunkKind,
    prepared: Sequence[tuple[Chunk, str]],
    stamp: tuple[int, int] | None,
    previous: tuple[int, int] | None,
) -> bool:
    """The write of `SearchIndex.add_prepared`; true when the file must be read again."""
    if stamp is not None and previous is not None:
        row = raw.execute("SELECT mtime_ns, size FROM files WHERE path = ?", (path,)).fetchone()
        known = (int(row[0]), int(row[1])) if row else (0, 0)
        if known != previous:
            return known != stamp
    _insert_chunks_raw(raw, sid, path, kind, prepared)
    if stamp is not None:
        # The old hash no longer describes the file: forget it, or a hand edit that
        # removes the appended note would look unchanged.
        raw.execute(_UPSERT_FILE, (path, sid, stamp[0], stamp[1], "", kind.value))
    return False


def _update_hidden_raw(raw: sqlite3.Connection, sid: int) -> None:
    """A monthly summary hides that month's daily summaries from recall."""
    raw.execute("UPDATE chunks SET hidden = 0 WHERE scope_id = ? AND kind = 'summary'", (sid,))
    raw.execute(
        """
        UPDATE chunks SET hidden = 1
        WHERE scope_id = ?1 AND kind = 'summary'
          AND path GLOB '*/summary/[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9].md'
          AND EXISTS (
            SELECT 1 FROM files m
            WHERE m.scope_id = ?1
              AND m.path = substr(chunks.path, 1, length(chunks.path) - 6) || '.md'
          )
        """,
        (sid,),
    )


# --- rebuild -------------------------------------------------------------------------


def _reset_raw(raw: sqlite3.Connection) -> list[int]:
    """Empty the index of everything that comes from files, in one transaction: every
    scope's FTS table is dropped and made again (far faster than deleting its postings
    one by one), and the kept message chunks go straight back into it and into the
    counters. Returns the ids of the scopes that still hold chunks (messages)."""
    # Deleting row by row costs more than emptying the table, which is page-level work
    # (SQLite's truncate optimization): the messages are put aside and back, same ids.
    raw.execute("CREATE TEMP TABLE kept_messages AS SELECT * FROM chunks WHERE kind = 'message'")
    raw.execute("DELETE FROM chunks")
    raw.execute("INSERT INTO chunks SELECT * FROM temp.kept_messages")
    raw.execute("DROP TABLE temp.kept_messages")
    raw.execute("DELETE FROM files")
    raw.execute("DELETE FROM terms")
    raw.execute("UPDATE scopes SET chunk_count = 0, token_count = 0")
    for (sid,) in raw.execute("SELECT id FROM scopes").fetchall():
        raw.execute(f"DROP TABLE IF EXISTS fts_{int(sid)}")
        for statement in _create_fts(int(sid)):
            raw.execute(statement)
    kept = [int(r[0]) for r in raw.execute("SELECT DISTINCT scope_id FROM chunks").fetchall()]
    for sid in kept:
        raw.execute(
            f"INSERT INTO fts_{sid} (rowid, tokens) SELECT id, tokens FROM chunks"
            " WHERE scope_id = ? ORDER BY id",
            (sid,),
        )
        raw.execute(
            "UPDATE scopes SET chunk_count = (SELECT COUNT(*) FROM chunks WHERE scope_id = ?1),"
            " token_count = (SELECT COALESCE(SUM(length(tokens) - length(replace(tokens,"
            " ' ', '')) + (tokens != '')), 0) FROM chunks WHERE scope_id = ?1) WHERE id = ?1",
            (sid,),
        )
    return kept


PreparedRows = tuple[list[FileRow], list[ChunkRow], dict[int, tuple[int, int]]]
"""What a rebuild worker sends back for a group of files: file rows, chunk rows, and per
scope id the number of chunks and of tokens among them."""


def _write_rows_raw(raw: sqlite3.Connection, rows: PreparedRows) -> None:
    """Store a group of prepared files (rebuild only): ids are assigned here, inside the
    write transaction, and both the chunk rows and the FTS rows are bound by
    `executemany` in C. Document frequencies wait for `_finish_scope_raw`."""
    files, chunks, counts = rows
    row = raw.execute("SELECT COALESCE(MAX(id), 0) FROM chunks").fetchone()
    first = int(row[0]) + 1
    raw.executemany(
        "INSERT INTO chunks (id, scope_id, path, line_from, line_to, kind, created_at, ref,"
        " text, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(first + offset, *chunk) for offset, chunk in enumerate(chunks)],
    )
    if len(counts) == 1:
        [sid] = counts
        raw.executemany(
            f"INSERT INTO fts_{sid} (rowid, tokens) VALUES (?, ?)",
            zip(itertools.count(first), [chunk[8] for chunk in chunks], strict=False),
        )
    else:
        by_scope: dict[int, list[tuple[int, str]]] = {}
        for offset, chunk in enumerate(chunks):
            by_scope.setdefault(chunk[0], []).append((first + offset, chunk[8]))
        for sid, fts_rows in by_scope.items():
            raw.executemany(f"INSERT INTO fts_{sid} (rowid, tokens) VALUES (?, ?)", fts_rows)
    raw.executemany(
        "UPDATE scopes SET chunk_count = chunk_count + ?, token_count = token_count + ?"
        " WHERE id = ?",
        [(n, tokens, sid) for sid, (n, tokens) in counts.items()],
    )
    raw.executemany(_UPSERT_FILE, files)


def _finish_scope_raw(raw: sqlite3.Connection, sid: int) -> None:
    """Document frequencies of a rebuilt scope, from FTS5's own vocabulary rather than
    counted row by row in Python, and the summaries its monthly summaries hide."""
    raw.execute("DELETE FROM terms WHERE scope_id = ?", (sid,))
    raw.execute(f"CREATE VIRTUAL TABLE temp.vocab_{sid} USING fts5vocab(main, fts_{sid}, row)")
    raw.execute(
        f"INSERT INTO terms (scope_id, term, df) SELECT ?, term, doc FROM temp.vocab_{sid}",
        (sid,),
    )
    raw.execute(f"DROP TABLE temp.vocab_{sid}")
    _update_hidden_raw(raw, sid)


def _list_workspace(workspace: Workspace) -> tuple[list[ScopeKey], list[tuple[ScopeKey, Path]]]:
    """Every scope and every file the index covers (blocking: directory listings)."""
    scopes = workspace.scopes()
    return scopes, [(scope, path) for scope in scopes for path in scope_files(workspace, scope)]


def _when_text(when: datetime) -> str:
    """`format_when`, at a third of its cost for the aware UTC whole-second times that
    chunking produces: a rebuild formats one per chunk."""
    if when.tzinfo is UTC and not when.microsecond:
        # %-formatting: about twice as fast as the f-string equivalent here.
        return "%04d-%02d-%02dT%02d:%02d:%02dZ" % (  # noqa: UP031
            when.year,
            when.month,
            when.day,
            when.hour,
            when.minute,
            when.second,
        )
    return format_when(when)


def _prepare_rows(
    workspace: Workspace, group: Sequence[tuple[int, Path]], zone: tzinfo
) -> PreparedRows:
    """Worker-process entry point of a rebuild (module level, so it pickles): files read,
    chunked and tokenized into the very tuples the database takes, so the writing process
    only unpickles plain tuples and hands them to `executemany`."""
    files: list[FileRow] = []
    chunks: list[ChunkRow] = []
    counts: dict[int, tuple[int, int]] = {}
    for sid, path in group:
        item = prepare_file(workspace, path, zone)
        if item is None:
            continue
        kind = item.kind.value
        files.append((item.path, sid, item.mtime_ns, item.size, item.hash, kind))
        chunks.extend(
            (
                sid,
                item.path,
                chunk.line_from,
                chunk.line_to,
                kind,
                _when_text(chunk.created_at) if chunk.created_at else None,
                chunk.ref,
                chunk.text,
                tokens,
            )
            for chunk, tokens in item.chunks
        )
        n, tokens = counts.get(sid, (0, 0))
        counts[sid] = (
            n + len(item.chunks),
            tokens + sum(_token_count(t) for _, t in item.chunks),
        )
    return files, chunks, counts


# --- async wrappers for callers inside `Database.transaction` --------------------------


async def _insert_chunks(
    conn: aiosqlite.Connection,
    sid: int,
    path: str,
    kind: ChunkKind,
    chunks: Sequence[tuple[Chunk, str]],
) -> None:
    await on_db_thread(conn, lambda raw: _insert_chunks_raw(raw, sid, path, kind, chunks))


async def _delete_path(conn: aiosqlite.Connection, sid: int, path: str) -> int:
    return await on_db_thread(conn, lambda raw: _delete_path_raw(raw, sid, path))


async def _delete_rows(
    conn: aiosqlite.Connection, sid: int, rows: Iterable[Sequence[object]]
) -> None:
    await on_db_thread(conn, lambda raw: _delete_rows_raw(raw, sid, rows))


def _tokenize_chunks(chunks: Sequence[Chunk]) -> list[tuple[Chunk, str]]:
    return [(chunk, " ".join(tokenize(chunk.text))) for chunk in chunks]


def _tokenize_and_stat(
    chunks: Sequence[Chunk], path: Path | None
) -> tuple[list[tuple[Chunk, str]], tuple[int, int] | None]:
    """`add_chunks`' blocking part in one worker-thread call."""
    prepared = _tokenize_chunks(chunks)
    if path is None:
        return prepared, None
    st = path.stat()
    return prepared, (st.st_mtime_ns, st.st_size)


def _stat_files(workspace: Workspace, scope: ScopeKey) -> dict[Path, tuple[str, int, int]]:
    out: dict[Path, tuple[str, int, int]] = {}
    for path in scope_files(workspace, scope):
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        out[path] = (workspace.relative(path), st.st_mtime_ns, st.st_size)
    return out
