"""A long-term chunk's lines live in `long_term_lines` (one row each, written and deleted
with the chunk), and every hit and every read of lines takes them from there."""

from __future__ import annotations

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall.request import SearchRequest
from tests.support import (
    LINES_BACK_IN_CHUNKS,
    assert_lines_placed,
    long_term_chunks_and_file,
    sql,
    sql_write,
)

pytestmark = pytest.mark.storage

PEER = ScopeKey("peer:alice")


def lines_of(core: MemoryCore, text: str) -> tuple[int, int]:
    """The first and last line of the entry whose body is `text`, as the file has them."""
    lines = core.workspace.long_term_path(MAIN).read_text(encoding="utf-8").splitlines()
    body = next(n for n, line in enumerate(lines, 1) if line.strip() == text)
    header = max(n for n in range(1, body) if lines[n - 1].startswith("### ["))
    return header, body


async def test_a_reordering_write_moves_only_line_rows_and_hits_follow(core: MemoryCore) -> None:
    facts = [f"fact number {n} about the sailing club" for n in range(6)]
    for text, importance in zip(
        facts, ["low", "high", "low", "medium", "high", "low"], strict=True
    ):
        await core.memories.capture(MAIN, text, importance=importance)
    await core.memories.flush()
    texts = await sql(core, "SELECT id, text, tokens FROM chunks WHERE kind = 'long_term'")
    # Entries arriving above the others move them all down.
    for n in range(3):
        await core.memories.capture(MAIN, f"an urgent item {n} for today", importance="high")
    await core.memories.flush()
    await assert_lines_placed(core)
    # The chunks of the entries that stayed were not written again: their lines moved.
    after = await sql(core, "SELECT id, text, tokens FROM chunks WHERE kind = 'long_term'")
    assert set(map(tuple, texts)) <= set(map(tuple, after))
    held, whole = await long_term_chunks_and_file(core)
    assert [(ref, first, last, text) for ref, first, last, _, text in held] == whole
    for text in facts:
        [hit] = await core.finder.search(
            MAIN, SearchRequest(text, kinds=[ChunkKind.LONG_TERM], limit=1)
        )
        assert (hit.line_from, hit.line_to) == lines_of(core, text)


async def test_line_rows_go_with_their_chunks(core: MemoryCore) -> None:
    """Forgotten entries, a reindex and a scope erased leave no line row behind, and
    every chunk left has its own."""
    made = [(await core.memories.capture(MAIN, f"fact {n} of the main scope"))[0] for n in range(4)]
    await core.memories.capture(PEER, "alice keeps bees")
    await core.memories.flush()
    await core.memories.forget(MAIN, made[1].id)
    await core.memories.flush()
    await assert_lines_placed(core)
    await core.reindex()
    await assert_lines_placed(core)
    assert len(await sql(core, "SELECT chunk_id FROM long_term_lines")) == 4
    await core.erase(scope=PEER, by="test")
    await assert_lines_placed(core)
    assert len(await sql(core, "SELECT chunk_id FROM long_term_lines")) == 3


async def test_an_index_from_before_gets_its_lines_at_open(config: Config) -> None:
    """A database made when the lines were columns of `chunks` (before m018): the first
    open moves them to their table, and hits cite the same lines."""
    async with MemoryCore.open(config) as core:
        for n, importance in enumerate(["low", "high", "medium"]):
            await core.memories.capture(MAIN, f"fact {n} about the boat", importance=importance)
        await core.memories.flush()
        before = await core.finder.search(MAIN, "boat")
        await sql_write(core, *LINES_BACK_IN_CHUNKS)
        lines = await sql(core, "SELECT ref, line_from FROM chunks WHERE kind = 'long_term'")
        assert {int(line) for _, line in lines} != {0}

    async with MemoryCore.open(config) as core:
        await assert_lines_placed(core)
        held, whole = await long_term_chunks_and_file(core)
        assert [(ref, first, last, text) for ref, first, last, _, text in held] == whole
        after = await core.finder.search(MAIN, "boat")
        assert [(h.ref, h.line_from, h.line_to) for h in after] == [
            (h.ref, h.line_from, h.line_to) for h in before
        ]
