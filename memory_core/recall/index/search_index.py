"""The SQLite search index: chunks of every memory file and message, BM25 per scope.

Each scope has its own FTS5 table (`fts_<scope id>`) over pre-tokenized text, so a query
costs what its scope holds, not what the workspace holds, and no query can reach another
scope's postings. The `chunks` table is the FTS tables' external content and the one place
chunk text lives. Files are the source of truth: `sync_scope` brings the index in line with
them at one stat per unchanged file, and `rebuild` recreates everything from files.

This class orders the work (per-scope locks, what each write makes stale, worker threads
for files and tokens); a sync's work is `file_sync.py`'s, a search's `searching.py`'s, and
the SQL lives in `writes.py`, `search.py` and `rebuild.py`, each function one call on the
database thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, tzinfo
from functools import partial

import memory_core.recall.index.line_moves as line_moves
import memory_core.recall.index.long_term_difference as difference
import memory_core.recall.index.rebuild as rebuilding
import memory_core.recall.index.retokenize as retokenize
import memory_core.recall.index.search as reads
import memory_core.recall.index.writes as writes
from memory_core.base.chunks import Appended, Chunk, ChunkKind
from memory_core.base.clock import Clock, Monotonic, system_clock
from memory_core.base.errors import ChatmemError, DatabaseConflict
from memory_core.base.process_knobs import gc_paused
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.scope_names import remember_scope
from memory_core.base.sql import Connection, Db
from memory_core.base.text import TOKENIZER_VERSION, tokenize
from memory_core.base.turn_dates import mentioned_days
from memory_core.base.workspace import Workspace
from memory_core.longterm import parse_cache
from memory_core.longterm.store import WriteRecord
from memory_core.recall.chunking import summary_period
from memory_core.recall.index.file_sync import FileSync
from memory_core.recall.index.files import prepare_file, stat_files
from memory_core.recall.index.model import Hit, Progress, SyncStats
from memory_core.recall.index.ranking import K1, B
from memory_core.recall.index.rerank import RankSettings
from memory_core.recall.index.searching import Searcher
from memory_core.recall.index.summaries import ReindexSummaries
from memory_core.recall.query import as_query
from memory_core.recall.request import QueryInput, SearchRequest
from memory_core.storage.interfaces import VectorSearch

AfterInsert = Callable[[Connection, int], None]
BACKGROUND_SCAN_FILES = 2000
"""Above this many files a scope's stale sync runs in the background (`sync_if_stale`):
stat'ing them would cost a search more than its own query (2 000 files: a few ms)."""
log = logging.getLogger(__name__)


