"""`render_memory_lines`, encoded, for a write that keeps most blocks of the file it
replaces: the unchanged blocks' bytes are copied from the old file in runs, never decoded
and joined again (on a 40 MB file, decoding it into lines and joining them cost a close
more than half a second).

Exact or nothing: the bytes are `render_memory_lines(..., reuse=old)[0].encode()` byte
for byte, with the same positions and keys; where a block is not where the parse says
(the file is not the one its parse was read from after all), the caller renders by lines.
`tests/unit/test_memory_md_bytes.py` compares both ways over random writes.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from datetime import datetime
from itertools import accumulate, repeat
from operator import add, eq, gt, sub
from typing import NamedTuple

from memory_core.base.entries import MemoryEntry
from memory_core.longterm.memory_md import (
    ACTIVE,
    ARCHIVED,
    QuarantinedBlock,
    block_key,
)
from memory_core.longterm.memory_md_renderer import (
    end_lines,
    entry_block,
    head_lines,
    quarantine_lines,
    render_memory_lines,
    split_sections,
)
from memory_core.longterm.store_versions import RenderedBlocks, line_offset

Segment = tuple[int, int, int] | MemoryEntry
"""A part of a written file, in its order: `(start, stop, shift)`, the old file's blocks at
places start..stop-1 of its parse, copied in the same section (their block keys kept) with
their lines moved by `shift`; or one entry whose block was made anew or changed section."""


class Rendered(NamedTuple):
    data: bytes
    lines: dict[str, tuple[int, int]]
    """Each entry's first and last line."""
    ordered: list[MemoryEntry]
    """The entries in the file's order."""
    segments: list[Segment] | None = None
    """What the file is made of (`Segment`), when it was written by copying the old file's
    blocks and the block keys were asked for: what a delta of the parse cache is made
    from without comparing every entry (`parse_delta.compose`)."""


class _Unproven(Exception):
    """The old file does not hold a block where its parse says."""


_BLANK_HEADER = re.compile(rb"\n\n### \[")


def _blank_headers(data: bytes, firsts: list[int]) -> list[int]:
    """Per place of the parse, where the empty line before its entry's header starts:
    shown in C for all at once, by one scan for the header lines that follow an empty
    line and a count of the newlines between them, to be the lines the parse says, in
    its order (a file the renderer wrote has no other such line before its quarantined
    section). Raises _Unproven otherwise (render it by lines)."""
    found = [at.start() + 1 for at in _BLANK_HEADER.finditer(data)]
    count = len(firsts)
    if len(found) < count:
        raise _Unproven
    del found[count:]
    # lines[n]: the newlines before the n-th empty line, its line (0-based), which is
    # the entry's first line (1-based) less two.
    lines = accumulate(map(data.count, repeat(b"\n"), [0, *found[:-1]], found))
    if not all(map(eq, lines, map(sub, firsts, repeat(2)))):
        raise _Unproven
    return found


def _line_at(data: bytes, blanks: list[int], firsts: list[int], offset: int) -> int:
    """The line (0-based) holding byte `offset`: counted from the nearest empty line
    before it whose line `_blank_headers` knows."""
    n = bisect_left(blanks, offset)
    if n == 0:
        return data.count(b"\n", 0, offset)
    return firsts[n - 1] - 2 + data.count(b"\n", blanks[n - 1], offset)


