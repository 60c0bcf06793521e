"""The parse cache written by difference (`longterm/parse_delta.py`) and the unchanged
blocks a write takes from the file it rendered: a write of a few entries writes a delta
of about their size, leaves the base data file untouched and renders only them; a torn
or foreign delta is ignored (it costs the parse of the changed blocks, nothing else).

Each "new process" is a fresh `LongTermStore` with nothing remembered; what a read or a
write cost is asserted through counters and the bytes on disk, never through time.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from memory_core.base.entries import MemoryEntry
from memory_core.base.scope import MAIN
from memory_core.base.workspace import Workspace
from memory_core.longterm import (
    memory_md_bytes,
    memory_md_renderer,
    parse_cache,
    parse_delta,
    store_versions,
)
from memory_core.longterm.memory_md import ACTIVE
from memory_core.longterm.memory_md_parser import parse_memory
from memory_core.longterm.memory_md_renderer import render_memory
from tests.unit.test_parse_cache import (
    ENTRIES,
    HOUR_AGO,
    NOW,
    entry,
    fresh_store,
    replace_with,
    write_and_keep,
    write_by_hand,
)

MANY = [entry(n) for n in range(400)]


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = Workspace.at(tmp_path)
    write_by_hand(workspace.long_term_path(MAIN), render_memory(MANY, now=NOW))
    return workspace


def age(ws: Workspace) -> None:
    """The file as a later process finds it: past the racy window."""
    os.utime(ws.long_term_path(MAIN), (HOUR_AGO, HOUR_AGO))


async def written_twice(ws: Workspace, *changes: list[MemoryEntry]) -> None:
    """A process that reads the file, writes the whole parse once (its base), then each
    of `changes` (by difference)."""
    store = fresh_store(ws)
    await write_and_keep(store, replace_with(MANY))  # the first write: a whole base
    for entries in changes:
        await write_and_keep(store, replace_with(entries))


def one_more(entries: list[MemoryEntry], number: int) -> list[MemoryEntry]:
    return [*entries, entry(number, f"captured line number {number}")]


def count_renders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the entries the renderer renders from now on, in order."""
    rendered: list[str] = []
    render_entry = memory_md_renderer.render_entry

    def counted(made: MemoryEntry) -> list[str]:
        rendered.append(made.id)
        return render_entry(made)

    monkeypatch.setattr(memory_md_renderer, "render_entry", counted)
    return rendered


async def test_a_small_write_leaves_a_small_delta_and_the_base_untouched(ws: Workspace) -> None:
    await written_twice(ws)
    files = parse_cache.files_for(ws, MAIN)
    base = files.data.read_bytes()
    base_stamp = files.data.stat().st_mtime_ns
    changed = one_more(MANY, 900)
    changed[7] = changed[7].with_(hits=9, last_activated=NOW + timedelta(hours=1))

    # A later process captures one line and reinforces one memory.
    age(ws)
    await write_and_keep(fresh_store(ws), replace_with(changed))

    assert files.data.read_bytes() == base and files.data.stat().st_mtime_ns == base_stamp
    assert files.delta.stat().st_size * 20 < len(base)  # two entries' worth, not 400
    age(ws)
    reader = fresh_store(ws)
    parsed = await reader.load(MAIN)
    assert (reader.reads.parsed_blocks, reader.reads.cache_reads) == (0, 1)
    assert parsed == parse_memory(ws.long_term_path(MAIN).read_text())


async def test_each_delta_is_made_against_the_base_not_the_last_delta(ws: Workspace) -> None:
    versions = [one_more(MANY, 900), one_more(one_more(MANY, 900), 901)]
    await written_twice(ws, *versions)
    age(ws)
    reader = fresh_store(ws)
    parsed = await reader.load(MAIN)
    assert reader.reads.parsed_blocks == 0
    assert parsed == parse_memory(ws.long_term_path(MAIN).read_text())
    assert [e.id for e in parsed.entries] == [
        e.id for e in parse_memory(render_memory(versions[-1], now=NOW)).entries
    ]


@pytest.mark.parametrize("change", ["new texts", "rescores"])
async def test_a_change_of_much_of_the_file_writes_a_new_base(ws: Workspace, change: str) -> None:
    await written_twice(ws)
    files = parse_cache.files_for(ws, MAIN)
    base = files.data.read_bytes()
    if change == "new texts":
        share = int(len(MANY) * parse_delta.COMPACT_SHARE) + 1
        changed = [e.with_(content=f"an edit {n}") if n < share else e for n, e in enumerate(MANY)]
    else:
        share = int(len(MANY) * parse_delta.RESCORED_SHARE) + 1
        changed = [e.with_(score=0.9) if n < share else e for n, e in enumerate(MANY)]
    age(ws)
    await write_and_keep(fresh_store(ws), replace_with(changed))
    assert files.data.read_bytes() != base
    assert not files.delta.exists()
    age(ws)
    reader = fresh_store(ws)
    assert await reader.load(MAIN) == parse_memory(ws.long_term_path(MAIN).read_text())
    assert reader.reads.parsed_blocks == 0


