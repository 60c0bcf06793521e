"""Which version of a long-term file is on disk, and what of it a write can reuse: the
stamp and hash rules of `store.py` (see its docstring for the racy window), the version
the parse cache vouches for without loading the parse (what a search needs to find the
entities kept for it), and the blocks of a file the store's renderer wrote.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from memory_core.base import safe_files
from memory_core.base.clock import epoch_ns
from memory_core.base.entries import MemoryEntry
from memory_core.base.errors import FileRefused
from memory_core.longterm import parse_cache
from memory_core.longterm.memory_md import ACTIVE, ARCHIVED
from memory_core.longterm.memory_md_parser import ParsedMemory
from memory_core.longterm.parse_cache import CacheFiles, Mark

Stamp = tuple[int, int, int]

RACY_NS = 2_000_000_000
"""The coarsest mtime granularity we allow for (FAT keeps two seconds): a file read this
close to its mtime may still change without its stamp changing."""


def stamp_of(root: Path, path: Path) -> Stamp | None:
    """The file's stamp; FileRefused when it leads outside `root` or is no regular file
    (so no stamp of an outside file ever vouches for a cached parse)."""
    st = safe_files.file_stat(root, path)
    if st is None:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def digest_of(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


PARALLEL_HASH_BYTES = 1 << 20
"""From this size on, `hashed_while` hashes in a thread of its own."""


def hashed_while(data: bytes, write: Callable[[], None]) -> bytes:
    """`digest_of(data)`, made while `write` runs: hashing and writing both let go of the
    interpreter, and on a 40 MB file each takes a twentieth of a second or more. A small
    file is hashed first (a thread would cost more than the hash)."""
    if len(data) < PARALLEL_HASH_BYTES:
        digest = digest_of(data)
        write()
        return digest
    with ThreadPoolExecutor(1, thread_name_prefix="chatmem-hash") as pool:
        hashing = pool.submit(digest_of, data)
        write()
        return hashing.result()


def is_racy_mtime(mtime_ns: int, read_at_ns: int) -> bool:
    """Read within `RACY_NS` of `mtime_ns`: the file may still change under the same stamp."""
    return read_at_ns - mtime_ns < RACY_NS


def is_racy(stamp: Stamp | None, read_at_ns: int) -> bool:
    return stamp is not None and is_racy_mtime(stamp[0], read_at_ns)


def vouched(root: Path, path: Path, files: CacheFiles, min_bytes: int) -> bytes | None:
    """Blocking: the hash of the bytes the file holds, as the parse cache's stamp vouches
    for it (the same stamp, recorded outside the racy window: one stat and the small
    stamp file) or, for another stamp (a copy, a restore) or a racy one, as hashing the
    file gives it (a tenth of the parse's cost; when it is the cached version, the new
    stamp vouches from now on, as `store.read_memory_file` does). None without a usable
    stamp file or for a file the cache does not keep."""
    try:
        stamp = stamp_of(root, path)
    except (OSError, FileRefused):
        return None
    if stamp is None or stamp[1] < min_bytes:
        return None
    read_at = epoch_ns()
    mark = parse_cache.read_mark(files)
    if mark is None:
        return None
    if mark.stamp == stamp and not is_racy(stamp, mark.known_ns):
        return mark.digest
    try:
        data = safe_files.read_bytes(root, path, safe_files.LONG_TERM_BYTES)
    except (OSError, FileRefused):
        return None
    digest = digest_of(data)
    if stamp_of(root, path) != stamp:
        return None
    if digest == mark.digest:
        parse_cache.save_mark(files, Mark(stamp, digest, read_at))
    return digest


class RenderedBlocks:
    """The blocks of a file the store's renderer wrote, for the very entry objects of
    the parse read from it: what rendering those entries gives, and their block keys
    (known from the parse cache: a write need not hash the blocks it reuses). Holds the
    file's bytes: a write copies their unchanged ranges (`memory_md_bytes`); the lines
    are decoded only for the render by lines, its fallback."""

    __slots__ = ("_archived_at", "_lines", "data", "entries", "keys", "places", "spans")

    def __init__(
        self,
        data: bytes,
        entries: Sequence[MemoryEntry],
        spans: Sequence[tuple[int, int] | None],
        keys: Sequence[bytes] | None,
    ) -> None:
        self.data = data
        self.entries = entries
        """The parse's entries, in its order."""
        self.spans = spans
        """Each entry's lines (first and last, 1-based), in the order of the parse."""
        self.keys = keys
        """Each entry's block key in the order of the parse, when known."""
        self.places = dict(zip(map(id, entries), range(len(entries)), strict=True))
        """id(entry) → its place in the parse (check the entry is the very object)."""
        self._lines: list[str] | None = None
        self._archived_at: int | None = None

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = self.data.decode("utf-8").split("\n")
        return self._lines

    @property
    def archived_at(self) -> int:
        """The line of the archived section's heading (past the end when none)."""
        if self._archived_at is None:
            found = line_index(self.data, f"## {ARCHIVED}".encode())
            self._archived_at = found + 1 if found is not None else self.data.count(b"\n") + 2
        return self._archived_at

    def place(self, entry: MemoryEntry) -> int | None:
        """The entry's place in the parse, for the very entry object of the parse."""
        place = self.places.get(id(entry))
        return place if place is not None and self.entries[place] is entry else None

    def __call__(self, entry: MemoryEntry) -> tuple[str, ...] | None:
        place = self.place(entry)
        span = self.spans[place] if place is not None else None
        if span is None:
            return None
        first, last = span
        found = tuple(self.lines[first - 1 : last + 1])
        if len(found) < 3 or found[-1] != "" or not found[0].startswith("### ["):
            return None
        return found

    def key(self, entry: MemoryEntry, section: str) -> bytes | None:
        """The key of the entry's block (given by `__call__`) in `section`: the one the
        parse cache holds when the block stays in the section it was in."""
        place = self.place(entry)
        if self.keys is None or place is None:
            return None
        span = self.spans[place]
        if span is None:
            return None
        was = ARCHIVED if span[0] > self.archived_at else ACTIVE
        return self.keys[place] if was == section else None