class _Writer:
    """The new file's bytes, in order: runs of the old file's adjacent blocks (slices of
    it) and encoded text; each entry's lines and key on the way."""

    def __init__(self, old: RenderedBlocks, keys: dict[str, bytes] | None, line: int) -> None:
        self.old = old
        self.data = data = old.data
        self.view = memoryview(data)
        spans = old.spans
        if None in spans:
            raise _Unproven  # an entry the parse has no lines for: render by lines
        firsts, lasts = (list(side) for side in zip(*spans, strict=True)) if spans else ([], [])
        self.firsts, self.lasts = firsts, lasts
        if not all(map(gt, lasts, firsts)):  # three lines at least
            raise _Unproven
        self.blanks = _blank_headers(data, firsts)
        # joined[n]: the blocks at places n and n + 1 are adjacent in the file (so one
        # range holds both, the first ending in the empty line before the second's header).
        self.joined = list(map(eq, map(add, lasts, repeat(2)), firsts[1:]))
        self.joined.append(False)
        self.keys = keys
        self.line = line
        self.positions: dict[str, tuple[int, int]] = {}
        self.pieces: list[bytes | memoryview] = []
        self.segments: list[Segment] | None = [] if keys is not None else None
        self.start = self.end = 0  # the run of old bytes not yet in `pieces`
        self._archived_at: int | None = None

    @property
    def archived_at(self) -> int:
        """`RenderedBlocks.archived_at`, the heading's line counted from a block near it."""
        if self._archived_at is None:
            data = self.data
            at = line_offset(data, f"## {ARCHIVED}".encode())
            if at is None:
                self._archived_at = _line_at(data, self.blanks, self.firsts, len(data)) + 2
            else:
                self._archived_at = _line_at(data, self.blanks, self.firsts, at) + 1
        return self._archived_at

    def text(self, lines: Sequence[str]) -> None:
        """Lines with more lines after them: each ends in a newline."""
        self.flush()
        self.pieces.append(("\n".join(lines) + "\n").encode("utf-8"))

    def flush(self) -> None:
        if self.end > self.start:
            self.pieces.append(self.view[self.start : self.end])
        self.start = self.end = 0

    def entries(self, members: Sequence[MemoryEntry], section: str) -> None:
        """Put out each entry's block: the old file's bytes for a block the parse places
        there (what `RenderedBlocks.__call__` gives by lines), else rendered. Entries that
        were adjacent in the old file and still are go as one run: their lines and keys
        by slices of the parse's, their bytes as one range."""
        old, archived = self.old, section == ARCHIVED
        places = list(map(old.places.get, map(id, members), repeat(-1)))
        olds = old.entries
        same = [
            place >= 0 and olds[place] is entry
            for place, entry in zip(places, members, strict=True)
        ]
        joined = self.joined
        # chained[k]: members k and k + 1 were adjacent blocks of the old file, in order.
        chained = [
            place >= 0 and later == place + 1 and was and joined[place]
            for place, later, was in zip(places, places[1:], same[1:], strict=False)
        ]
        chained.append(False)
        blanks, firsts, lasts = self.blanks, self.firsts, self.lasts
        positions, keys, old_keys = self.positions, self.keys, old.keys
        archived_at = self.archived_at if keys is not None else 0
        size = len(self.data)
        k, count = 0, len(members)
        while k < count:
            place = places[k]
            if not same[k]:
                self._fresh(members[k], section)
                k += 1
                continue
            at = blanks[place] + 1
            last = chained.index(False, k)
            end_place = place + last - k + 1
            shift = self.line + 1 - firsts[place]
            if last == k:  # most runs of a write that rescored a few entries in many
                ids = [members[k].id]
                positions[ids[0]] = (firsts[place] + shift, lasts[place] + shift)
            else:
                ids = [entry.id for entry in members[k : last + 1]]
                moved = zip(
                    map(add, firsts[place:end_place], repeat(shift)),
                    map(add, lasts[place:end_place], repeat(shift)),
                    strict=True,
                )
                positions.update(zip(ids, moved, strict=True))
            stop = self._stop(end_place - 1)
            final = lasts[end_place - 1]
            self.line += final + 2 - firsts[place]
            if keys is not None:
                assert self.segments is not None
                known = None
                kept_section = (firsts[place] > archived_at) == archived
                if kept_section:
                    self.segments.append((place, end_place, shift))
                else:  # the same bytes under another section's key
                    self.segments += members[k : last + 1]
                if old_keys is not None and kept_section:
                    known = old_keys[place:end_place]
                if known is not None and all(known):
                    keys.update(zip(ids, known, strict=True))
                else:
                    self._keys(ids, place, section)
            # The run is data[at:stop] and a newline (the end of its last empty line).
            if stop == size:  # the old file's last block: its empty line ended it
                self.flush()
                self.pieces += (self.view[at:stop], b"\n")
            elif at == self.end and self.end > self.start:
                self.end = stop + 1
            else:
                self.flush()
                self.start, self.end = at, stop + 1
            k = last + 1

    def _fresh(self, entry: MemoryEntry, section: str) -> None:
        block = entry_block(entry)
        self.positions[entry.id] = (self.line + 1, self.line + len(block) - 1)
        self.line += len(block)
        if self.keys is not None:
            self.keys[entry.id] = block_key(section, block)
        if self.segments is not None:
            self.segments.append(entry)
        self.text(block)

    def _keys(self, ids: list[str], place: int, section: str) -> None:
        """The keys of a run's blocks: the parse's when they stay in their section."""
        assert self.keys is not None
        old_keys, end_place = self.old.keys, place + len(ids)
        was = ARCHIVED if self.firsts[place] > self.archived_at else ACTIVE
        if old_keys is not None and was == section:
            known = old_keys[place:end_place]
            if all(known):
                self.keys.update(zip(ids, known, strict=True))
                return
        for n, entry_id in enumerate(ids, place):
            key = old_keys[n] if old_keys is not None and was == section else None
            start = self.blanks[n] + 1
            self.keys[entry_id] = key or block_key(section, self.lines(start, self._stop(n)))

    def _stop(self, n: int) -> int:
        """The start of the empty last line of the block at place `n` of the parse."""
        if self.joined[n]:  # the empty line before the next block's header
            return self.blanks[n + 1]
        return self._step(self.blanks[n] + 1, self.lasts[n] - self.firsts[n] + 1)

    def _step(self, start: int, lines: int) -> int:
        """The start of the line `lines` lines below the one at `start`, which must be
        empty (the file's end counts as an empty last line)."""
        data, at = self.data, start
        for _ in range(lines):
            at = data.find(b"\n", at) + 1
            if at == 0:
                raise _Unproven
        if at < len(data) and data[at] != 10:
            raise _Unproven
        return at

    def lines(self, start: int, stop: int) -> list[str]:
        """A block of the old file's lines, decoded (its empty last line included)."""
        return self.data[start:stop].decode("utf-8").split("\n")

    def last(self, entry: MemoryEntry, section: str) -> list[str]:
        """The last entry's block, as lines (put out with the text's end)."""
        self.flush()
        self.entries((entry,), section)
        if self.end > self.start:  # it was the old file's: take it back as lines
            lines = self.lines(self.start, self.end - 1)
            self.start = self.end = 0
            return lines
        last = self.pieces.pop()
        if last == b"\n":  # the old file's last block, put out with its newline
            return bytes(self.pieces.pop()).decode("utf-8").split("\n")
        return list(entry_block(entry))