class SearchIndex:
    def __init__(
        self,
        db: Db,
        workspace: Workspace,
        sync_min_interval: float = 2.0,
        zone: tzinfo = UTC,
        *,
        k1: float = K1,
        b: float = B,
        rank_settings: RankSettings | None = None,
        monotonic: Monotonic = time.monotonic,
        vectors: VectorSearch | None = None,
        archive_below: float = 0.2,
        parse_cache_min_bytes: int | None = parse_cache.MIN_BYTES,
        background_scan_files: int = BACKGROUND_SCAN_FILES,
        clock: Clock = system_clock,
    ) -> None:
        """`monotonic` times `sync_min_interval`, the least time between two syncs of a
        scope before a search (`sync_if_stale`); `vectors` is dense recall, when an
        embedder is configured (see memory_core/embedding). A long-term file is read as
        its store reads it (`archive_below`, and through the parse cache of files of at
        least `parse_cache_min_bytes`; None: without it). A scope of more than
        `background_scan_files` files is scanned for hand edits in the background, not
        before each search (`sync_if_stale`). `clock` gives the day of a search that names
        none (`SearchRequest.today`)."""
        self.rank_settings = rank_settings or RankSettings()
        self.vectors = vectors
        self._zone = zone
        self._db = db
        self._ws = workspace
        self._k1 = k1
        self._b = b
        self._scope_ids: dict[str, int] = {}
        self._generation: dict[str, int] = {}
        self._session_writes: dict[tuple[str, str], int] = {}
        self._scope_locks: dict[str, asyncio.Lock] = {}
        self._last_sync: dict[str, float] = {}
        self._sync_min_interval = sync_min_interval
        self._monotonic = monotonic
        self._clock = clock
        self._files = FileSync(db, workspace, zone, archive_below, parse_cache_min_bytes)
        self._background_scan_files = background_scan_files
        self._files_seen: dict[str, int] = {}
        self._scans: dict[str, asyncio.Task[None]] = {}
        self._tokens_current = False
        self._tokens_lock = asyncio.Lock()

    # --- scopes and their FTS tables ------------------------------------------------
    async def scope_id(self, scope: ScopeKey, *, create: bool = True) -> int | None:
        if not self._tokens_current:
            await self._current_tokens()
        cached = self._scope_ids.get(scope.value)
        if cached is not None:
            return cached
        sid = await self._db.read(lambda conn: reads.find_scope(conn, scope.value))
        if sid is None:
            if not create:
                return None
            sid = await self._db.write(lambda conn: writes.ensure_scope(conn, scope.value))
        self._scope_ids[scope.value] = sid
        remember_scope(sid, scope.value)
        return sid

    async def _current_tokens(self) -> None:
        """Once per process, before the index is first used: an index whose terms another
        tokenizer made is tokenized again (`retokenize`; ~10 s per 100 000 chunks, once,
        and every process opening it meanwhile waits for that transaction)."""
        async with self._tokens_lock:
            if self._tokens_current:
                return
            if await self._db.read(retokenize.stored_version) != TOKENIZER_VERSION:
                started = self._monotonic()
                changed = await self._db.write(retokenize.retokenize)
                if changed:
                    log.info(
                        "index tokenized again for tokenizer %d: %d chunks in %.1f s",
                        TOKENIZER_VERSION,
                        changed,
                        self._monotonic() - started,
                    )
            self._tokens_current = True

    async def _sid(self, scope: ScopeKey) -> int:
        sid = await self.scope_id(scope)
        assert sid is not None
        return sid

    def _lock(self, scope: ScopeKey) -> asyncio.Lock:
        return self._scope_locks.setdefault(scope.value, asyncio.Lock())

    def _changed(self, scope: ScopeKey, session_id: str | None = None) -> None:
        """A write to the scope: recall caches of it go stale, new chunks want vectors."""
        self._generation[scope.value] = self._generation.get(scope.value, 0) + 1
        if session_id is not None:
            key = (scope.value, session_id)
            self._session_writes[key] = self._session_writes.get(key, 0) + 1
        sid = self._scope_ids.get(scope.value)
        if self.vectors is not None and sid is not None:
            self.vectors.schedule(sid)

    def embed_all(self) -> None:
        """Start backfilling the vectors of every scope this index has seen."""
        if self.vectors is not None:
            for sid in self._scope_ids.values():
                self.vectors.schedule(sid)

    async def data_version(self) -> int:
        """Moves when another process commits to the database."""
        return await self._db.data_version()

    def generation(self, scope: ScopeKey, *, besides_session: str | None = None) -> int:
        """How many writes this process made to the scope, less those to one session's
        messages (a recall that leaves that session out is not changed by them)."""
        own = self._session_writes.get((scope.value, besides_session or ""), 0)
        return self._generation.get(scope.value, 0) - own

    # --- syncing files --------------------------------------------------------------
    async def sync_scope(self, scope: ScopeKey, *, force: bool = False) -> SyncStats:
        """Bring the scope's chunks in line with its files (one stat per unchanged file).

        The files are listed and stat'ed before the scope's lock is taken, so a large
        scope's listing does not hold up a note being appended meanwhile: a file written
        after its stat only looks changed, and is read again."""
        current = await asyncio.to_thread(stat_files, self._ws, scope)
        async with self._lock(scope):
            stats = await self._files.sync_scope(scope, await self._sid(scope), force, current)
            self._last_sync[scope.value] = self._monotonic()
        self._files_seen[scope.value] = stats.files_seen
        if stats.files_indexed or stats.files_removed or stats.chunks_removed:
            self._changed(scope)
        return stats

    async def sync_if_stale(self, scope: ScopeKey) -> None:
        """Before a search: pick up hand edits, at most once per min interval.

        A scope of more than `background_scan_files` files (100 000 daily notes take
        most of a second to stat) is scanned in the background instead, one scan at a
        time: the search answers from the index as it stands, and the searches after the
        scan see what it found. Every write by a chatmem process is indexed as it is
        made; only other programs' edits wait for that scan."""
        last = self._last_sync.get(scope.value)
        if last is not None and self._monotonic() - last < self._sync_min_interval:
            return
        if self._files_seen.get(scope.value, 0) <= self._background_scan_files:
            await self.sync_scope(scope)
            return
        running = self._scans.get(scope.value)
        if running is None or running.done():
            self._scans[scope.value] = asyncio.create_task(self._scan(scope))

    async def _scan(self, scope: ScopeKey) -> None:
        """A background `sync_scope`: its failure is logged, and the next search's sync
        (or this scan's next round) meets it again."""
        try:
            await self.sync_scope(scope)
        except ChatmemError as exc:
            log.warning("background sync of scope %s failed: %s", scope, exc)

    async def scanned(self) -> None:
        """Wait for the background scans under way (tests, benches)."""
        for task in list(self._scans.values()):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def close(self) -> None:
        """Stop the background scans (what they did is committed scan by scan)."""
        scans = [task for task in self._scans.values() if not task.done()]
        for task in scans:
            task.cancel()
        for task in scans:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def sync_file(self, scope: ScopeKey, relative_path: str) -> None:
        """Re-index one file the core just wrote (no directory scan)."""
        async with self._lock(scope):
            sid = await self._sid(scope)
            item = await asyncio.to_thread(
                prepare_file, self._ws, self._ws.root / relative_path, self._zone
            )
            if item is None:
                await self._db.write(partial(writes.remove_file, sid=sid, path=relative_path))
            else:
                await self._files.write_file(sid, item, SyncStats())
            if summary_period(relative_path):
                await self._db.write(partial(writes.update_hidden, sid=sid))
        self._changed(scope)

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
            sid = await self._sid(scope)
            reread = await self._db.write(
                lambda conn: writes.add_appended_rows(
                    conn, sid, relative_path, kind, prepared, stamp, previous
                )
            )
            if reread:
                await self._files.reread(sid, relative_path)
        self._changed(scope)

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
            sid = await self._sid(scope)

            def work(conn: Connection) -> tuple[Appended | None, bool]:
                done = append()
                if done is None:
                    return None, False
                reread = writes.add_appended_rows(
                    conn, sid, relative_path, kind, done.prepared, done.stamp, done.previous
                )
                return done, reread

            done, reread = await self._db.write(work)
            if reread:
                await self._files.reread(sid, relative_path)
        self._changed(scope)
        return done

    async def update_long_term(
        self, scope: ScopeKey, relative_path: str, record: WriteRecord
    ) -> None:
        """Apply one write of the scope's long-term file by difference: added, edited and
        removed entries are (re)tokenized, the others only get their new line numbers.

        Only when the index holds exactly the version that was replaced; otherwise (a hand
        edit not yet synced, a first write) the file is compared with the index entry by
        entry (`_sync_long_term`).

        The cyclic collector is paused throughout: the comparison of a 100 000-entry file
        makes a few hundred thousand objects that live until the index is written, none
        in a cycle; left to it, they set off a pass over the whole heap (a tenth of a
        second) and count towards the next. Freed inside the pause, they count for nothing.
        """
        with gc_paused():
            await self._long_term_by_difference(scope, relative_path, record)
        self._changed(scope)

    async def _long_term_by_difference(
        self, scope: ScopeKey, relative_path: str, record: WriteRecord
    ) -> None:
        after = record.after

        def compare() -> tuple[list[str], list[tuple[Chunk, str]], list[line_moves.Run] | None]:
            before = record.before
            stale, fresh = difference.between_versions(before.entries, after.entries)
            runs = None
            if record.segments is not None and len(after.lines) == len(after.entries):
                runs = line_moves.segment_runs(
                    before.entries, before.lines, after.lines, record.segments, stale
                )
            if runs is None:
                kept = line_moves.kept_lines(before.entries, before.lines, stale)
                runs = None if kept is None else line_moves.shift_runs(kept, after.lines)
            return stale, difference.prepared(fresh, after.lines), runs

        stale, prepared, runs = await asyncio.to_thread(compare)
        async with self._lock(scope):
            sid = await self._sid(scope)
            known = await self._db.read(lambda conn: reads.file_stamp(conn, relative_path))
            in_step = record.before_stamp is not None and known == record.before_stamp[:2]
            stamp = record.after_stamp
            if not in_step or stamp is None:
                await self._files.sync_long_term(scope, sid, relative_path, SyncStats(), "")
            else:
                try:
                    await self._db.write(
                        lambda conn: writes.apply_long_term(
                            conn,
                            sid,
                            relative_path,
                            stale,
                            prepared,
                            record.after.lines,
                            stamp[:2],
                            held_stamp=known,
                            runs=runs,
                        )
                    )
                except (writes.StaleDifference, DatabaseConflict):
                    # Another process indexed the file since `known` was read: the index
                    # no longer holds the version this write replaced. The file decides.
                    await self._files.sync_long_term(scope, sid, relative_path, SyncStats(), "")

    async def message_step(
        self, scope: ScopeKey, session_id: str, speaker: str, text: str, created_at: datetime
    ) -> AfterInsert:
        """The chunk of a session message as a step of the message's own transaction
        (`HistoryStore.add_message`), given the message id there: a message and its index
        row are one commit. The text is tokenized, and its days resolved, here, before.

        The scope lock is not taken: message chunks belong to no file, so no sync touches
        them, and the transaction alone orders this write against every other one (taking
        the lock inside it would invert the sync's lock-then-transaction order).
        """
        sid = await self._sid(scope)
        tokens = " ".join(tokenize(text))
        dates = mentioned_days(text, created_at, self._zone)
        path = f"sessions/{session_id}"
        line = f"{speaker}: {text}"

        def write(conn: Connection, message_id: int) -> None:
            chunk = Chunk(
                message_id, message_id, line, created_at, ref=str(message_id), dates=dates
            )
            writes.insert_chunks(conn, sid, path, ChunkKind.MESSAGE, [(chunk, tokens)])

        self._changed(scope, session_id)
        return write

    async def remove_messages(self, scope: ScopeKey, message_ids: Sequence[int]) -> None:
        """Drop message chunks (history trimmed after archiving) from the scope's index."""
        sid = await self.scope_id(scope, create=False)
        if sid is None or not message_ids:
            return
        async with self._lock(scope):
            await self._db.write(lambda conn: writes.remove_messages(conn, sid, message_ids))
        self._changed(scope)

    # --- whole workspace ------------------------------------------------------------
    async def sync_all(self, progress: Progress | None = None) -> SyncStats:
        """Every scope's files, and the days of message chunks the resolver has not read
        yet (after an upgrade of `base/turn_dates.py`: ~20 µs a turn, once)."""
        if await self._db.read(rebuilding.has_unresolved_dates):
            await self._db.write(partial(rebuilding.fill_message_dates, zone=self._zone))
        total = SyncStats()
        scopes = await asyncio.to_thread(self._ws.scopes)
        for number, scope in enumerate(scopes, start=1):
            total.add(await self.sync_scope(scope))
            if progress:
                progress(number, len(scopes))
        return total

    async def sync_opened(self, progress: Progress | None = None) -> SyncStats:
        """What an open brings up to date, whatever the number of scopes: the days of
        message chunks not resolved yet (`sync_all`) and the main scope's files. Every
        other scope's files are synced when that scope is first searched in the process
        (`sync_if_stale`), and its writes check the index against the file they replace,
        so nothing is listed, stat'ed or queried per scope here."""
        if await self._db.read(rebuilding.has_unresolved_dates):
            await self._db.write(partial(rebuilding.fill_message_dates, zone=self._zone))
        stats = await self.sync_scope(MAIN)
        if progress:
            progress(1, 1)
        return stats

    async def embed_every_scope(self) -> None:
        """A serving process: backfill the vectors of every scope in the index (one
        query for their ids; each backfill runs in the background)."""
        if self.vectors is None:
            return
        for sid in await self._db.read(reads.scope_ids):
            self.vectors.schedule(sid)

    async def rebuild(self, progress: Progress | None = None) -> SyncStats:
        """Drop every file-derived chunk and index all files again (messages are kept);
        see `rebuild.rebuild`."""
        scopes, listed, seen = await asyncio.to_thread(rebuilding.list_workspace, self._ws)
        sids = {scope.value: await self._sid(scope) for scope in scopes}
        paths = [(sids[scope.value], path) for scope, path in listed]
        # Each scope's summary made from the very reads that index it: the first
        # `chatmem scopes` after a reindex reads no file (`summaries.py`).
        summaries = ReindexSummaries(
            self._files.archive_below,
            {sids[scope.value]: (scope.value, *seen[scope]) for scope in scopes},
        )
        total = await rebuilding.rebuild(
            self._db, self._ws, self._zone, paths, set(sids.values()), progress, summaries
        )
        now = self._monotonic()
        if self.vectors is not None:
            self.vectors.invalidate()  # chunks have new ids
        for scope in scopes:
            self._last_sync[scope.value] = now
            self._changed(scope)
        return total

    # --- search ---------------------------------------------------------------------
    async def search(self, scope: ScopeKey, asked: SearchRequest | QueryInput) -> list[Hit]:
        """Hits of one scope, best first (`searching.Searcher`); `asked` is a request, or
        a plain query with the default options. A request without its day is read on
        the day of the injected clock, in the index's zone."""
        request = SearchRequest.of(asked)
        day = request.today or self._clock().astimezone(self._zone).date()
        plan = as_query(request.query, day)
        if (not plan.terms and plan.window is None) or request.limit <= 0:
            return []
        if request.kinds is not None and not request.kinds:
            return []  # no kind wanted: nothing can match (and `IN ()` is not SQL)
        sid = await self.scope_id(scope, create=False)
        if sid is None:
            return []
        searcher = Searcher(
            self._db, self._zone, self._k1, self._b, self.rank_settings, self.vectors
        )
        return await searcher.search(sid, request, plan, day)

    async def session_messages(
        self, scope: ScopeKey, session_id: str, first_id: int, count: int
    ) -> list[tuple[int, str]]:
        """(message id, 'speaker: text') of one session of this scope, from `first_id` on."""
        sid = await self.scope_id(scope, create=False)
        if sid is None:
            return []
        return await self._db.read(
            lambda conn: reads.session_messages(conn, sid, session_id, first_id, count)
        )

    async def message_context(
        self, scope: ScopeKey, session_id: str, message_id: int, before: int = 1, after: int = 2
    ) -> list[tuple[int, str]]:
        """The message and its neighbours in the session, oldest first."""
        sid = await self.scope_id(scope, create=False)
        if sid is None:
            return []
        return await self._db.read(
            lambda conn: reads.message_context(conn, sid, session_id, message_id, before, after)
        )
