"""The long-term file's parse kept on disk (`longterm/parse_cache.py`): a new process reads
an unchanged file without parsing it, parses only the blocks a person changed, and never
serves a parse for bytes the file does not hold.

Each "new process" is a fresh `LongTermStore` (and nothing remembered in memory); what a
read cost is asserted through the store's counters, never through time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.base.entries import ArchiveReason, MemoryClass, MemoryEntry
from memory_core.base.locks import LockRegistry
from memory_core.base.scope import MAIN
from memory_core.base.workspace import Workspace
from memory_core.longterm import entities, fact_keys, parse_cache, store
from memory_core.longterm.memory_md_parser import ParsedMemory, clear_parse_cache, parse_memory
from memory_core.longterm.memory_md_renderer import clear_render_cache, render_memory
from memory_core.longterm.store import LongTermStore
from tests.support import forget_what_texts_taught

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOUR_AGO = time.time() - 3600


def entry(number: int, content: str | None = None, **fields: object) -> MemoryEntry:
    made = MemoryEntry(
        f"e{number:04d}",
        content or f"memory number {number} about tea and 第{number}个项目",
        "fact",
        0.3 + (number % 60) / 100,
        NOW - timedelta(days=number % 9),
        NOW,
        NOW,
        hits=number % 4,
    )
    return made.with_(**fields) if fields else made


ENTRIES = [entry(n) for n in range(40)]


def fresh_store(ws: Workspace) -> LongTermStore:
    """What a new process has: a store, and nothing remembered."""
    clear_parse_cache()
    clear_render_cache()
    forget_what_texts_taught()
    return LongTermStore(ws, LockRegistry(ws.locks_dir), parse_cache_min_bytes=0)


async def write_and_keep(
    store: LongTermStore,
    change: Callable[[ParsedMemory], tuple[list[MemoryEntry], object]],
    now: datetime = NOW,
) -> None:
    """A write as a process that then closes leaves it: its parse and entities kept."""
    await store.update(MAIN, change, now)
    await store.kept()


def write_by_hand(path: Path, text: str, *, mtime: float | None = HOUR_AGO) -> None:
    """A person's (or another program's) write; dated an hour back unless `mtime` is None,
    as the files a process finds at its start are."""
    path.write_text(text, encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def overwrite_in_place(path: Path, data: bytes) -> None:
    with path.open("r+b") as handle:
        handle.write(data)


def replace_with(
    entries: list[MemoryEntry],
) -> Callable[[ParsedMemory], tuple[list[MemoryEntry], None]]:
    def change(parsed: ParsedMemory) -> tuple[list[MemoryEntry], None]:
        return list(entries), None

    return change


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = Workspace.at(tmp_path)
    write_by_hand(workspace.long_term_path(MAIN), render_memory(ENTRIES, now=NOW))
    return workspace


async def test_an_unchanged_file_is_not_parsed_again(ws: Workspace) -> None:
    first = fresh_store(ws)
    parsed = await first.load(MAIN)
    assert first.reads.parsed_blocks == len(ENTRIES)  # no cache yet: every block

    second = fresh_store(ws)
    again = await second.load(MAIN)
    assert second.reads.parsed_blocks == 0
    assert second.reads.cache_reads == 1
    assert again == parsed == parse_memory(ws.long_term_path(MAIN).read_text())
    assert again.lines == parsed.lines


async def test_a_stamp_that_vouches_spares_even_the_read(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    await fresh_store(ws).load(MAIN)
    hashed: list[int] = []
    digest = store._digest

    def counting(data: bytes) -> bytes:
        hashed.append(len(data))
        return digest(data)

    monkeypatch.setattr(store, "_digest", counting)
    second = fresh_store(ws)
    await second.load(MAIN)
    assert second.reads.cache_reads == 1
    assert hashed == []  # the file's bytes were never read


async def test_an_edited_block_is_the_only_one_parsed(ws: Workspace) -> None:
    path = ws.long_term_path(MAIN)
    await fresh_store(ws).load(MAIN)
    text = path.read_text()
    edited = text.replace("memory number 7 about tea", "memory number 7 about green tea")
    assert edited != text
    write_by_hand(path, edited)

    later = fresh_store(ws)
    parsed = await later.load(MAIN)
    assert later.reads.parsed_blocks == 1
    assert parsed == parse_memory(edited)
    assert parsed.lines == parse_memory(edited).lines
    assert "memory number 7 about green tea and 第7个项目" in [e.content for e in parsed.entries]


async def test_a_same_size_edit_within_the_clock_tick_is_seen(ws: Workspace) -> None:
    """The write the cache was made at is racy (the file's mtime is that instant): an
    edit of the same size that leaves the mtime as it was must still be found, by the
    bytes' hash, as the in-memory cache finds it."""
    path = ws.long_term_path(MAIN)
    writer = fresh_store(ws)
    await write_and_keep(writer, replace_with(ENTRIES))  # the mark is racy: just written
    before = path.stat()
    text = path.read_text()
    edited = text.replace("about tea and 第3个", "about TEA and 第3个")
    assert len(edited.encode()) == len(text.encode())
    overwrite_in_place(path, edited.encode())  # the inode stays too
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_mtime_ns, path.stat().st_size, path.stat().st_ino) == (
        before.st_mtime_ns,
        before.st_size,
        before.st_ino,
    )

    reader = fresh_store(ws)
    parsed = await reader.load(MAIN)
    assert reader.reads.parsed_blocks == 1
    assert "memory number 3 about TEA and 第3个项目" in [e.content for e in parsed.entries]


