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
from collections.abc import Sequence
from datetime import datetime
from itertools import accumulate, repeat
from operator import add

from memory_core.base.entries import MemoryEntry
from memory_core.longterm.memory_md import ACTIVE, ARCHIVED, QuarantinedBlock, block_key
from memory_core.longterm.memory_md_renderer import (
    end_lines,
    entry_block,
    head_lines,
    quarantine_lines,
    render_memory_lines,
    split_sections,
)
from memory_core.longterm.store_versions import RenderedBlocks

Rendered = tuple[bytes, dict[str, tuple[int, int]], list[MemoryEntry]]
"""The file's bytes, each entry's first and last line, the entries in the file's order."""

_HEADER = re.compile(rb"\n### \[")


def header_lines(data: bytes) -> dict[int, int]:
    """Line (0-based) → byte offset of each line of `data` that starts with `### [`:
    every entry's first line (content lines starting with `#` are escaped), found with
    one scan for the marker and a count of the newlines between them."""
    offsets = [found.start() + 1 for found in _HEADER.finditer(data)]
    if data.startswith(b"### ["):
        offsets.insert(0, 0)
    lines = accumulate(map(data.count, repeat(b"\n"), [0, *offsets[:-1]], offsets))
    return dict(zip(lines, offsets, strict=True))


class _Unproven(Exception):
    """The old file does not hold a block where its parse says."""


class _Writer:
    """The new file's bytes, in order: runs of the old file's adjacent blocks (slices of
    it) and encoded text; each entry's lines and key on the way."""

    def __init__(self, old: RenderedBlocks, keys: dict[str, bytes] | None, line: int) -> None:
        self.old = old
        self.data = old.data
        self.view = memoryview(old.data)
        headers = header_lines(old.data).get
        # Per place in the parse: the offset of the block's first line (-1: the parse
        # has no lines for it, -2: they are no block), and of the line after its empty
        # last line when that is a header too (-1: found by stepping, for the few blocks
        # before a heading or at the end).
        self.starts = [
            -1 if span is None else headers(span[0] - 1, -2) if span[1] > span[0] else -2
            for span in old.spans
        ]
        self.nexts = [-1 if span is None else headers(span[1] + 1, -1) for span in old.spans]
        self.firsts = [0 if span is None else span[0] for span in old.spans]
        self.lasts = [0 if span is None else span[1] for span in old.spans]
        data, starts = old.data, self.starts
        # joined[n]: the blocks at places n and n + 1 are adjacent in the file, the first
        # ending in its empty line (so one range holds both).
        self.joined = [
            start >= 0 and after >= 0 and after == later and data[after - 2] == 10
            for start, after, later in zip(starts, self.nexts, starts[1:], strict=False)
        ]
        self.joined.append(False)
        self.keys = keys
        self.line = line
        self.positions: dict[str, tuple[int, int]] = {}
        self.pieces: list[bytes | memoryview] = []
        self.start = self.end = 0  # the run of old bytes not yet in `pieces`

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
        starts, nexts, firsts, lasts = self.starts, self.nexts, self.firsts, self.lasts
        positions, keys, old_keys = self.positions, self.keys, old.keys
        archived_at = old.archived_at if keys is not None else 0
        data, size = self.data, len(self.data)
        k, count = 0, len(members)
        while k < count:
            place = places[k]
            at = starts[place] if same[k] else -1
            if at == -1:
                self._fresh(members[k], section)
                k += 1
                continue
            if at < 0:
                raise _Unproven
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
            first, final = firsts[end_place - 1], lasts[end_place - 1]
            after = nexts[end_place - 1]
            if after < 0:
                stop = self._step(starts[end_place - 1], final - first + 1)
            elif data[after - 2] == 10:  # the last block's last line is empty
                stop = after - 1
            else:
                raise _Unproven
            self.line += final + 2 - firsts[place]
            if keys is not None:
                known = None
                if old_keys is not None and (firsts[place] > archived_at) == archived:
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
        self.text(block)

    def _keys(self, ids: list[str], place: int, section: str) -> None:
        """The keys of a run's blocks: the parse's when they stay in their section."""
        assert self.keys is not None
        old_keys, end_place = self.old.keys, place + len(ids)
        was = ARCHIVED if self.firsts[place] > self.old.archived_at else ACTIVE
        if old_keys is not None and was == section:
            known = old_keys[place:end_place]
            if all(known):
                self.keys.update(zip(ids, known, strict=True))
                return
        for n, entry_id in enumerate(ids, place):
            key = old_keys[n] if old_keys is not None and was == section else None
            stop = self.starts[n + 1] - 1 if n + 1 < end_place else self._stop(n)
            self.keys[entry_id] = key or block_key(section, self.lines(self.starts[n], stop))

    def _stop(self, n: int) -> int:
        """The start of the empty last line of the block at place `n` of the parse."""
        after = self.nexts[n]
        if after >= 0:
            return after - 1
        return self._step(self.starts[n], self.lasts[n] - self.firsts[n] + 1)

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
    its text encoded in UTF-8, and the entries in the file's order; None when the old file does not hold the blocks its parse
    places (render by lines then; `keys` is emptied)."""
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
    return b"".join(out.pieces), out.positions, active + archived


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
    return data, positions, active + archived