async def test_rescores_of_a_fifth_of_the_file_are_a_delta_of_rows(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decay rescores a few percent of a large file every hour: those entries keep their
    texts, so a delta holds their rows alone (nothing derived from a text is made again)
    and a reader takes the rest from the base, by text."""
    await written_twice(ws)
    files = parse_cache.files_for(ws, MAIN)
    base = files.data.read_bytes()
    rescored = [e.with_(score=0.95) if n % 5 == 0 else e for n, e in enumerate(MANY)]
    derived_for: list[int] = []
    derived = parse_cache.derived

    def counted(entries: list[MemoryEntry], complete: bool) -> object:
        derived_for.append(len(entries))
        return derived(entries, complete)

    monkeypatch.setattr(parse_cache, "derived", counted)
    age(ws)
    await write_and_keep(fresh_store(ws), replace_with(one_more(rescored, 900)))

    assert files.data.read_bytes() == base
    assert derived_for == [1]  # the one new entry's, none for the 80 rescored
    assert files.delta.stat().st_size * 4 < len(base)
    age(ws)
    reader = fresh_store(ws)
    parsed = await reader.load(MAIN)
    assert (reader.reads.parsed_blocks, reader.reads.cache_reads) == (0, 1)
    assert parsed == parse_memory(ws.long_term_path(MAIN).read_text())
    assert sum(e.score == 0.95 for e in parsed.entries) == 80


@pytest.mark.parametrize("damage", ["torn", "foreign"])
async def test_a_torn_or_foreign_delta_costs_the_changed_blocks_parse(
    ws: Workspace, tmp_path: Path, damage: str
) -> None:
    await written_twice(ws, one_more(MANY, 900))
    files = parse_cache.files_for(ws, MAIN)
    if damage == "torn":
        data = files.delta.read_bytes()
        files.delta.write_bytes(data[: len(data) // 2])
    else:
        # Another process's delta: of the same base bytes, to a version this file is not.
        (tmp_path / "other").mkdir()
        other = Workspace.at(tmp_path / "other")
        write_by_hand(other.long_term_path(MAIN), render_memory(ENTRIES, now=NOW))
        await written_twice(other, one_more(ENTRIES, 901))
        shutil.copyfile(parse_cache.files_for(other, MAIN).delta, files.delta)
    age(ws)
    reader = fresh_store(ws)
    parsed = await reader.load(MAIN)
    assert parsed == parse_memory(ws.long_term_path(MAIN).read_text())
    assert reader.reads.parsed_blocks == 1  # the one new block; the base gave the rest


async def test_a_write_renders_only_the_entries_it_changed(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    await written_twice(ws)
    age(ws)
    store = fresh_store(ws)  # nothing rendered in this process
    await store.load(MAIN)
    rendered = count_renders(monkeypatch)
    changed = one_more(list((await store.load(MAIN)).entries), 900)
    await write_and_keep(store, replace_with(changed))
    assert rendered == ["e0900"]
    monkeypatch.undo()
    memory_md_renderer.clear_render_cache()
    assert ws.long_term_path(MAIN).read_text() == render_memory(changed, now=NOW)


async def test_a_write_copies_the_unchanged_blocks_without_decoding_the_file(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old file's unchanged blocks are copied as bytes (`memory_md_bytes`): its
    lines are never decoded, and the file is what rendering it whole gives."""
    await written_twice(ws)
    age(ws)
    store = fresh_store(ws)
    changed = one_more(list((await store.load(MAIN)).entries), 900)
    changed[10] = changed[10].with_(content="edited in place")
    del changed[20]

    def refused(_: object) -> list[str]:
        raise AssertionError("the old file was decoded into lines")

    monkeypatch.setattr(store_versions.RenderedBlocks, "lines", property(refused))
    await write_and_keep(store, replace_with(changed))
    monkeypatch.undo()
    memory_md_renderer.clear_render_cache()
    assert ws.long_term_path(MAIN).read_text() == render_memory(changed, now=NOW)


async def test_a_file_a_person_wrote_is_rendered_whole_at_the_next_write(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its blocks may not be as the renderer writes them: none is reused."""
    age(ws)
    store = fresh_store(ws)
    rendered = count_renders(monkeypatch)
    await write_and_keep(store, lambda parsed: (one_more(list(parsed.entries), 900), None))
    assert len(rendered) == len(MANY) + 1


async def test_a_write_hashes_only_the_blocks_it_changed(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The block keys of the blocks a write takes from the file come from the parse
    cache; only the changed blocks are hashed, and the keys cached for the next process
    are the ones a parse of the written file gives (active and archived alike)."""
    mixed = [*MANY[:300], *(e.with_(score=0.1) for e in MANY[300:])]
    await written_twice(ws, mixed)
    age(ws)
    store = fresh_store(ws)  # nothing rendered in this process
    hashed: list[str | None] = []
    key_of = memory_md_renderer.block_key

    def counted(section: str | None, lines: Sequence[str]) -> bytes:
        hashed.append(section)
        return key_of(section, lines)

    monkeypatch.setattr(memory_md_renderer, "block_key", counted)
    monkeypatch.setattr(memory_md_bytes, "block_key", counted)
    changed = one_more(list((await store.load(MAIN)).entries), 900)
    await write_and_keep(store, replace_with(changed))
    assert hashed == [ACTIVE]
    monkeypatch.undo()

    age(ws)
    later = fresh_store(ws)
    snapshot = await asyncio.to_thread(later._read, MAIN, None)
    assert snapshot.from_cache and snapshot.keys is not None
    text = ws.long_term_path(MAIN).read_text(encoding="utf-8")
    parsed = parse_memory(text, known={})
    assert dict(zip((e.id for e in snapshot.parsed.entries), snapshot.keys, strict=True)) == (
        parsed.keys
    )
    assert {e.id for e in parsed.entries if e.score < 0.2} == {e.id for e in MANY[300:]}