async def test_a_copy_of_the_same_bytes_is_served_and_restamped(ws: Workspace) -> None:
    path = ws.long_term_path(MAIN)
    await fresh_store(ws).load(MAIN)
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data)  # another inode and mtime: a restore, a copy
    os.utime(path, (HOUR_AGO + 5, HOUR_AGO + 5))

    copied = fresh_store(ws)
    assert (await copied.load(MAIN)) == parse_memory(data.decode())
    assert copied.reads.parsed_blocks == 0
    assert copied.reads.cache_reads == 1
    mark = parse_cache.read_mark(copied.cache_files(MAIN))  # type: ignore[arg-type]
    assert mark is not None
    assert mark.stamp[2] == path.stat().st_ino


async def test_broken_blocks_stay_quarantined_through_the_cache(ws: Workspace) -> None:
    path = ws.long_term_path(MAIN)
    text = path.read_text().replace("| 0.35 |", "| lots |", 1)
    write_by_hand(path, text)
    first = await fresh_store(ws).load(MAIN)
    assert [q.reason for q in first.quarantined] == ["score 'lots' is not a number"]

    cached = fresh_store(ws)
    again = await cached.load(MAIN)
    assert cached.reads.cache_reads == 1
    assert [(q.text, q.line, q.reason) for q in again.quarantined] == [
        (q.text, q.line, q.reason) for q in first.quarantined
    ]
    # Fixed by hand a minute later: the block is an entry again, and only it is parsed.
    write_by_hand(path, text.replace("| lots |", "| 0.35 |"), mtime=HOUR_AGO + 60)
    fixed = fresh_store(ws)
    parsed = await fixed.load(MAIN)
    assert parsed.quarantined == []
    assert len(parsed.entries) == len(ENTRIES)
    assert fixed.reads.parsed_blocks == 1


@pytest.mark.parametrize("garbage", [b"", b"\x00\x01 not marshal", b"\xe9" * 4000])
async def test_a_torn_or_foreign_cache_is_ignored(ws: Workspace, garbage: bytes) -> None:
    first = fresh_store(ws)
    parsed = await first.load(MAIN)
    files = first.cache_files(MAIN)
    assert files is not None
    files.data.write_bytes(garbage)
    later = fresh_store(ws)
    assert (await later.load(MAIN)) == parsed
    assert later.reads.parsed_blocks == len(ENTRIES)


async def test_a_write_leaves_the_cache_of_what_it_wrote(ws: Workspace) -> None:
    writer = fresh_store(ws)
    changed = [*ENTRIES[:10], entry(99, "a new memory, written by the store")]
    await write_and_keep(writer, replace_with(changed))
    os.utime(ws.long_term_path(MAIN), (HOUR_AGO, HOUR_AGO))  # no stamp vouches: the hash will

    reader = fresh_store(ws)
    parsed = await reader.load(MAIN)
    assert reader.reads.parsed_blocks == 0
    assert reader.reads.cache_reads == 1
    assert parsed == parse_memory(ws.long_term_path(MAIN).read_text())


