"""A long-term write moves the chunks it keeps by runs of alike shifts: every chunk ends
on its entry's new lines and no run covers a chunk it must not move, on both backends;
the schema keeps a long-term chunk one per entry, every other one per line."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memory_core.recall.index.line_moves as line_moves
import memory_core.recall.index.writes as writes
from memory_core.base.chunks import Chunk, ChunkKind
from memory_core.base.entries import MemoryEntry
from memory_core.base.scope import MAIN
from memory_core.base.sql import Connection
from memory_core.engine import MemoryCore
from memory_core.recall.index.line_moves import RANGED_RUNS, Run, kept_lines, shift_runs
from memory_core.recall.index.long_term_lines import LINE_FROM, LINE_TO
from tests.support import sql

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
Layout = dict[str, tuple[int, int]]


def laid_out(blocks: list[tuple[str, int]], top: int = 4) -> Layout:
    """Ref → (first, last) line of blocks of the given heights, a blank line between."""
    lines: Layout = {}
    line = top
    for ref, height in blocks:
        lines[ref] = (line, line + height - 1)
        line += height + 1
    return lines


def a_write(
    rng: random.Random, size: int, moves: int = 3
) -> tuple[Layout, Layout, list[str], list[str]]:
    """(old lines, new lines, stale refs, fresh refs) of one random write: entries
    removed, edited (a new height), added anywhere, moved (a re-sort), header lines."""
    old_blocks = [(f"e{n}", rng.randint(1, 3)) for n in range(size)]
    stale: list[str] = []
    new_blocks: list[tuple[str, int]] = []
    for ref, height in old_blocks:
        roll = rng.random()
        if roll < 0.1:
            stale.append(ref)  # forgotten
        elif roll < 0.2:
            stale.append(ref)  # edited: new text, maybe another height
            new_blocks.append((ref, rng.randint(1, 3)))
        else:
            new_blocks.append((ref, height))
    for n in range(rng.randint(0, 3)):
        new_blocks.insert(rng.randint(0, len(new_blocks)), (f"new{n}", rng.randint(1, 3)))
    for _ in range(rng.randint(0, moves)):
        if new_blocks:
            moved = new_blocks.pop(rng.randrange(len(new_blocks)))
            new_blocks.insert(rng.randint(0, len(new_blocks)), moved)
    old = laid_out(old_blocks, top=rng.randint(1, 6))
    new = laid_out(new_blocks, top=rng.randint(1, 6))
    kept = {ref for ref, _ in new_blocks} & (set(old) - set(stale))
    fresh = [ref for ref, _ in new_blocks if ref not in kept]
    return old, new, stale, fresh


def play(rows: dict[str, list[int]], runs: list[Run], fresh: Layout) -> None:
    """The statements of `move_kept` and `insert_chunks`: every kept row moved once, by
    the run whose range holds its old first line, then the new chunks stored."""
    for row in rows.values():
        for run in runs:
            if run.first <= row[0] <= run.last:
                row[0] += run.by_from
                row[1] += run.by_to
                break
    for ref, (line_from, line_to) in fresh.items():
        rows[ref] = [line_from, line_to]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 40))
def test_runs_move_every_kept_chunk_to_its_new_lines(seed: int, size: int) -> None:
    old, new, stale, fresh = a_write(random.Random(seed), size)
    before = [MemoryEntry(ref, ref, "fact", 0.5, NOW, NOW, NOW) for ref in old]
    kept = kept_lines(before, old, stale)
    assert kept is not None
    runs = shift_runs(kept, new)
    # In the order of their ranges, none overlapping.
    assert all(a.last < b.first for a, b in pairwise(runs))
    # Each run covers only chunks that move, and all of them alike.
    for run in runs:
        inside = [(ref, f, t) for ref, f, t in kept if run.first <= f <= run.last]
        assert inside
        assert {(new[r][0] - f, new[r][1] - t) for r, f, t in inside} == {(run.by_from, run.by_to)}
    rows = {ref: [f, t] for ref, f, t in kept}
    play(rows, runs, {ref: new[ref] for ref in fresh})
    assert {ref: (f, t) for ref, (f, t) in rows.items()} == new


def test_one_entry_above_all_others_moves_them_in_one_run() -> None:
    old = laid_out([(f"e{n}", 2) for n in range(1000)])
    new = laid_out([("top", 1), *((f"e{n}", 2) for n in range(1000))])
    kept = [(ref, *old[ref]) for ref in old]
    assert shift_runs(kept, new) == [Run(old["e0"][0], old["e999"][0], 2, 2)]


def test_lines_of_the_replaced_version_must_cover_what_stays() -> None:
    before = [MemoryEntry(ref, ref, "fact", 0.5, NOW, NOW, NOW) for ref in ("a", "b", "c")]
    lines = {"a": (4, 5), "c": (10, 11)}
    assert kept_lines(before, lines, ["b"]) == [("a", 4, 5), ("c", 10, 11)]
    assert kept_lines(before, lines, []) is None  # "b" stays but its lines are unknown


def test_two_entries_on_one_line_are_refused() -> None:
    with pytest.raises(ValueError, match="line 4"):
        shift_runs([("a", 4, 5), ("b", 4, 6)], {"a": (5, 6), "b": (9, 9)})


@pytest.mark.storage
async def test_random_writes_equal_the_new_layout_on_the_database(core: MemoryCore) -> None:
    """`apply_long_term` on the real schema, from the kept lines a write knows and from
    the index's own rows alike, few runs and many: every chunk sits on its new lines."""
    await core.notes.append(MAIN, "a note, so the scope exists")
    rows = await sql(core, "SELECT scope_id FROM chunks LIMIT 1")
    sid = int(rows[0][0])
    db = core.database
    assert db is not None
    rng = random.Random(38)
    for case in range(44):
        # The last cases re-sort hundreds of entries: too many runs to move by range,
        # they move through the table of runs.
        big = case >= 40
        old, new, stale, fresh = a_write(rng, 600 if big else rng.randint(0, 30), 300 * big)
        assert (
            not big or len(shift_runs([(r, *old[r]) for r in old if r in new], new)) > RANGED_RUNS
        )
        path = f"memory/case{case}.md"
        known = case % 2 == 0

        def write(conn: Connection, old: Layout = old, path: str = path) -> None:
            writes.insert_chunks(conn, sid, path, ChunkKind.LONG_TERM, chunks(old, "old"))

        def apply(
            conn: Connection,
            old: Layout = old,
            new: Layout = new,
            stale: list[str] = stale,
            fresh: list[str] = fresh,
            path: str = path,
            known: bool = known,
        ) -> None:
            gone = set(stale)
            kept = [(ref, *old[ref]) for ref in old if ref not in gone] if known else None
            writes.apply_long_term(
                conn,
                sid,
                path,
                stale,
                chunks({ref: new[ref] for ref in fresh}, "new"),
                new,
                (1, 1),
                runs=None if kept is None else shift_runs(kept, new),
            )

        await db.write(write)
        await db.write(apply)
        stored = await sql(
            core,
            f"SELECT c.ref, {LINE_FROM}, {LINE_TO} FROM chunks AS c WHERE c.path = ?",
            path,
        )
        assert {str(r[0]): (int(r[1]), int(r[2])) for r in stored} == new, case


