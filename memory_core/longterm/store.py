"""MEMORY.md on disk: cached reads, and read-modify-write under the scope's locks.

Every write takes the scope's lock (tasks and processes), copies the current file to
`.bak`, writes a temp file, fsyncs and renames, so a crash at any instant leaves either
the old or the new file. Reads are cached by (mtime, size, inode) so a bot does not
re-parse a large file on every turn, yet sees edits made by a person or another process.

Where mtimes are coarse (kernels before 6.13 stamp files with the timer tick; some
filesystems keep seconds or two), an editor can rewrite a file in place with the same
size within one tick, and the stamp does not move. So a snapshot taken within
`RACY_NS` of its file's mtime ("racy", as git calls it) is confirmed by a hash of the
file before it is trusted again; once its mtime is older than that, the stamp alone
vouches for it, and the hot path stays one stat.

A file that is not all UTF-8 is served, not refused: its bytes are copied once beside it
(`MEMORY.md.undecodable-<hash>`), the blocks holding undecodable bytes are quarantined
with those bytes shown as `\\xNN`, and the rest is read as usual.

A large file's parse is also kept on disk (`parse_cache.py`), by the same rules, so that a
new process reads neither the file nor its blocks again when it has not changed, and
parses only the blocks that changed when it has.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from memory_core.base import safe_files
from memory_core.base.atomic import atomic_write_bytes, backup_then_write
from memory_core.base.clock import Monotonic, epoch_ns, system_monotonic
from memory_core.base.entries import MemoryEntry
from memory_core.base.errors import MemoryFileError
from memory_core.base.locks import LockRegistry
from memory_core.base.process_knobs import gc_paused
from memory_core.base.scope import ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.longterm import parse_cache, parse_delta, store_versions
from memory_core.longterm.cache_keeping import Keeping, PendingKeeps
from memory_core.longterm.entity_keeper import EntityKeeper
from memory_core.longterm.memory_md import QuarantinedBlock
from memory_core.longterm.memory_md_bytes import Segment, render_encoded
from memory_core.longterm.memory_md_parser import ParsedMemory, parse_memory
from memory_core.longterm.parse_cache import Base, CacheFiles, Mark
from memory_core.longterm.store_versions import RACY_NS as RACY_NS
from memory_core.longterm.store_versions import Stamp
from memory_core.longterm.store_versions import digest_of as _digest
from memory_core.longterm.store_versions import is_racy as _racy
from memory_core.longterm.store_versions import stamp_of as _stamp

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class FileRead:
    """A parsed file and the stat it was parsed at."""

    parsed: ParsedMemory
    stamp: Stamp | None
    digest: bytes | None = None
    """Hash of the bytes parsed (None for a missing file)."""
    racy: bool = False
    """Read within `RACY_NS` of the file's mtime: an equal stamp does not prove the same
    bytes, so the next check compares `digest` too."""
    parsed_blocks: int = 0
    """Blocks this read parsed (not taken from the parse cache): what a test counts."""
    from_cache: bool = False
    """The parse came whole from the parse cache."""
    utf8: bool = True
    """The bytes were all UTF-8 (else the blocks holding others are quarantined)."""
    base: Base | None = None
    """The parse cache's data file the next write's delta is made against (None: the
    next write keeps the whole parse)."""
    keys: list[bytes] | None = None
    """Each entry's block key in the order of `parsed.entries`, when the parse cache gave
    them (a write reusing a block need not hash it again)."""
    pieces: Sequence[Any] | None = None
    """The parse as pieces of a delta against `base` (`parse_delta`); None when it is the
    base's own parse, or not known."""