async def test_a_write_leaves_what_matching_and_entities_need_of_each_entry(
    ws: Workspace,
) -> None:
    named = [entry(50, "my cat is called Max and I live in Berlin"), *ENTRIES[:5]]
    await write_and_keep(fresh_store(ws), replace_with(named))
    reader = fresh_store(ws)  # nothing remembered...
    await reader.load(MAIN)
    for made in named:  # ...but what the cache brought
        assert fact_keys.known_skeleton(made.content) == fact_keys.skeleton(made.content)
        found = entities.known_named(made.content)
        assert found is not None
        forget_what_texts_taught()
        assert found == entities.named_in(made.content)
        await fresh_store(ws).load(MAIN)
    assert entities.known_named(named[0].content) == (
        ("Max", entities.EntityKind.PET, ("my cat",), "the user's cat"),
        ("Berlin", entities.EntityKind.PLACE, (), "where the user lives"),
    )


async def test_a_small_file_keeps_no_cache(ws: Workspace) -> None:
    small = LongTermStore(ws, LockRegistry(ws.locks_dir))  # the default threshold: 1 MiB
    await small.load(MAIN)
    await write_and_keep(small, replace_with(ENTRIES[:3]))
    assert not (ws.state_dir / "parsed").exists() or not any((ws.state_dir / "parsed").iterdir())


async def test_a_file_not_all_utf8_is_not_cached(ws: Workspace) -> None:
    path = ws.long_term_path(MAIN)
    first = fresh_store(ws)
    await first.load(MAIN)
    files = first.cache_files(MAIN)
    assert files is not None and files.data.exists()
    path.write_bytes(path.read_bytes().replace("第5个".encode(), b"\xb5\xda5\xb8\xf6"))
    parsed = await fresh_store(ws).load(MAIN)
    assert len(parsed.quarantined) == 1
    assert not files.data.exists() and not files.stamp.exists()


# --- the values survive the cache exactly ------------------------------------------------

times = st.datetimes(
    min_value=datetime(1000, 1, 2), max_value=datetime(8999, 12, 30), timezones=st.just(UTC)
)


@st.composite
def entries(draw: st.DrawFn) -> MemoryEntry:
    return MemoryEntry(
        id=draw(st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True)),
        content=draw(st.text(min_size=1, max_size=40)),
        category=draw(st.sampled_from(["fact", "preference", "todo"])),
        score=draw(st.one_of(st.floats(0, 1), st.just(1), st.just(-0.0))),
        created_at=draw(times),
        last_activated=draw(times),
        scored_at=draw(times),
        hits=draw(st.integers(0, 10**6)),
        source_session=draw(st.one_of(st.none(), st.text(max_size=8))),
        confidence=draw(st.one_of(st.none(), st.floats(0, 1))),
        expires_at=draw(st.one_of(st.none(), times)),
        pinned=draw(st.booleans()),
        archived=draw(st.one_of(st.none(), st.sampled_from(ArchiveReason))),
        sessions=tuple(draw(st.lists(st.text(max_size=6), max_size=3))),
        memory_class=draw(st.one_of(st.none(), st.sampled_from(MemoryClass))),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(entries(), max_size=6, unique_by=lambda e: e.id))
def test_encode_decode_gives_back_every_value(items: list[MemoryEntry]) -> None:
    parsed = ParsedMemory(
        entries=items,
        lines={e.id: (n, n + 2) for n, e in enumerate(items)},
        keys={e.id: bytes([n]) * 16 for n, e in enumerate(items)},
    )
    data = parse_cache.encode(parsed, b"d" * 16, 0.2)
    assert data is not None
    back = parse_cache.decode(data)
    assert back is not None
    assert back.digest == b"d" * 16
    assert back.parsed.lines == parsed.lines
    assert dict(zip([e.id for e in back.parsed.entries], back.keys, strict=True)) == parsed.keys
    for mine, theirs in zip(back.parsed.entries, items, strict=True):
        for name in MemoryEntry.__slots__:
            ours, original = getattr(mine, name), getattr(theirs, name)
            assert ours == original or (ours != ours and original != original)  # NaN
            assert type(ours) is type(original)
        assert str(mine.score) == str(theirs.score)  # -0.0 and 1 kept as they were
        assert mine.created_at.tzinfo is UTC
