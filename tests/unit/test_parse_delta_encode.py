"""The delta's encoder (`parse_delta.encode`) writes exactly the bytes an entry-by-entry
loop writes: `reference_encode` below is that loop as it was before the encoder found
runs through whole-list passes; random writes (adds, removals, rescores, edits, reorders,
quarantined blocks, empty files) must give both the same bytes, or both None."""

from __future__ import annotations

import marshal
import random
from datetime import timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.base.entries import MemoryEntry
from memory_core.longterm import parse_cache, parse_delta
from memory_core.longterm.memory_md import QuarantinedBlock
from memory_core.longterm.memory_md_parser import ParsedMemory
from memory_core.longterm.parse_cache import Base
from memory_core.longterm.parse_delta import (
    _TAG,
    COMPACT_SHARE,
    KNOWN_TEXT,
    NEW_ENTRY,
    RESCORED_SHARE,
)
from tests.unit.test_parse_cache import entry


def reference_encode(
    base: Base, parsed: ParsedMemory, digest: bytes, archive_below: float
) -> bytes | None:
    """The encoder as an entry-by-entry loop (the former `parse_delta.encode`)."""
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
    for made in entries:
        key = keys[made.id]
        first, last = parsed.lines.get(made.id, (0, 0))
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
        if not parse_cache.plain(made):
            return None
        if made.content in base.contents():
            known += 1
            if known > most_known:
                return None
            pieces.append([KNOWN_TEXT, parse_cache.row_of(made), key, (first, last)])
            continue
        if len(fresh) >= most:
            return None
        fresh.append(made)
        piece: list[Any] = [NEW_ENTRY, parse_cache.row_of(made), key, (first, last)]
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


Block = tuple[MemoryEntry, bytes, int]
"""An entry, its block key and its block's height in lines."""


def laid_out(blocks: list[Block], top: int) -> dict[str, tuple[int, int]]:
    lines: dict[str, tuple[int, int]] = {}
    line = top
    for made, _, height in blocks:
        lines[made.id] = (line, line + height - 1)
        line += height + 1
    return lines


def a_write(rng: random.Random, size: int, changes: int) -> tuple[Base, ParsedMemory]:
    """A base of `size` entries and a random next version of it."""
    old: list[Block] = [(entry(n), f"key {n}".encode(), rng.randint(1, 4)) for n in range(size)]
    big = rng.random() < 0.3  # line numbers and shifts past the small ints marshal shares
    old_lines = laid_out(old, rng.randint(1, 5) + (rng.randint(300, 90_000) if big else 0))
    base = Base(
        b"b" * 16,
        [key for _, key, _ in old],
        [old_lines[made.id] for made, _, _ in old],
        True,
        [made for made, _, _ in old],
    )
    new: list[Block] = []
    for made, key, height in old:
        roll = rng.random() * size / max(changes, 1)
        if roll < 0.15:
            continue  # forgotten
        if roll < 0.3:  # rescored: a new block of a text the base holds
            new.append((made.with_(score=round(rng.random(), 3)), key + b"+", height))
        elif roll < 0.4:  # edited: a new text
            new.append((made.with_(content=f"{made.content} edited"), key + b"*", height))
        elif roll < 0.45:  # the same block laid out on more or fewer lines
            new.append((made, key, max(1, height + rng.choice([-1, 1]))))
        elif roll < 0.48:  # a time no cache gives back exactly
            odd = made.with_(created_at=made.created_at.astimezone(timezone(timedelta(hours=2))))
            new.append((odd, key + b"!", height))
        else:
            new.append((made, key, height))
    for n in range(rng.randint(0, changes)):
        key = rng.choice([f"new {n}".encode(), *(k for _, k, _ in old[:1])])  # maybe a twin
        new.insert(rng.randint(0, len(new)), (entry(10_000 + n), key, rng.randint(1, 3)))
    for _ in range(rng.randint(0, changes)):
        if new:
            moved = new.pop(rng.randrange(len(new)))
            new.insert(rng.randint(0, len(new)), moved)
    lines = laid_out(new, rng.randint(1, 5) + (rng.randint(300, 90_000) if big else 0))
    keys = {made.id: key for made, key, _ in new}
    if new and rng.random() < 0.05:
        del keys[rng.choice(new)[0].id]  # a block with no key: the whole parse is written
    if new and rng.random() < 0.1:
        del lines[rng.choice(new)[0].id]  # an entry with no lines
    quarantined = [
        QuarantinedBlock(f"broken block {n}", rng.randint(1, 900), "no header")
        for n in range(rng.choice([0, 0, 1, 3]))
    ]
    parsed = ParsedMemory(
        entries=[made for made, _, _ in new], quarantined=quarantined, lines=lines, keys=keys
    )
    return base, parsed


def both(base: Base, parsed: ParsedMemory) -> tuple[bytes | None, bytes | None]:
    expected = reference_encode(base, parsed, b"n" * 16, 0.2)
    return expected, parse_delta.encode(base, parsed, b"n" * 16, 0.2)


@settings(max_examples=300, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(0, 60), st.integers(0, 8))
def test_the_encoder_writes_what_the_loop_writes(
    rng: random.Random, size: int, changes: int
) -> None:
    expected, got = both(*a_write(rng, size, changes))
    assert got == expected


def test_long_runs_give_the_same_bytes() -> None:
    rng = random.Random(7)
    deltas = 0
    for changes in [0, 1, 2, 5, 20, 80]:
        for _ in range(4):
            expected, got = both(*a_write(rng, 3000, changes))
            assert got == expected
            deltas += expected is not None
    assert deltas > 10  # most are deltas, not refusals


def test_empty_versions_give_the_same_bytes() -> None:
    rng = random.Random(3)
    for size in [0, 5]:
        base, parsed = a_write(rng, size, 2)
        nothing = Base(b"b" * 16, [], [], True, [])
        for old, new in [(base, ParsedMemory()), (nothing, parsed), (nothing, ParsedMemory())]:
            expected, got = both(old, new)
            assert got == expected
