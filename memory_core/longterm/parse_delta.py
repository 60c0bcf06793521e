"""A large long-term file's parse cache written by difference.

A capture changes a few entries of what may be 100 000, yet writing the whole parse again
(`parse_cache.save`) costs most of a second and a copy of it in memory at every write. So a
write whose file still stands on the data file it was read through (the *base*) leaves
beside it `<slug>.delta`: the new version described against the base, as

* pieces in the new order: a run of the base's entries (`start`, `count`, and how many
  lines they moved), one new entry (its row, normalised text, skeleton, entities, block
  key and lines, as the data file keeps them), or one entry whose text the base holds
  (a rescore, a reinforcement: its row, block key and lines; what is derived from its
  text a reader has from the base);
* the quarantined blocks (few, kept whole), the base's hash and the new version's hash.

Each write replaces the delta with one against the same base, so a delta is never applied
to another delta. When its new entries pass `COMPACT_SHARE` of the base (many captures
piled up), or its entries of known texts `RESCORED_SHARE` (a day's decay rescored most of
the file), the whole parse is written as the new base instead, and the delta removed. A
delta whose base, format or hash does not fit is ignored (the base still serves the parse
of the changed blocks): a torn write costs that parse and nothing else.
"""

from __future__ import annotations

import logging
import marshal
from typing import Any

from memory_core.base.entries import MemoryEntry
from memory_core.base.errors import FileRefused
from memory_core.base.process_knobs import gc_paused
from memory_core.longterm import parse_cache
from memory_core.longterm.memory_md import QuarantinedBlock
from memory_core.longterm.memory_md_parser import ParsedMemory
from memory_core.longterm.parse_cache import Base, CachedParse, CacheFiles, Mark

log = logging.getLogger(__name__)

_TAG = "chatmem-parse-delta-2"
"""2: entries of a known text (`KNOWN_TEXT`) kept by their row alone."""
COMPACT_SHARE = 0.05
"""A delta holding new entries for more than this share of its base's is not written: the
whole parse is (loading a delta costs its new entries' decoding on top of the base's)."""
RESCORED_SHARE = 0.5
"""The same for entries of a text the base holds: each costs a reader one row's decoding,
a tenth of a new entry's (decay rescores a few percent of a large file every hour)."""
NEW_ENTRY = -1
KNOWN_TEXT = -2

Piece = (
    tuple[int, int, int]
    | tuple[int, Any, str, Any, Any, bytes, tuple[int, int]]
    | tuple[int, Any, bytes, tuple[int, int]]
)
"""`(start, count, shift)`: base entries start..start+count, their lines moved by shift;
`(NEW_ENTRY, row, norm, skeleton, named, key, lines)`: a new entry; or `(KNOWN_TEXT, row,
key, lines)`: an entry whose text the base holds."""


def encode(base: Base, parsed: ParsedMemory, digest: bytes, archive_below: float) -> bytes | None:
    """The delta file's bytes for `parsed` (which carries every entry's block key) against
    `base`; None when the whole parse should be written instead."""
    keys = parsed.keys
    entries = parsed.entries
    if any(e.id not in keys for e in entries):
        return None
    positions = base.positions()
    pieces: list[list[Any]] = []
    fresh: list[MemoryEntry] = []
    fresh_pieces: list[list[Any]] = []
    most = COMPACT_SHARE * len(base.keys)
    most_known = RESCORED_SHARE * len(base.keys)
    known = 0
    for entry in entries:
        key = keys[entry.id]
        first, last = parsed.lines.get(entry.id, (0, 0))
        place = positions.get(key)
        if place is not None:
            base_first, base_last = base.lines[place]
            shift = first - base_first
            if last - base_last == shift:
                if pieces:
                    prev = pieces[-1]
                    if prev[0] >= 0 and prev[0] + prev[1] == place and prev[2] == shift:
                        prev[1] += 1
                        continue
                pieces.append([place, 1, shift])
                continue
        if not parse_cache.plain(entry):
            return None
        if entry.content in base.contents():  # made once per base, at its first need
            known += 1
            if known > most_known:
                return None
            pieces.append([KNOWN_TEXT, parse_cache.row_of(entry), key, (first, last)])
            continue
        if len(fresh) >= most:
            return None
        fresh.append(entry)
        piece: list[Any] = [NEW_ENTRY, parse_cache.row_of(entry), key, (first, last)]
        fresh_pieces.append(piece)
        pieces.append(piece)
    norms, skeletons, named = parse_cache.derived(fresh, complete=True)
    for piece, norm, skeleton, names in zip(fresh_pieces, norms, skeletons, named, strict=True):
        piece[1:2] = [piece[1], norm, skeleton, names]
    body = (
        parse_cache.file_format(),
        _TAG,
        archive_below,
        base.digest,
        digest,
        [tuple(p) for p in pieces],
        [(q.text, q.line, q.reason) for q in parsed.quarantined],
    )
    return marshal.dumps(body)