def render_memory_bytes(
    entries: Sequence[MemoryEntry],
    quarantined: Sequence[QuarantinedBlock],
    *,
    old: RenderedBlocks,
    now: datetime | None = None,
    archive_below: float = 0.2,
    keys: dict[str, bytes] | None = None,
) -> Rendered | None:
    """`render_memory_lines(entries, quarantined, reuse=old, reuse_key=old.key, ...)`,
    its text encoded in UTF-8, and the entries in the file's order; None when the old
    file does not hold the blocks its parse places (render by lines then; `keys` is
    emptied)."""
    try:
        return _render(entries, quarantined, old, now, archive_below, keys)
    except _Unproven:
        if keys is not None:
            keys.clear()
        return None


def _render(
    entries: Sequence[MemoryEntry],
    quarantined: Sequence[QuarantinedBlock],
    old: RenderedBlocks,
    now: datetime | None,
    archive_below: float,
    keys: dict[str, bytes] | None,
) -> Rendered:
    active, archived = split_sections(entries, archive_below)
    head = head_lines(len(entries), now)
    out = _Writer(old, keys, len(head))
    out.text(head)
    out.entries(active, ACTIVE)
    # The last block, or the archived heading when it is last, is rendered as lines with
    # what follows it, so that the text ends as the renderer ends it (`end_lines`).
    heading = [f"## {ARCHIVED}", ""]
    out.line += 2
    if archived:
        out.text(heading)
        out.entries(archived[:-1], ARCHIVED)
        tail = out.last(archived[-1], ARCHIVED)
    else:
        tail = heading
    out.flush()
    tail.extend(quarantine_lines(quarantined))
    end_lines(tail)
    out.pieces.append("\n".join(tail).encode("utf-8"))
    return Rendered(b"".join(out.pieces), out.positions, active + archived, out.segments)


def render_encoded(
    entries: Sequence[MemoryEntry],
    quarantined: Sequence[QuarantinedBlock],
    *,
    reuse: RenderedBlocks | None,
    now: datetime | None = None,
    archive_below: float = 0.2,
    keys: dict[str, bytes] | None = None,
) -> Rendered:
    """The file's bytes, each entry's lines (`render_memory_lines`, encoded) and the
    entries in the file's order: by copying the unchanged blocks of the old file when
    `reuse` has it, else by lines."""
    if reuse is not None:
        done = render_memory_bytes(
            entries, quarantined, old=reuse, now=now, archive_below=archive_below, keys=keys
        )
        if done is not None:
            return done
    text, positions = render_memory_lines(
        entries,
        quarantined,
        now=now,
        archive_below=archive_below,
        keys=keys,
        reuse=reuse,
        reuse_key=reuse.key if reuse is not None else None,
    )
    data = text.encode("utf-8")
    del text  # a 40 MB file's text and bytes are not held beside the parse cache's work
    active, archived = split_sections(entries, archive_below)
    return Rendered(data, positions, active + archived)