def read_memory_file(
    path: Path,
    archive_below: float,
    cache: CacheFiles | None = None,
    cache_min_bytes: int = parse_cache.MIN_BYTES,
    *,
    root: Path,
    warn: bool = True,
) -> FileRead:
    """Blocking read + parse; callers run it in a thread. With `cache`, a file of at least
    `cache_min_bytes` is read through its parse cache (`parse_cache.py`); `warn` logs
    each quarantined block. `root` is the workspace's: the file is read through its
    boundary (`safe_files`: no link out, no FIFO or device, at most LONG_TERM_BYTES)."""
    read_at = epoch_ns()  # before the stat: a write after it makes the read racy
    stamp = _stamp(root, path)
    if stamp is None:
        return FileRead(ParsedMemory(), None)
    if cache is not None and stamp[1] < cache_min_bytes:
        cache = None
    mark = parse_cache.read_mark(cache) if cache is not None else None
    cached = None
    if cache is not None and mark is not None and mark.stamp == stamp:
        cached = parse_delta.load(cache, archive_below, mark.digest)
        if cached is not None and cached.digest == mark.digest and not _racy(stamp, mark.known_ns):
            # The stamp vouches for the bytes: the file need not even be read.
            if warn:
                _warn_quarantined(path, cached.parsed)
            return FileRead(
                cached.parsed,
                stamp,
                cached.digest,
                from_cache=True,
                base=cached.base,
                keys=cached.keys,
                pieces=cached.pieces,
            )
    try:
        data = safe_files.read_bytes(root, path, safe_files.LONG_TERM_BYTES)
    except FileNotFoundError:
        return FileRead(ParsedMemory(), None)
    except OSError as exc:
        raise MemoryFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    digest = _digest(data)
    racy = _racy(stamp, read_at)
    if cache is not None:
        wanted = (digest,) if mark is None else (digest, mark.digest)
        cached = cached or parse_delta.load(cache, archive_below, *wanted)
        if cached is not None and cached.digest == digest:
            # The same bytes under another stamp (a copy, a restore, a racy record).
            parse_cache.save_mark(cache, Mark(stamp, digest, read_at))
            if warn:
                _warn_quarantined(path, cached.parsed)
            return FileRead(
                cached.parsed,
                stamp,
                digest,
                racy,
                from_cache=True,
                base=cached.base,
                keys=cached.keys,
                pieces=cached.pieces,
            )
    known = cached.by_key() if cached is not None else ({} if cache is not None else None)
    parsed, utf8 = _parse_bytes(root, path, data, archive_below, known)
    base = None
    if cache is not None:
        if utf8 and parse_cache.save(cache, parsed, Mark(stamp, digest, read_at), archive_below):
            base = parse_delta.base_of(parsed, digest)
        elif not utf8:
            parse_cache.forget(cache)
    if warn:
        _warn_quarantined(path, parsed)
    blocks = len(parsed.entries) + len(parsed.quarantined) - parsed.reused
    return FileRead(parsed, stamp, digest, racy, parsed_blocks=blocks, utf8=utf8, base=base)


def _warn_quarantined(path: Path, parsed: ParsedMemory) -> None:
    for block in parsed.quarantined:
        log.warning(
            "%s:%d: block quarantined (%s); it is kept verbatim, run `chatmem validate`",
            path,
            block.line,
            block.reason,
        )


def _refresh(
    root: Path,
    path: Path,
    cached: FileRead | None,
    archive_below: float,
    cache: CacheFiles | None = None,
    cache_min_bytes: int = parse_cache.MIN_BYTES,
) -> FileRead:
    """Blocking: `cached` while the file is still the one it was parsed from (the same
    object, so callers can compare parses by identity), else the file read again."""
    if cached is not None and _stamp(root, path) == cached.stamp:
        if not cached.racy:
            return cached
        read_at = epoch_ns()
        try:
            data = safe_files.read_bytes(root, path, safe_files.LONG_TERM_BYTES)
        except OSError:
            data = None  # gone or unreadable since the stat: read_memory_file says which
        if data is not None and _digest(data) == cached.digest:
            # Past the racy window now, the stamp alone will vouch for these bytes.
            return replace(cached, racy=_racy(cached.stamp, read_at), parsed_blocks=0)
    return read_memory_file(path, archive_below, cache, cache_min_bytes, root=root)


# --- files that are not all UTF-8 -------------------------------------------------------


def undecodable_copy_path(path: Path, data: bytes) -> Path:
    """Where the bytes of a file that is not all UTF-8 are kept: named by their hash, so
    each version of the file is copied once however often it is read."""
    return path.with_name(f"{path.name}.undecodable-{_digest(data).hex()[:16]}")