def line_offset(data: bytes, line: bytes) -> int | None:
    """Where the first line of `data` (split at "\\n") equal to `line` starts, found
    without splitting; None when no line is."""
    if data.startswith(line + b"\n") or data == line:
        return 0
    at = data.find(b"\n" + line + b"\n")
    if at >= 0:
        return at + 1
    if len(data) > len(line) and data.endswith(b"\n" + line):
        return len(data) - len(line)
    return None


def line_index(data: bytes, line: bytes) -> int | None:
    """The index of that line, as `data.split(b"\\n").index(line)` gives it."""
    at = line_offset(data, line)
    return None if at is None else data.count(b"\n", 0, at)


def rendered_blocks(
    root: Path,
    path: Path,
    digest: bytes | None,
    parsed: ParsedMemory,
    keys: Sequence[bytes] | None = None,
    *,
    stamp: Stamp | None = None,
) -> RenderedBlocks | None:
    """Each entry's block in the file `parsed` was read from, for the very entry objects
    of `parsed`, when the file still holds those bytes (`digest`): the caller knows the
    store's renderer wrote them (`parse_cache.Base.complete`), so they are what rendering
    those entries gives. A write then renders only the entries it changed, and with
    `keys` (each entry's block key, in the order of `parsed.entries`) hashes only those.

    `stamp`: the file's stamp when `digest` was read, outside the racy window (None
    when racy or unknown). The file still showing it after the read vouches for the
    bytes as it does for a read (`store.py`), and spares hashing 40 MB."""
    if digest is None:
        return None
    try:
        data = safe_files.read_bytes(root, path, safe_files.LONG_TERM_BYTES)
    except (OSError, FileRefused):
        return None
    vouched = stamp is not None and _stamp_after(root, path) == stamp
    if not vouched and digest_of(data) != digest:
        return None
    return blocks_of(data, parsed, keys)


def _stamp_after(root: Path, path: Path) -> Stamp | None:
    """The file's stamp now (None when it cannot be had: then the bytes are hashed)."""
    try:
        return stamp_of(root, path)
    except (OSError, FileRefused):
        return None


def blocks_of(
    data: bytes, parsed: ParsedMemory, keys: Sequence[bytes] | None = None
) -> RenderedBlocks:
    """`rendered_blocks` of bytes known to be the file `parsed` was read from."""
    known = parsed.lines.get
    spans = [known(e.id) for e in parsed.entries]
    if keys is not None and len(keys) != len(parsed.entries):
        keys = None
    return RenderedBlocks(data, parsed.entries, spans, keys)
