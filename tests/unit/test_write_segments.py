"""What a write that copies the old file's blocks tells of itself (`memory_md_bytes.Segment`)
is all the parse cache's delta and the index's line moves need: composed from it,
`parse_delta.compose` reads back as exactly the version written (as `describe`, which
looks every entry up, does), over two writes in a row (the second composed on the
first's pieces); and `line_moves.segment_runs` moves every chunk the write keeps to its
new lines, as `shift_runs` over every kept chunk does (hypothesis, random writes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings

from memory_core.longterm import parse_delta
from memory_core.longterm.memory_md_bytes import Rendered, render_memory_bytes
from memory_core.longterm.memory_md_parser import ParsedMemory, parse_memory
from memory_core.longterm.parse_cache import Base, CachedParse, plain
from memory_core.longterm.store_versions import blocks_of, digest_of
from memory_core.recall.index.line_moves import (
    Run,
    kept_lines,
    segment_runs,
    shift_runs,
)
from memory_core.recall.index.long_term_difference import between_versions
from tests.unit.memory_md_support import LATER
from tests.unit.test_memory_md_bytes import Write, changed, rendered, writes

BELOW = 0.2

SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture
def no_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files of a few entries pass the share of new entries past which the whole parse is
    written at once: lifted, so that every write is kept as a delta."""
    monkeypatch.setattr(parse_delta, "COMPACT_SHARE", 1000.0)
    monkeypatch.setattr(parse_delta, "RESCORED_SHARE", 1000.0)


def written(data: bytes, parsed: ParsedMemory, write: Write) -> tuple[Rendered, ParsedMemory]:
    """`write` applied to the file `data` (whose parse is `parsed`), its blocks copied."""
    keys: dict[str, bytes] = {}
    old = blocks_of(data, parsed, [parsed.keys[e.id] for e in parsed.entries])
    made = render_memory_bytes(
        changed(parsed.entries, write), parsed.quarantined, old=old, now=LATER, keys=keys
    )
    assert made is not None and made.segments is not None
    return made, ParsedMemory(made.ordered, list(parsed.quarantined), made.lines, keys)


def read_back(cached: CachedParse, parsed: ParsedMemory, pieces: Sequence[Any]) -> None:
    """The delta of `pieces` applied to the base gives `parsed`: entries, lines, keys."""
    data = parse_delta.body_of(cached.base, parsed, b"new", BELOW, list(pieces))
    applied = parse_delta.apply(cached, data)
    assert applied is not None
    assert applied.parsed.entries == parsed.entries
    assert applied.parsed.lines == parsed.lines
    assert applied.keys == [parsed.keys[e.id] for e in parsed.entries]


def the_base(write: Write) -> tuple[bytes, ParsedMemory, CachedParse]:
    data = rendered(write)
    parsed = parse_memory(data.decode("utf-8"), known={})
    digest = digest_of(data)
    base = parse_delta.base_of(parsed, digest, complete=True)
    assert base is not None
    keys = [parsed.keys[e.id] for e in parsed.entries]
    return data, parsed, CachedParse(parsed, digest, BELOW, keys, base)


@SETTINGS
@given(writes(damages=[None]), writes(damages=[None]))
def test_a_composed_delta_reads_back_as_the_version_written(
    no_limits: None, first: Write, second: Write
) -> None:
    data, parsed, cached = the_base(first)
    assume(parsed.entries)  # an empty base: every entry is new, past any share of none
    base = cached.base
    made, after = written(data, parsed, first)
    assert made.segments is not None
    pieces = parse_delta.compose(
        base, parse_delta.Made(made.segments, None, len(parsed.entries)), after
    )
    described = parse_delta.describe(base, after)
    if pieces is None:  # an entry the cache cannot give back: the whole parse is written
        assert not all(map(plain, after.entries))
        return
    read_back(cached, after, pieces)
    assert described is not None
    read_back(cached, after, described)
    # The next write, composed on the pieces of the first (the old version is not the base).
    again, later = written(made.data, after, second)
    assert again.segments is not None
    composed = parse_delta.compose(
        base, parse_delta.Made(again.segments, pieces, len(after.entries)), later
    )
    if composed is None:
        assert not all(map(plain, later.entries))
        return
    read_back(cached, later, composed)


def moved(kept: Sequence[tuple[str, int, int]], runs: Sequence[Run]) -> dict[str, tuple[int, int]]:
    """Where each kept chunk ends up once the runs are applied (as `move_kept` does)."""
    out = {}
    for ref, line_from, line_to in kept:
        within = [r for r in runs if r.first <= line_from <= r.last]
        assert len(within) <= 1  # no two runs' ranges overlap
        by = (within[0].by_from, within[0].by_to) if within else (0, 0)
        out[ref] = (line_from + by[0], line_to + by[1])
    return out


@SETTINGS
@given(writes(damages=[None]))
def test_the_runs_told_by_the_write_move_each_kept_chunk_where_it_now_is(write: Write) -> None:
    data, parsed, _ = the_base(write)
    made, after = written(data, parsed, write)
    assert made.segments is not None
    stale, _fresh = between_versions(parsed.entries, after.entries)
    kept = kept_lines(parsed.entries, parsed.lines, stale)
    assert kept is not None
    runs = segment_runs(parsed.entries, parsed.lines, after.lines, made.segments, stale)
    assert runs is not None
    assert moved(kept, runs) == {ref: after.lines[ref] for ref, _, _ in kept}
    assert moved(kept, runs) == moved(kept, shift_runs(kept, after.lines))


def test_a_base_without_entries_to_compose_on_is_left_to_describe(no_limits: None) -> None:
    """Pieces that do not cover the old version's entries: `save` describes instead."""
    base = Base(b"d", [b"k"], [(5, 7)], complete=True, entries=[])
    made = parse_delta.Made(segments=[(0, 1, 0)], old=None, old_count=3)
    assert parse_delta.compose(base, made, ParsedMemory()) is None