def _parse_bytes(
    root: Path,
    path: Path,
    data: bytes,
    archive_below: float,
    known: dict[bytes, MemoryEntry] | None = None,
) -> tuple[ParsedMemory, bool]:
    """The parse, and whether the bytes were all UTF-8 (only such a parse is cached)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _parse_undecodable(root, path, data, archive_below), False
    return parse_memory(text, archive_below=archive_below, known=known), True


def _parse_undecodable(root: Path, path: Path, data: bytes, archive_below: float) -> ParsedMemory:
    """Serve what decodes; quarantine each block holding bytes that do not, shown as
    `\\xNN` (the copy beside the file keeps them as they were)."""
    copy = undecodable_copy_path(path, data)
    if not copy.exists():
        try:
            atomic_write_bytes(copy, data, root=root)
        except OSError as exc:
            # Without the copy, the next write would lose the bytes: refuse instead.
            raise MemoryFileError(
                f"{path} is not all UTF-8 and its bytes cannot be kept in {copy.name}:"
                f" {exc.strerror or exc}"
            ) from exc
    # The parser splits at CRLF, CR and LF; so do we, so line numbers agree.
    raw_lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    lines: list[str] = []
    bad: list[int] = []
    for number, raw in enumerate(raw_lines, start=1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            lines.append(raw.decode("utf-8", "backslashreplace"))
            bad.append(number)
    parsed = parse_memory("\n".join(lines), archive_below=archive_below)
    reason = (
        f"bytes that are not UTF-8, shown as \\xNN (the file as it was: {copy.name});"
        " fix them and delete the \\ before ###"
    )

    def touches(first: int, last: int) -> bool:
        return any(first <= n <= last for n in bad)

    kept: list[MemoryEntry] = []
    quarantined: list[QuarantinedBlock] = []
    for entry in parsed.entries:
        first, last = parsed.lines[entry.id]
        if touches(first, last):
            # Escaped as the format escapes a content line starting with `#`: with its
            # bytes shown as `\\xNN` the block would parse, and the next read would take
            # the escapes for the text. It stays quarantined until a person fixes it.
            text = "\\" + "\n".join(lines[first - 1 : last])
            quarantined.append(QuarantinedBlock(text, first, reason))
            del parsed.lines[entry.id]
        else:
            kept.append(entry)
    for block in parsed.quarantined:
        if touches(block.line, block.line + block.text.count("\n")):
            block = QuarantinedBlock(block.text, block.line, f"{block.reason}; {reason}")
        quarantined.append(block)
    parsed.entries = kept
    parsed.quarantined = sorted(quarantined, key=lambda b: b.line)
    log.warning(
        "%s is not all UTF-8 (lines %s); its blocks there are quarantined, the file as it"
        " was is kept in %s",
        path,
        ", ".join(map(str, bad[:10])) + (" …" if len(bad) > 10 else ""),
        copy.name,
    )
    return parsed


@dataclass(frozen=True, slots=True)
class WriteRecord:
    """What the last write of a scope replaced and produced: enough for the index to update
    only the entries that changed, and to know whether it was in step with the old file."""

    before: ParsedMemory
    after: ParsedMemory
    before_stamp: Stamp | None
    after_stamp: Stamp | None
    segments: list[Segment] | None = None
    """How the write made `after` from `before`, when it copied its blocks."""


@dataclass(slots=True)
class ReadCounts:
    """What this store's reads cost, for tests and benches to assert on instead of time."""

    parsed_blocks: int = 0
    """Blocks parsed (neither remembered in this process nor found in the parse cache)."""
    cache_reads: int = 0
    """Reads the parse cache answered whole."""


