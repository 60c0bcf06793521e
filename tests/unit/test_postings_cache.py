"""A search's postings may come from what an earlier search read (SQLite keeps them per
connection, memory_core/recall/index/postings_cache.py): every write, delete, reindex and
another process's write must still be seen by the next search, whose top N stays the
brute-force one. Run on both backends (PostgreSQL reads its postings in SQL each time)."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
from collections.abc import Mapping
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.base.chunks import Chunk, ChunkKind
from memory_core.base.clock import ManualClock
from memory_core.base.scope import MAIN
from memory_core.base.sql import Connection
from memory_core.base.text import tokenize
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall.index import writes
from tests.conftest import START
from tests.support import database, index_of
from tests.unit.test_lexical_candidates import same, top_n

pytestmark = pytest.mark.storage

ROOT = Path(__file__).resolve().parents[2]
DAY = date(2026, 1, 5)
QUESTIONS = [{"green": 1.0, "tea": 1.0}, {"tea": 1.0}, {"kayak": 1.0, "green": 2.0}]
NOTES = [
    "green tea in the morning",
    "tea with milk",
    "a green bench beside the oak",
    "black tea and a kayak",
    "green walls",
    "tea tea and more tea",
]


def search_one(
    conn: Connection, *, sid: int, terms: dict[str, float], wanted: int
) -> tuple[list[tuple[float, int]], list[tuple[float, int]], set[int]]:
    return top_n(conn, sid, terms, [], [], wanted)


async def search_all(core: MemoryCore, wanted: int = 3) -> list[set[int]]:
    """Each question's top N, checked against the brute force; the ids found."""
    sid = await index_of(core).scope_id(MAIN)
    assert sid is not None
    found_ids = []
    for terms in QUESTIONS:
        found, expected, own = await database(core).read(
            partial(search_one, sid=sid, terms=terms, wanted=wanted)
        )
        same(found, expected)
        assert {i for _, i in found} <= own
        found_ids.append({i for _, i in found})
    return found_ids


def daily_file(core: MemoryCore, lines: list[str]) -> None:
    path = core.workspace.daily_path(MAIN, DAY)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {DAY}\n\n" + "".join(f"- 09:00:00 {line}\n" for line in lines), "utf-8")


async def ids_of(core: MemoryCore, text: str) -> set[int]:
    rows = await database(core).read(
        lambda conn: conn.execute("SELECT id FROM chunks WHERE text = ?", (text,)).fetchall()
    )
    return {int(r[0]) for r in rows}


async def test_a_write_a_delete_and_a_reindex_are_seen_by_the_next_search(
    config: Config,
) -> None:
    async with MemoryCore.open(config, clock=ManualClock(START)) as core:
        daily_file(core, NOTES)
        await index_of(core).sync_scope(MAIN, force=True)
        await search_all(core)  # every question's terms read once, and kept
        best = "green tea green tea kayak"
        await core.notes.append(MAIN, best)
        new = await ids_of(core, best)
        tops = await search_all(core)
        assert new and new <= tops[0] and new <= tops[2]  # it leads both questions it fits

        daily_file(core, NOTES[1:])  # the first note deleted, the others rewritten
        await index_of(core).sync_scope(MAIN, force=True)
        tops = await search_all(core)
        gone = await ids_of(core, NOTES[0])
        assert not gone

        await core.reindex()
        tops = await search_all(core)
        new = await ids_of(core, best)  # ids given again by the reindex
        assert new and new <= tops[0] and new <= tops[2]


async def test_a_write_rolled_back_leaves_the_top_n_exact(config: Config) -> None:
    """A write that fails after its chunk reached the postings leaves nothing behind
    that could hide a chunk, and the id it held may be taken again by another text."""
    async with MemoryCore.open(config, clock=ManualClock(START)) as core:
        daily_file(core, NOTES)
        await index_of(core).sync_scope(MAIN, force=True)
        await search_all(core)
        sid = await index_of(core).scope_id(MAIN)
        assert sid is not None
        text = "green tea green tea green tea"
        chunk = Chunk(line_from=99, line_to=99, text=text, created_at=START)

        def failing(conn: Connection) -> None:
            tokens = " ".join(tokenize(text))
            writes.insert_chunks(conn, sid, "memory/x.md", ChunkKind.DAILY, [(chunk, tokens)])
            raise RuntimeError("the write fails after its insert")

        with pytest.raises(RuntimeError):
            await database(core).write(failing)
        assert not await ids_of(core, text)
        await search_all(core)
        await core.notes.append(MAIN, "kayak kayak")  # may take the id rolled back
        tops = await search_all(core)
        assert await ids_of(core, "kayak kayak") <= tops[2]


WRITER = """
import asyncio, sys
from memory_core.base.scope import MAIN
from memory_core.config import load_config
from memory_core.engine import MemoryCore

async def main() -> None:
    config = load_config(None, env=dict(__import__("os").environ), workspace=sys.argv[1])
    async with MemoryCore.open(config) as core:
        await core.notes.append(MAIN, sys.argv[2])

asyncio.run(main())
"""


async def test_another_process_write_is_seen_by_the_next_search(
    config: Config, workspace: Path, storage_env: Mapping[str, str]
) -> None:
    async with MemoryCore.open(config, clock=ManualClock(START)) as core:
        daily_file(core, NOTES)
        await index_of(core).sync_scope(MAIN, force=True)
        await search_all(core)
        best = "kayak green tea kayak green"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CHATMEM_")},
            **storage_env,
            "PYTHONPATH": str(ROOT),
        }
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", WRITER, str(workspace), best],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        new = await ids_of(core, best)
        assert new
        tops = await search_all(core)
        assert new <= tops[0] and new <= tops[2]


WORDS = ["tea", "green", "kayak", "oak", "喜欢", "女儿"]
note_text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
step = st.one_of(
    st.tuples(st.just("append"), note_text),
    st.tuples(st.just("rewrite"), st.lists(note_text, max_size=5)),
    st.tuples(st.just("search"), st.just("")),
)
serial = itertools.count()


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(step, min_size=2, max_size=10), wanted=st.integers(1, 5))
def test_any_sequence_of_writes_and_searches_keeps_the_top_n_exact(
    config: Config, steps: list[tuple[str, Any]], wanted: int
) -> None:
    """Appends (new chunks), rewrites of a daily file (its chunks deleted and written
    again) and searches in any order, on one core: each search is the brute force's."""

    async def check() -> None:
        day = date(2026, 2, 1 + next(serial) % 27)
        async with MemoryCore.open(config, clock=ManualClock(START)) as core:
            await core.notes.append(MAIN, "tea green")
            for kind, value in steps:
                if kind == "append":
                    await core.notes.append(MAIN, value)
                elif kind == "rewrite":
                    path = core.workspace.daily_path(MAIN, day)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    lines = "".join(f"- 10:00:00 {v}\n" for v in value)
                    path.write_text(f"# {day}\n\n{lines}", "utf-8")
                    await index_of(core).sync_scope(MAIN, force=True)
                await search_all_words(core, wanted)

    asyncio.run(check())


async def search_all_words(core: MemoryCore, wanted: int) -> None:
    sid = await index_of(core).scope_id(MAIN)
    assert sid is not None
    for terms in ({"tea": 1.0, "green": 1.0}, {"喜欢": 1.0, "女儿": 0.5, "oak": 2.0}):
        found, expected, _ = await database(core).read(
            partial(search_one, sid=sid, terms=terms, wanted=wanted)
        )
        same(found, expected)
