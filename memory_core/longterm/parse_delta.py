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
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from memory_core.base.entries import MemoryEntry
from memory_core.base.errors import FileRefused
from memory_core.base.process_knobs import gc_paused
from memory_core.longterm import parse_cache
from memory_core.longterm.memory_md import QuarantinedBlock
from memory_core.longterm.memory_md_bytes import Segment
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
    pieces = describe(base, parsed)
    return None if pieces is None else body_of(base, parsed, digest, archive_below, pieces)


def body_of(
    base: Base, parsed: ParsedMemory, digest: bytes, archive_below: float, pieces: list[Any]
) -> bytes:
    """The delta file's bytes for `parsed`, described against `base` by `pieces`."""
    body = (
        parse_cache.file_format(),
        _TAG,
        archive_below,
        base.digest,
        digest,
        pieces,
        [(q.text, q.line, q.reason) for q in parsed.quarantined],
    )
    return marshal.dumps(body)


def describe(base: Base, parsed: ParsedMemory) -> list[Any] | None:
    """`parsed` as pieces against `base`, every entry looked up there by its block key;
    None when the whole parse should be written instead."""
    keys = parsed.keys
    entries = parsed.entries
    if any(e.id not in keys for e in entries):
        return None
    positions = base.positions()
    out = _Pieces(base)
    for entry in entries:
        key = keys[entry.id]
        first, last = parsed.lines.get(entry.id, (0, 0))
        place = positions.get(key)
        if place is not None:
            base_first, base_last = base.lines[place]
            shift = first - base_first
            if last - base_last == shift:
                out.run(place, 1, shift)
                continue
        if not out.entry(entry, key, (first, last)):
            return None
    return out.done()


def compose(base: Base, made: Made, parsed: ParsedMemory) -> list[Any] | None:
    """`describe(base, parsed)` by what the write did instead of by every entry: `parsed`
    is made of `made.segments` of the old version, which `made.old` (its pieces, None
    when it is the base itself) describes against `base`. A copied range takes its
    pieces, moved; an entry rendered anew becomes a piece of its own (even one whose
    block the base holds after all: a piece of a known text, which reads back the same).
    None when the whole parse should be written instead, or when composing does not
    apply (an id twice, or pieces that do not cover the old version): `describe` decides."""
    if len(parsed.lines) != len(parsed.entries):
        return None
    old = made.old
    ends = list(accumulate(1 if p[0] < 0 else p[1] for p in old)) if old is not None else []
    covered = ends[-1] if ends else (len(base.keys) if old is None else 0)
    if covered != made.old_count:
        return None
    keys, lines = parsed.keys, parsed.lines
    out = _Pieces(base)
    for segment in made.segments:
        if not isinstance(segment, tuple):
            key = keys.get(segment.id)
            if key is None or not out.entry(segment, key, lines.get(segment.id, (0, 0))):
                return None
            continue
        start, stop, shift = segment
        if old is None:
            out.run(start, stop - start, shift)
            continue
        at = bisect_right(ends, start)
        while start < stop:
            piece = old[at]
            if piece[0] >= 0:  # a run of the base's entries: the part copied
                offset = start - (ends[at] - piece[1])
                count = min(stop, ends[at]) - start
                out.run(piece[0] + offset, count, piece[2] + shift)
                start += count
            elif not out.moved(piece, shift):
                return None
            else:
                start += 1
            at += 1
    return out.done()


class _Pieces:
    """Pieces against a base, in the new order, and the limits past which the whole parse
    is written instead (`COMPACT_SHARE`, `RESCORED_SHARE`)."""

    def __init__(self, base: Base) -> None:
        self.base = base
        self.pieces: list[list[Any]] = []
        self.fresh: list[MemoryEntry] = []
        self.fresh_pieces: list[list[Any]] = []
        self.new = 0
        self.known = 0
        self.most = COMPACT_SHARE * len(base.keys)
        self.most_known = RESCORED_SHARE * len(base.keys)

    def run(self, place: int, count: int, shift: int) -> None:
        """Base entries place..place+count, their lines moved by `shift`: one piece with
        the run before when it goes on from it."""
        pieces = self.pieces
        if pieces:
            prev = pieces[-1]
            if prev[0] >= 0 and prev[0] + prev[1] == place and prev[2] == shift:
                prev[1] += count
                return
        pieces.append([place, count, shift])

    def entry(self, entry: MemoryEntry, key: bytes, lines: tuple[int, int]) -> bool:
        """One entry the base does not hold as it is now; False past a limit."""
        if not parse_cache.plain(entry):
            return False
        known = entry.content in self.base.contents()  # made once per base, at its first need
        if not self._counted(known):
            return False
        if known:
            self.pieces.append([KNOWN_TEXT, parse_cache.row_of(entry), key, lines])
            return True
        self.fresh.append(entry)
        piece: list[Any] = [NEW_ENTRY, parse_cache.row_of(entry), key, lines]
        self.fresh_pieces.append(piece)
        self.pieces.append(piece)
        return True

    def moved(self, piece: Sequence[Any], shift: int) -> bool:
        """An entry piece of the old version, its lines moved by `shift`; False past a
        limit."""
        if not self._counted(piece[0] == KNOWN_TEXT):
            return False
        first, last = piece[-1]
        self.pieces.append([*piece[:-1], (first + shift, last + shift)])
        return True

    def _counted(self, known: bool) -> bool:
        """One more piece of a known text (`known`) or of a new entry; False past its
        limit."""
        if known:
            self.known += 1
            return self.known <= self.most_known
        if self.new >= self.most:
            return False
        self.new += 1
        return True

    def done(self) -> list[Any]:
        """The pieces as the delta file holds them (the new entries' derived values in)."""
        norms, skeletons, named = parse_cache.derived(self.fresh, complete=True)
        for piece, norm, skeleton, names in zip(
            self.fresh_pieces, norms, skeletons, named, strict=True
        ):
            piece[1:2] = [piece[1], norm, skeleton, names]
        return [tuple(p) for p in self.pieces]


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
        return CachedParse(parsed, bytes(digest), cached.archive_below, keys, base, pieces)
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


@dataclass(frozen=True, slots=True)
class Made:
    """How a write made its version from the one it replaced: what `compose` needs."""

    segments: Sequence[Segment]
    old: Sequence[Any] | None
    """The replaced version's pieces against the base; None when it was the base."""
    old_count: int
    """The replaced version's number of entries."""


Kept = tuple[Base, Sequence[Any] | None]
"""The base the parse cache stands on, and the pieces of the kept version against it
(None: it is the base)."""


def save(
    files: CacheFiles,
    base: Base | None,
    parsed: ParsedMemory,
    mark: Mark,
    archive_below: float,
    made: Made | None = None,
) -> Kept | None:
    """A written version's parse kept: as a delta against `base` when it is small enough,
    else whole as a new base; None when nothing could be written (the next process
    parses). With `made`, the delta is composed from it (`compose`), not from every entry."""
    if base is not None and base.complete:
        pieces = compose(base, made, parsed) if made is not None else None
        if pieces is None:
            pieces = describe(base, parsed)
        if pieces is not None:
            data = body_of(base, parsed, mark.digest, archive_below, pieces)
            if parse_cache.write_file(files.delta, data) and parse_cache.save_mark(files, mark):
                return base, pieces
            return None
    if not parse_cache.save(files, parsed, mark, archive_below, complete=True):
        return None
    made_base = base_of(parsed, mark.digest, complete=True)
    return None if made_base is None else (made_base, None)


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