class LongTermStore:
    def __init__(
        self,
        workspace: Workspace,
        locks: LockRegistry,
        archive_below: float = 0.2,
        *,
        monotonic: Monotonic = system_monotonic,
        parse_cache_min_bytes: int | None = parse_cache.MIN_BYTES,
    ) -> None:
        """`monotonic` times the `max_age` of a load (the hot path's stat interval);
        files of at least `parse_cache_min_bytes` keep their parse on disk (None: none do)."""
        self._ws = workspace
        self._monotonic = monotonic
        self.locks = locks
        self._archive_below = archive_below
        self._cache_min_bytes = parse_cache_min_bytes
        self._cache: dict[ScopeKey, FileRead] = {}
        self._checked_at: dict[ScopeKey, float] = {}
        self._loading: dict[ScopeKey, asyncio.Lock] = {}
        # Writes by this process, per scope: a load that one overtook keeps its snapshot.
        self._writes: dict[ScopeKey, int] = {}
        self.last_write: dict[ScopeKey, WriteRecord] = {}
        self.reads = ReadCounts()
        self.entities = EntityKeeper(archive_below)
        """Each scope's entities, kept beside its parse cache at every write."""
        self._keeps = PendingKeeps()

    def path(self, scope: ScopeKey) -> Path:
        return self._ws.long_term_path(scope)

    def cache_files(self, scope: ScopeKey) -> CacheFiles | None:
        """Where the scope's parse is kept; None when this store keeps none."""
        if self._cache_min_bytes is None:
            return None
        return parse_cache.files_for(self._ws, scope)

    def _read(self, scope: ScopeKey, cached: FileRead | None) -> FileRead:
        """Blocking: the scope's snapshot, fresh or `cached`, counted."""
        min_bytes = self._cache_min_bytes or 0
        snapshot = _refresh(
            self._ws.root,
            self.path(scope),
            cached,
            self._archive_below,
            self.cache_files(scope),
            min_bytes,
        )
        if snapshot is not cached:
            self.reads.parsed_blocks += snapshot.parsed_blocks
            self.reads.cache_reads += snapshot.from_cache
        return snapshot

    async def current(self, scope: ScopeKey) -> tuple[bytes | None, ParsedMemory | None]:
        """The hash of the file's bytes, and its parse when this process holds one: what
        a reader that keeps something per version (the entities) needs to find it, without
        loading the parse when the cache's stamp vouches for the file (a new process)."""
        await self._keeps.done(scope)
        if scope in self._cache:
            parsed = await self.load(scope)
            return self._cache[scope].digest, parsed
        digest = await asyncio.to_thread(self._vouched_digest, scope)
        if digest is not None:
            return digest, None
        parsed = await self.load(scope)
        return self._cache[scope].digest, parsed

    def _vouched_digest(self, scope: ScopeKey) -> bytes | None:
        """Blocking: the version the parse cache vouches the file holds (`vouched`)."""
        files, root = self.cache_files(scope), self._ws.root
        if files is None:
            return None
        return store_versions.vouched(root, self.path(scope), files, self._cache_min_bytes or 0)

    async def load(self, scope: ScopeKey, *, max_age: float = 0.0) -> ParsedMemory:
        """The scope's entries as on disk (parsed again only when the file changed).

        `max_age` lets a hot path (a chat turn) reuse a check made less than that many
        seconds ago instead of a stat per call; writes by this process are always seen.
        """
        await self._keeps.done(scope)
        cached = self._cache.get(scope)
        checked = self._checked_at.get(scope)
        if cached is not None and checked is not None and self._monotonic() - checked < max_age:
            return cached.parsed
        # One read of a scope at a time: a second reader (a capture while the open's
        # read-ahead runs) waits for the first's parse and finds it fresh with one stat,
        # instead of decoding the same large file beside it.
        async with self._loading.setdefault(scope, asyncio.Lock()):
            writes = self._writes.get(scope, 0)
            snapshot = await asyncio.to_thread(self._read, scope, self._cache.get(scope))
        self._checked_at[scope] = self._monotonic()
        if self._writes.get(scope, 0) != writes:
            # A write landed while this read ran: what it cached is at least as new as
            # what the read saw (which may be the file before it).
            return self._cache[scope].parsed
        self._cache[scope] = snapshot
        return snapshot.parsed

    async def update(
        self,
        scope: ScopeKey,
        change: Callable[[ParsedMemory], tuple[list[MemoryEntry], T]],
        now: datetime,
        *,
        quarantine: Sequence[QuarantinedBlock] = (),
    ) -> T:
        """Apply `change` to the current file under the scope's locks and write the result.

        `change` is pure: it gets what is on disk and returns the new entries plus any
        value for the caller. Quarantined blocks are carried over untouched, and
        `quarantine` (blocks an import could not read) added after them, each block whose
        text the file does not quarantine already.
        """
        async with self.locks.hold(self._ws.lock_name(scope, "memory")):
            await self._keeps.done(scope)
            # One worker call for the whole read-change-write: `change` is pure, and every
            # hop to a thread costs more than the small file's own I/O.
            before, after, result, keeping, segments = await asyncio.to_thread(
                self._apply, scope, change, now, quarantine
            )
            self.last_write[scope] = WriteRecord(
                before=ParsedMemory(before.parsed.entries, lines=before.parsed.lines),
                after=after.parsed,
                before_stamp=before.stamp,
                after_stamp=after.stamp,
                segments=segments,
            )
            if keeping is not None:
                self._keeps.start(scope, lambda: self._keep(scope, after, keeping))
            return result

    async def _keep(self, scope: ScopeKey, written: FileRead, keeping: Keeping) -> None:
        """The written version's parse and entities kept (`cache_keeping`); the next
        write's delta is made against the base they stand on."""
        kept = await asyncio.to_thread(keeping, scope.value, self.entities)
        if kept is not None and self._cache.get(scope) is written:
            self._cache[scope] = replace(written, base=kept[0], pieces=kept[1])

    async def kept(self) -> None:
        """Every write's parse and entities kept: a close waits for this."""
        await self._keeps.all_done()

    def _apply(
        self,
        scope: ScopeKey,
        change: Callable[[ParsedMemory], tuple[list[MemoryEntry], T]],
        now: datetime,
        quarantine: Sequence[QuarantinedBlock] = (),
    ) -> tuple[FileRead, FileRead, T, Keeping | None, list[Segment] | None]:
        self._ws.ensure_scope(scope)
        # A big file's read, change and write make millions of objects and no garbage
        # cycles worth a collector's pass over them all (a tenth of a close's CPU).
        with gc_paused():
            snapshot = self._read(scope, self._cache.get(scope))
            entries, result = change(snapshot.parsed)
            kept = list(snapshot.parsed.quarantined)
            held = {block.text for block in kept}
            kept += [block for block in quarantine if block.text not in held]
            after, keeping, segments = self._write(scope, entries, kept, now, snapshot)
        return snapshot, after, result, keeping, segments

    def _rendered_blocks(
        self, path: Path, before: FileRead | None
    ) -> store_versions.RenderedBlocks | None:
        """The blocks of the file as `before` read it, when the store's renderer wrote
        them (its parse cache says so) and the file still holds those bytes."""
        if before is None or before.base is None or not before.base.complete:
            return None
        keys = before.keys
        if keys is None and before.parsed.keys:
            known = before.parsed.keys
            keys = [known.get(e.id, b"") for e in before.parsed.entries]
            keys = None if b"" in keys else keys
        return store_versions.rendered_blocks(
            self._ws.root,
            path,
            before.digest,
            before.parsed,
            keys,
            stamp=None if before.racy else before.stamp,
        )

    def _write(
        self,
        scope: ScopeKey,
        entries: list[MemoryEntry],
        quarantined: list[QuarantinedBlock],
        now: datetime,
        before: FileRead | None = None,
    ) -> tuple[FileRead, Keeping | None, list[Segment] | None]:
        path = self.path(scope)
        files = self.cache_files(scope)
        min_bytes = self._cache_min_bytes or 0
        # A rendered entry takes more than 128 bytes: fewer than this cannot fill a file
        # the parse cache keeps, and need no block keys.
        keys: dict[str, bytes] | None = (
            {} if files is not None and len(entries) * 128 >= min_bytes else None
        )
        # The unchanged blocks' bytes are copied from the old file (`memory_md_bytes`).
        data, lines, ordered, segments = render_encoded(
            entries,
            quarantined,
            reuse=self._rendered_blocks(path, before),
            now=now,
            archive_below=self._archive_below,
            keys=keys,
        )
        _remove_stale_temps(safe_files.inside(self._ws.root, path))
        written_at = epoch_ns()
        digest = store_versions.hashed_while(
            data,
            partial(backup_then_write, path, data, self._ws.backup_path(scope), root=self._ws.root),
        )
        del data
        # The entries we rendered are what a re-read would give (the format round-trips),
        # so cache them against the new stat and spare the next load a parse.
        parsed = ParsedMemory(
            entries=ordered, quarantined=list(quarantined), lines=lines, keys=keys or {}
        )
        stamp = _stamp(self._ws.root, path)
        keeping = None
        if files is not None and stamp is not None:
            if keys is not None and stamp[1] >= min_bytes:
                # And the next process's: the parse cache, keyed as a parse keys blocks,
                # by difference from the data file the old version was read through; and
                # the new version's entities, by difference from the old version's. Kept
                # once the write returns (`cache_keeping`).
                keeping = Keeping(
                    files,
                    before.base if before is not None else None,
                    parsed,
                    Mark(stamp, digest, written_at),
                    self._archive_below,
                    before.parsed.entries if before is not None else None,
                    before.digest if before is not None else None,
                    _made(before, segments),
                )
            else:
                parse_cache.forget(files)
        snapshot = FileRead(parsed, stamp, digest, _racy(stamp, written_at))
        self._cache[scope] = snapshot
        self._writes[scope] = self._writes.get(scope, 0) + 1
        return snapshot, keeping, segments


def _made(before: FileRead | None, segments: list[Segment] | None) -> parse_delta.Made | None:
    """How a write that copied `before`'s blocks made its version, when the pieces of
    `before` against its base are known (or it is the base)."""
    if before is None or before.base is None or segments is None:
        return None
    if before.pieces is None and before.parsed.entries is not before.base.entries:
        return None
    return parse_delta.Made(segments, before.pieces, len(before.parsed.entries))


def _remove_stale_temps(path: Path) -> None:
    """Delete temp files (`.MEMORY.md.*.tmp`, `.MEMORY.md.bak.*.tmp`) left by writers that
    died mid-write. Only the holder of the scope's lock writes them, and we hold it."""
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        with contextlib.suppress(OSError):
            stale.unlink()
