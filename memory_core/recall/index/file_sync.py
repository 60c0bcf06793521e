"""Files into chunks: a scope's sync, and a long-term file's sync by difference.

`SearchIndex` decides when (its per-scope locks and write counts); this module does the
work of one sync: which files changed, reading and tokenizing them off the event loop,
and writing them a group per transaction (`writes.py`). A long-term file is compared
entry by entry, so one edited entry of 100 000 is one entry tokenized again.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import tzinfo
from functools import partial

import memory_core.recall.index.long_term_difference as difference
import memory_core.recall.index.search as reads
import memory_core.recall.index.summaries as summaries
import memory_core.recall.index.writes as writes
from memory_core.base.chunks import Chunk
from memory_core.base.clock import epoch_ns
from memory_core.base.errors import MemoryFileError
from memory_core.base.scope import ScopeKey
from memory_core.base.sql import Db
from memory_core.base.workspace import Workspace
from memory_core.longterm import parse_cache
from memory_core.longterm.store import FileRead, read_memory_file
from memory_core.recall.index.files import prepare_file, scope_folder_seen
from memory_core.recall.index.model import PreparedFile, SyncStats
from memory_core.recall.index.summaries import LongTermSeen, summary
from memory_core.storage.summary_format import stamp_part

SYNC_GROUP = 64
"""Changed files a sync reads and writes at a time (one transaction each group)."""


@dataclass(frozen=True, slots=True)
class FileSync:
    """How the index reads a scope's files: `archive_below` and the parse cache (files
    of at least `cache_min_bytes`; None: without it) as the long-term store reads them."""

    db: Db
    ws: Workspace
    zone: tzinfo
    archive_below: float
    cache_min_bytes: int | None

    async def sync_scope(
        self, scope: ScopeKey, sid: int, force: bool, current: dict[str, tuple[int, int]]
    ) -> SyncStats:
        """Bring scope `sid`'s chunks in line with its files as `current` stamps them
        (path → (mtime_ns, size)); the caller holds the scope's lock."""
        stats = SyncStats()
        known = await self.db.read(lambda conn: reads.file_stamps(conn, sid))
        stats.files_seen = len(current)
        changed = [
            rel
            for rel, stamp in current.items()
            if force or known.get(rel, (None, None, None))[:2] != stamp
        ]
        if not force:
            # A long-term file is compared entry by entry: one edited entry of 100 000 is
            # one entry read, tokenized and written again.
            long_term = self.ws.relative(self.ws.long_term_path(scope))
            if long_term in changed:
                changed.remove(long_term)
                known_hash = known.get(long_term, (0, 0, ""))[2]
                await self.sync_long_term(scope, sid, long_term, stats, known_hash)
        root = self.ws.root

        def prepare(group: list[str]) -> list[PreparedFile]:
            found = (
                prepare_file(self.ws, root / rel, self.zone, self.archive_below) for rel in group
            )
            return [p for p in found if p is not None]

        for start in range(0, len(changed), SYNC_GROUP):
            # Read and written a group at a time: one transaction per group, not per
            # file, and never every changed file in memory at once.
            prepared = await asyncio.to_thread(prepare, changed[start : start + SYNC_GROUP])
            fresh: list[PreparedFile] = []
            same: list[PreparedFile] = []
            for item in prepared:
                unchanged = not force and known.get(item.path, (0, 0, ""))[2] == item.hash
                (same if unchanged else fresh).append(item)
            await self.db.write(
                partial(writes.replace_files, sid=sid, items=fresh, restamped=same, stats=stats)
            )
            for item in prepared:
                if item.summary is not None:  # the long-term file, read whole (`force`)
                    await self.write_summary(scope, sid, item.summary)
        for gone in sorted(set(known) - set(current)):
            stats.chunks_removed += await self.db.write(
                partial(writes.remove_file, sid=sid, path=gone)
            )
            stats.files_removed += 1
        if changed or stats.files_removed:
            await self.db.write(partial(writes.update_hidden, sid=sid))
        return stats

    async def sync_long_term(
        self, scope: ScopeKey, sid: int, relative_path: str, stats: SyncStats, known_hash: str
    ) -> None:
        """Bring a long-term file's chunks in line with it by difference: the file is
        read as its store reads it (through the parse cache: only its changed blocks are
        parsed), its entries compared with the chunks the index holds (text, time, id),
        and only added and edited entries tokenized; the others move to their new lines.
        An index whose chunks of the file are not one per entry (none should be) gets
        the whole file again."""
        path = self.ws.root / relative_path
        files = parse_cache.files_for(self.ws, scope) if self.cache_min_bytes is not None else None

        def read() -> tuple[FileRead, LongTermSeen | None]:
            read_at = epoch_ns()  # before the summary's stat, which comes before the read
            part, mtime = stamp_part(str(path))
            got = read_memory_file(
                path,
                self.archive_below,
                files,
                self.cache_min_bytes or 0,
                root=self.ws.root,
                warn=False,  # the store says what it quarantined
            )
            usable = got.utf8 and got.stamp is not None
            return got, LongTermSeen.of(part, mtime, read_at, got.parsed) if usable else None

        try:
            snapshot, seen = await asyncio.to_thread(read)
        except MemoryFileError:
            snapshot, seen = None, None  # a file it may not read, bytes it cannot keep
        await self.index_long_term(sid, relative_path, stats, known_hash, snapshot)
        if seen is not None:
            # The file was read as the store reads it: the scope's summary from the same
            # read, so the next `chatmem scopes` need not read it again.
            await self.write_summary(scope, sid, seen)

    async def index_long_term(
        self,
        sid: int,
        relative_path: str,
        stats: SyncStats,
        known_hash: str,
        snapshot: FileRead | None,
    ) -> None:
        """`sync_long_term`'s chunks of the file as `snapshot` read it."""
        if snapshot is None or not snapshot.utf8:
            # Read as any file, as a rebuild reads it (bytes not UTF-8 replaced).
            await self.reread(sid, relative_path)
            stats.files_indexed += 1
            return
        stamp, digest = snapshot.stamp, (snapshot.digest or b"").hex()
        if stamp is None:
            stats.chunks_removed += await self.db.write(
                partial(writes.remove_file, sid=sid, path=relative_path)
            )
            stats.files_removed += 1
            return
        if digest == known_hash:
            await self.db.autocommit(
                partial(
                    writes.restamp_file,
                    path=relative_path,
                    mtime_ns=stamp[0],
                    size=stamp[1],
                    digest=digest,
                )
            )
            return
        held = await self.db.read(lambda conn: reads.held_chunks(conn, sid, relative_path))
        if held is None:
            await self.reread(sid, relative_path)
            stats.files_indexed += 1
            return
        parsed = snapshot.parsed
        lines = parsed.lines

        def compare() -> tuple[list[str], list[tuple[Chunk, str]]]:
            stale, fresh = difference.against_chunks(held, parsed.entries)
            return stale, difference.prepared(fresh, lines)

        stale, prepared = await asyncio.to_thread(compare)
        try:
            await self.db.write(
                lambda conn: writes.apply_long_term(
                    conn,
                    sid,
                    relative_path,
                    stale,
                    prepared,
                    lines,
                    (stamp[0], stamp[1]),
                    digest,
                    held=held,
                )
            )
        except writes.StaleDifference:
            # Another process indexed the file since `held` was read: the whole file,
            # replaced in one transaction, is right whatever it wrote.
            await self.reread(sid, relative_path)
            stats.files_indexed += 1
            return
        stats.files_indexed += 1
        stats.chunks_added += len(prepared)
        stats.chunks_removed += len(stale)

    async def write_summary(self, scope: ScopeKey, sid: int, long_term: LongTermSeen) -> None:
        """The scope's summary of its long-term file as read and of its folder as listed
        now (stat before listing), made as the listing makes it."""
        folder = await asyncio.to_thread(scope_folder_seen, self.ws, scope)
        stamp, payload = summary(folder, long_term)
        await self.db.write(partial(summaries.write, rows=[(sid, scope.value, stamp, payload)]))

    async def reread(self, sid: int, relative_path: str) -> None:
        """The whole file read, chunked and written again (or its chunks dropped)."""
        path = self.ws.root / relative_path
        item = await asyncio.to_thread(prepare_file, self.ws, path, self.zone)
        if item is not None:
            await self.write_file(sid, item, SyncStats())

    async def write_file(self, sid: int, item: PreparedFile, stats: SyncStats) -> None:
        await self.db.write(lambda conn: writes.replace_file(conn, sid, item, stats))