def apply(cached: CachedParse, data: bytes) -> CachedParse | None:
    """The version the delta's bytes describe against `cached` (a base as read from its
    data file); None when they are not a delta of that base in this format."""
    with gc_paused():
        return _apply(cached, data)


def _apply(cached: CachedParse, data: bytes) -> CachedParse | None:
    base = cached.base
    try:
        body = marshal.loads(data)
        if not isinstance(body, tuple) or len(body) != 7:
            return None
        form, tag, archive_below, base_digest, digest, pieces, quarantined = body
        if (form, tag, archive_below, base_digest) != (
            parse_cache.file_format(),
            _TAG,
            cached.archive_below,
            base.digest,
        ):
            return None
        base_entries = cached.parsed.entries
        entries: list[MemoryEntry] = []
        keys: list[bytes] = []
        lines: dict[str, tuple[int, int]] = {}
        fresh: list[MemoryEntry] = []
        norms: list[str] = []
        skeletons: list[Any] = []
        named: list[Any] = []
        for piece in pieces:
            if piece[0] >= 0:
                start, count, shift = piece
                if count < 1 or start + count > len(base_entries):
                    return None
                for place in range(start, start + count):
                    entry = base_entries[place]
                    first, last = base.lines[place]
                    entries.append(entry)
                    keys.append(base.keys[place])
                    lines[entry.id] = (first + shift, last + shift)
                continue
            if piece[0] == KNOWN_TEXT:
                _, row, key, (first, last) = piece
                entry = parse_cache.entry_of(row)
                if entry.content not in base.contents():
                    return None
                entries.append(entry)
                keys.append(bytes(key))
                lines[entry.id] = (int(first), int(last))
                continue
            _, row, norm, known, names, key, (first, last) = piece
            entry = parse_cache.entry_of(row)
            entries.append(entry)
            keys.append(bytes(key))
            lines[entry.id] = (int(first), int(last))
            fresh.append(entry)
            norms.append(norm)
            skeletons.append(known)
            named.append(names)
        parse_cache.remember(fresh, norms, skeletons, named)
        parsed = ParsedMemory(
            entries=entries,
            quarantined=[QuarantinedBlock(t, n, r) for t, n, r in quarantined],
            lines=lines,
        )
        return CachedParse(parsed, bytes(digest), cached.archive_below, keys, base)
    except (EOFError, ValueError, TypeError, KeyError, IndexError) as exc:
        log.info("long-term parse cache delta unreadable, parsing the changes (%s)", exc)
        return None


def load(files: CacheFiles, archive_below: float, *wanted: bytes) -> CachedParse | None:
    """The cached parse (blocking): the base, with the delta applied when it is a delta
    of that base to one of the `wanted` versions (the file's, the stamp's: the last
    write); None when the base is unusable."""
    cached = parse_cache.load(files, archive_below)
    if cached is None or cached.digest in wanted:
        return cached
    try:
        data = parse_cache.read_file(files.delta)
    except (OSError, FileRefused):
        return cached
    applied = apply(cached, data)
    return applied if applied is not None and applied.digest in wanted else cached


def save(
    files: CacheFiles,
    base: Base | None,
    parsed: ParsedMemory,
    mark: Mark,
    archive_below: float,
) -> Base | None:
    """A written version's parse kept: as a delta against `base` when it is small enough,
    else whole as a new base. The base the cache now stands on; None when nothing could
    be written (the next process parses)."""
    if base is not None and base.complete:
        data = encode(base, parsed, mark.digest, archive_below)
        if data is not None:
            if parse_cache.write_file(files.delta, data) and parse_cache.save_mark(files, mark):
                return base
            return None
    if not parse_cache.save(files, parsed, mark, archive_below, complete=True):
        return None
    return base_of(parsed, mark.digest, complete=True)


def base_of(parsed: ParsedMemory, digest: bytes, *, complete: bool = False) -> Base | None:
    """The base a whole parse just written makes (None when it lacks a block key)."""
    keys = parsed.keys
    entries = parsed.entries
    if any(e.id not in keys for e in entries):
        return None
    return Base(
        digest,
        [keys[e.id] for e in entries],
        [parsed.lines.get(e.id, (0, 0)) for e in entries],
        complete,
        entries,
    )
