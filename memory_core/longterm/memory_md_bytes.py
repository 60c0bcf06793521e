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

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

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

_HEADER = b"\n### ["


def header_lines(data: bytes) -> dict[int, int]:
    """Line (0-based) → byte offset of each line of `data` that starts with `### [`:
    every entry's first line (content lines starting with `#` are escaped), found with
    one scan for the marker and one count of the newlines between them."""
    found: dict[int, int] = {}
    if data.startswith(_HEADER[1:]):
        found[0] = 0
    find, count = data.find, data.count
    line, start = 0, 0
    at = find(_HEADER)
    while at >= 0:
        line += count(b"\n", start, at + 1)
        start = at + 1
        found[line] = start
        at = find(_HEADER, start)
    return found


class _Blocks:
    """Where each reused entry's block lies in the old file, as `RenderedBlocks.__call__`
    takes it by lines: lines `first - 1` to `last` (0-based), a header first and an empty
    line last."""

    __slots__ = ("_data", "_headers", "_old")

    def __init__(self, old: RenderedBlocks) -> None:
        self._old = old
        self._data = old.data
        self._headers = header_lines(old.data)

    def find(self, entry: MemoryEntry) -> tuple[int, int, int] | None:
        """(start, end, lines): the block is `data[start:end]` and then one newline (the
        end of its empty last line), `lines` lines long; None for an entry the old file
        has no block for. Raises _Unproven when the parse's lines are not such a block."""
        span = self._old.span(entry)
        if span is None:
            return None
        first, last = span
        start = self._headers.get(first - 1)
        if start is None or last - first < 1:
            raise _Unproven
        after = self._headers.get(last + 1)
        if after is None:
            return start, self._step(start, last - first + 1), last - first + 2
        if self._data[after - 2] != 10:  # the block's last line is not empty
            raise _Unproven
        return start, after - 1, last - first + 2

    def _step(self, start: int, lines: int) -> int:
        """The start of the line `lines` lines below the one at `start`, which must be
        empty (the file's end counts as an empty last line)."""
        data, at = self._data, start
        for _ in range(lines):
            at = data.find(b"\n", at) + 1
            if at == 0:
                raise _Unproven
        if at < len(data) and data[at] != 10:
            raise _Unproven
        return at

    def lines(self, start: int, end: int) -> list[str]:
        """The block's lines, decoded (its empty last line included)."""
        return self._data[start:end].decode("utf-8").split("\n")


class _Unproven(Exception):
    """The old file does not hold a block where its parse says."""


class _Pieces:
    """The new file's bytes, in order: the old file's ranges, runs of adjacent ones
    joined, and encoded text."""

    __slots__ = ("_size", "_view", "end", "pieces", "start")

    def __init__(self, data: bytes) -> None:
        self._view = memoryview(data)
        self._size = len(data)
        self.pieces: list[bytes | memoryview] = []
        self.start = self.end = 0  # the run of old bytes not yet in `pieces`

    def text(self, lines: Sequence[str]) -> None:
        """Lines with more lines after them: each ends in a newline."""
        self.flush()
        self.pieces.append(("\n".join(lines) + "\n").encode("utf-8"))

    def copy(self, start: int, end: int) -> None:
        """`data[start:end]` and a newline: the bytes of a block of the old file."""
        if end == self._size:  # the old file's last block: its empty line ends the file
            self.flush()
            self.pieces += (self._view[start:end], b"\n")
        elif start == self.end and self.end > self.start:
            self.end = end + 1
        else:
            self.flush()
            self.start, self.end = start, end + 1

    def flush(self) -> None:
        if self.end > self.start:
            self.pieces.append(self._view[self.start : self.end])
        self.start = self.end = 0


def render_memory_bytes(
    entries: Sequence[MemoryEntry],
    quarantined: Sequence[QuarantinedBlock],
    *,
    old: RenderedBlocks,
    now: datetime | None = None,
    archive_below: float = 0.2,
    keys: dict[str, bytes] | None = None,
) -> tuple[bytes, dict[str, tuple[int, int]]] | None:
    """`render_memory_lines(entries, quarantined, reuse=old, reuse_key=old.key, ...)`,
    its text encoded in UTF-8; None when the old file does not hold the blocks its parse
    places (render by lines then)."""
    try:
        return _render(entries, quarantined, old, now, archive_below, keys)
    except _Unproven:
        if keys is not None:
            keys.clear()
        return None


def render_encoded(
    entries: Sequence[MemoryEntry],
    quarantined: Sequence[QuarantinedBlock],
    *,
    reuse: RenderedBlocks | None,
    now: datetime | None = None,
    archive_below: float = 0.2,
    keys: dict[str, bytes] | None = None,
) -> tuple[bytes, dict[str, tuple[int, int]]]:
    """The file's bytes and each entry's lines (`render_memory_lines`, encoded): by
    copying the unchanged blocks of the old file when `reuse` has it, else by lines."""
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
    return text.encode("utf-8"), positions


class _Range(NamedTuple):
    """A block of the old file: `data[start:end]` and a newline (see `_Pieces.copy`)."""

    start: int
    end: int


_Item = _Range | Sequence[str]
"""A block of the old file or lines of text."""


def _render(
    entries: Sequence[MemoryEntry],
    quarantined: Sequence[QuarantinedBlock],
    old: RenderedBlocks,
    now: datetime | None,
    archive_below: float,
    keys: dict[str, bytes] | None,
) -> tuple[bytes, dict[str, tuple[int, int]]]:
    blocks = _Blocks(old)
    out = _Pieces(old.data)
    positions: dict[str, tuple[int, int]] = {}
    active, archived = split_sections(entries, archive_below)
    # Each item is put out when the next one comes: the last one before the quarantined
    # section (the last block, or the archived heading) is rendered as lines with that
    # section, so the text ends as the renderer ends it (`end_lines`).
    pending: _Item = head_lines(len(entries), now)
    line = len(pending)
    for section, members in ((ACTIVE, active), (ARCHIVED, archived)):
        if section == ARCHIVED:
            _put(out, pending)
            pending = (f"## {ARCHIVED}", "")
            line += 2
        for entry in members:
            found = blocks.find(entry)
            item: _Item
            if found is None:
                item = entry_block(entry)
                count = len(item)
            else:
                item = _Range(found[0], found[1])
                count = found[2]
            positions[entry.id] = (line + 1, line + count - 1)
            line += count
            if keys is not None:
                known = old.key(entry, section) if found is not None else None
                keys[entry.id] = known or block_key(section, _lines(blocks, item))
            _put(out, pending)
            pending = item
    out.flush()
    tail = [*_lines(blocks, pending), *quarantine_lines(quarantined)]
    end_lines(tail)
    out.pieces.append("\n".join(tail).encode("utf-8"))
    return b"".join(out.pieces), positions


def _put(out: _Pieces, item: _Item) -> None:
    if isinstance(item, _Range):
        out.copy(item.start, item.end)
    else:
        out.text(item)


def _lines(blocks: _Blocks, item: _Item) -> Sequence[str]:
    return blocks.lines(item.start, item.end) if isinstance(item, _Range) else item