def chunks(lines: Layout, version: str) -> list[tuple[Chunk, str]]:
    return [
        (Chunk(f, t, f"{ref} {version}", NOW, ref=ref), f"{ref} {version}")
        for ref, (f, t) in lines.items()
    ]


@pytest.mark.storage
async def test_a_write_moves_chunks_from_the_lines_it_replaced(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capture knows where the index holds the entries it keeps (the version it
    replaced): the index's rows are not read for their lines, and what the write knew is
    what the index held."""
    for n, importance in enumerate(["low", "high", "medium", "low"]):
        await core.memories.capture(MAIN, f"fact number {n} of a few", importance=importance)
    await core.memories.flush()
    held = await sql(
        core, f"SELECT c.ref, {LINE_FROM}, {LINE_TO} FROM chunks AS c WHERE c.kind = 'long_term'"
    )
    seen: list[list[tuple[str, int, int]] | None] = []
    moved_by_runs: list[bool] = []
    real_kept = line_moves.kept_lines
    real = writes.apply_long_term

    def known(*args: Any) -> line_moves.Kept | None:
        kept = real_kept(*args)
        seen.append(None if kept is None else list(kept))
        return kept

    def spy(*args: object, **kwargs: object) -> None:
        moved_by_runs.append(kwargs.get("runs") is not None)
        real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(line_moves, "kept_lines", known)
    monkeypatch.setattr(writes, "apply_long_term", spy)
    await core.memories.capture(MAIN, "an important fact above the others", importance="high")
    await core.memories.flush()
    assert moved_by_runs == [True]  # the index's rows were not read for their lines
    assert len(seen) == 1 and seen[0] is not None
    assert sorted(seen[0]) == sorted((str(r), int(f), int(t)) for r, f, t in held)
