"""The index's comparison of two long-term versions (`line_moves`, `long_term_difference`)
gives what entry-by-entry loops give: the `reference_*` functions below are those loops
as they were before whole-list passes replaced them; random writes (adds, removals,
edits, rescores, re-sorts, chunks sharing a line, refs with no new lines) must give the
same values, or the same error, from both."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime
from operator import itemgetter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memory_core.recall.index.line_moves as line_moves
import memory_core.recall.index.long_term_difference as difference
from memory_core.base.entries import MemoryEntry
from memory_core.longterm.claims import shown
from memory_core.recall.index.line_moves import (
    RANGED_RUNS,
    Kept,
    Lines,
    Run,
    kept_lines,
    moved_rows,
    shift_runs,
)

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def reference_shift_runs(
    placed: Sequence[tuple[str, int, int]], lines: Lines, most: int | None = None
) -> list[Run] | None:
    runs: list[Run] = []
    first = last = 0
    shift: tuple[int, int] | None = None
    seen: tuple[int, str] | None = None
    for ref, line_from, line_to in sorted(placed, key=itemgetter(1)):
        if seen is not None and seen[0] == line_from:
            if seen[1] != ref:
                raise ValueError(f"two entries' chunks start on line {line_from}")
            continue
        seen = (line_from, ref)
        new = lines.get(ref)
        now = None if new is None else (new[0] - line_from, new[1] - line_to)
        if now == (0, 0):
            now = None
        if now is not None and now == shift:
            last = line_from
            continue
        if shift is not None:
            runs.append(Run(first, last, *shift))
            if most is not None and len(runs) > most:
                return None
        first = last = line_from
        shift = now
    if shift is not None:
        runs.append(Run(first, last, *shift))
    return None if most is not None and len(runs) > most else runs


def reference_kept_lines(
    before: Sequence[MemoryEntry], before_lines: Lines, stale: Sequence[str]
) -> Kept | None:
    gone = set(stale)
    kept: Kept = []
    for made in before:
        if made.id in gone:
            continue
        at = before_lines.get(made.id)
        if at is None:
            return None
        kept.append((made.id, at[0], at[1]))
    return kept


def reference_moved_rows(kept: Kept, lines: Lines) -> list[tuple[str, int, int]]:
    return [
        (ref, *lines[ref])
        for ref, line_from, line_to in kept
        if ref in lines and lines[ref] != (line_from, line_to)
    ]


def reference_between_versions(
    before: Sequence[MemoryEntry], after: Sequence[MemoryEntry]
) -> tuple[list[str], list[MemoryEntry]]:
    def changed(made: MemoryEntry, other: MemoryEntry | None) -> bool:
        return other is None or (other is not made and shown(other) != shown(made))

    old = {e.id: e for e in before}
    new = {e.id: e for e in after}
    stale = [i for i, e in old.items() if changed(e, new.get(i))]
    fresh = [e for i, e in new.items() if changed(e, old.get(i))]
    return stale, fresh


def entry(ref: str, content: str, score: float = 0.5, speaker: str | None = None) -> MemoryEntry:
    return MemoryEntry(ref, content, "fact", score, NOW, NOW, NOW, speaker=speaker)


def a_write(
    rng: random.Random, size: int, changes: int
) -> tuple[list[MemoryEntry], list[MemoryEntry], dict[str, tuple[int, int]], Lines]:
    """(entries before, entries after, lines before, lines after) of one random write."""
    before = [
        entry(f"e{n}", f"fact {n}", speaker=rng.choice([None, None, "Ann"])) for n in range(size)
    ]
    after: list[MemoryEntry] = []
    rate = changes / max(size, 1)
    for made in before:
        roll = rng.random()
        if roll < rate * 0.2:
            continue  # forgotten
        if roll < rate * 0.5:
            after.append(made.with_(score=0.9))  # rescored: another object, the same text
        elif roll < rate * 0.7:
            after.append(made.with_(content=f"{made.content} edited"))
        elif roll < rate * 0.8:
            after.append(made.with_(speaker="Bob"))  # shown otherwise
        else:
            after.append(made)
    for n in range(rng.randint(0, changes)):
        after.insert(rng.randint(0, len(after)), entry(f"new{n}", f"new fact {n}"))
    for _ in range(rng.randint(0, changes)):
        if after:
            after.insert(rng.randint(0, len(after)), after.pop(rng.randrange(len(after))))
    big = rng.choice([0, 0, 300, 70_000])  # line numbers past the small ints
    return before, after, laid_out(rng, before, big), laid_out(rng, after, big)


def laid_out(
    rng: random.Random, entries: list[MemoryEntry], top: int
) -> dict[str, tuple[int, int]]:
    lines: dict[str, tuple[int, int]] = {}
    line = top + rng.randint(1, 5)
    for made in entries:
        height = rng.randint(1, 3)
        lines[made.id] = (line, line + height - 1)
        line += height + 1
    return lines


def same_runs(placed: Kept, lines: Lines, most: int | None) -> None:
    try:
        expected = reference_shift_runs(placed, lines, most)
    except ValueError as refused:
        with pytest.raises(ValueError, match=str(refused)):
            shift_runs(placed, lines, most)
        return
    assert shift_runs(placed, lines, most) == expected


@settings(max_examples=300, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(0, 60), st.integers(0, 10))
def test_the_passes_give_what_the_loops_give(rng: random.Random, size: int, changes: int) -> None:
    before, after, old, new = a_write(rng, size, changes)
    assert difference.between_versions(before, after) == reference_between_versions(before, after)
    stale, _ = reference_between_versions(before, after)
    if before and rng.random() < 0.2:
        del old[rng.choice(before).id]  # lines that do not cover what stays
    kept = reference_kept_lines(before, old, stale)
    assert kept_lines(before, old, stale) == kept
    if kept is None:
        return
    if new and rng.random() < 0.3:
        del new[rng.choice(list(new))]  # left where it is
    assert moved_rows(kept, new) == reference_moved_rows(kept, new)
    for most in (None, 0, 1, 2, RANGED_RUNS):
        same_runs(kept, new, most)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abcd"), st.integers(1, 12), st.integers(0, 2)), max_size=12
    ),
    st.dictionaries(
        st.sampled_from("abcde"), st.tuples(st.integers(1, 14), st.integers(1, 16)), max_size=5
    ),
    st.one_of(st.none(), st.integers(0, 4)),
)
def test_chunks_sharing_a_line_give_what_the_loop_gives(
    placed: list[tuple[str, int, int]], lines: dict[str, tuple[int, int]], most: int | None
) -> None:
    kept = [(ref, line, line + height) for ref, line, height in placed]
    same_runs(kept, lines, most)


def test_a_long_file_re_sorted_gives_the_same_runs() -> None:
    rng = random.Random(5)
    for changes in [0, 1, 3, 40, 2000]:
        before, after, old, new = a_write(rng, 5000, changes)
        stale, _ = reference_between_versions(before, after)
        assert difference.between_versions(before, after) == (
            stale,
            reference_between_versions(before, after)[1],
        )
        kept = kept_lines(before, old, stale)
        assert kept is not None and kept == reference_kept_lines(before, old, stale)
        assert moved_rows(kept, new) == reference_moved_rows(kept, new)
        for most in (None, RANGED_RUNS):
            same_runs(kept, new, most)


@pytest.mark.parametrize("window", [1, 2, 3, 1024])
def test_a_shared_line_past_too_many_runs_gives_what_the_loop_gives(
    window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop refuses two refs on one line only when it gets there before it has seen
    more than `most` runs: which one it does depends on where the shared line is. Runs
    and shared lines that straddle the windows `shift_runs` goes by give the same."""
    monkeypatch.setattr(line_moves, "_FIRST_WINDOW", window)
    rng = random.Random(11 + window)
    for _ in range(3000):
        size = rng.randint(1, 14)
        placed = [(f"r{n}", n + 1, n + 1 + rng.randint(0, 1)) for n in range(size)]
        for _ in range(rng.randint(1, 3)):  # another chunk on a line already taken
            line = rng.randint(1, size)
            ref = rng.choice([f"r{line - 1}", f"x{line}"])
            placed.insert(rng.randint(0, len(placed)), (ref, line, line + rng.randint(0, 1)))
        shifts = [rng.choice([0, 1, 2]) for _ in range(size)]
        lines = {f"r{n}": (n + 1 + s, n + 1 + s + 1) for n, s in enumerate(shifts)}
        for ref, line, _ in placed:
            if ref.startswith("x"):
                lines[ref] = (line + 5, line + 6)
        same_runs(placed, lines, rng.choice([None, 0, 1, 2, 3, 4]))
