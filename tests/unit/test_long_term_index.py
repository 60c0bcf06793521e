"""Long-term writes update the index by difference, and `path:line` stays true."""

from __future__ import annotations

from datetime import UTC

import pytest

import memory_core.recall.index.search as search
import memory_core.recall.index.writes as writes
from memory_core.base.chunks import ChunkKind
from memory_core.base.scope import MAIN
from memory_core.base.sql import Connection
from memory_core.engine import MemoryCore
from memory_core.recall.index import SyncStats
from memory_core.recall.index.files import prepare_file
from memory_core.recall.index.long_term_lines import LINE_FROM
from memory_core.recall.request import SearchRequest
from tests.support import long_term_chunks_and_file, sql

pytestmark = pytest.mark.storage


async def long_term_chunks(core: MemoryCore) -> list[tuple[str, str]]:
    rows = await sql(core, "SELECT ref, text FROM chunks WHERE kind = 'long_term' ORDER BY ref")
    return [(str(r[0]), str(r[1])) for r in rows]


def header_line(core: MemoryCore, entry_id: str) -> int:
    lines = core.workspace.long_term_path(MAIN).read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if line.startswith(f"### [{entry_id}]"))


async def test_captures_index_only_what_changed_and_lines_follow_the_file(
    core: MemoryCore,
) -> None:
    first, _ = await core.memories.capture(MAIN, "喜欢喝乌龙茶 oolong tea", importance="low")
    second, _ = await core.memories.capture(MAIN, "works on the billing service", importance="high")
    third, _ = await core.memories.capture(MAIN, "住在杭州西湖边", importance="medium")
    entries = {e.id: e.content for e in await core.memories.entries(MAIN)}
    assert dict(await long_term_chunks(core)) == entries
    # The low-importance entry moved down as better ones arrived; its hit says where it is now.
    [hit] = await core.finder.search(MAIN, SearchRequest("oolong", kinds=[ChunkKind.LONG_TERM]))
    assert hit.ref == first.id
    assert hit.line_from == header_line(core, first.id)
    await core.memories.edit(MAIN, second.id, "works on the payments service")
    await core.memories.forget(MAIN, third.id)
    assert dict(await long_term_chunks(core)) == {
        first.id: first.content,
        second.id: "works on the payments service",
    }
    assert await core.finder.search(MAIN, "billing") == []
    assert [h.ref for h in await core.finder.search(MAIN, "payments")] == [second.id]
    assert await core.finder.search(MAIN, "杭州") == []


async def test_a_hand_edit_before_a_write_is_not_lost(core: MemoryCore) -> None:
    entry, _ = await core.memories.capture(MAIN, "likes hiking in the alps")
    await core.memories.flush()
    path = core.workspace.long_term_path(MAIN)
    path.write_text(
        path.read_text(encoding="utf-8").replace("hiking in the alps", "sailing on the lake"),
        encoding="utf-8",
    )
    # The next write starts from the hand-edited file, which the index has not seen yet.
    await core.memories.capture(MAIN, "drinks coffee black")
    await core.memories.flush()
    texts = dict(await long_term_chunks(core))
    assert texts[entry.id] == "likes sailing on the lake"
    assert [h.ref for h in await core.finder.search(MAIN, "sailing")] == [entry.id]
    assert await core.finder.search(MAIN, "alps") == []


async def test_a_hand_edited_file_is_indexed_again_entry_by_entry(core: MemoryCore) -> None:
    kept, _ = await core.memories.capture(MAIN, "drinks oolong tea every morning", importance="low")
    edited, _ = await core.memories.capture(MAIN, "works on the billing service")
    dropped, _ = await core.memories.capture(MAIN, "住在杭州西湖边", importance="high")
    await core.memories.flush()
    path = core.workspace.long_term_path(MAIN)
    text = path.read_text(encoding="utf-8")
    dropped_block = text[
        text.index(f"### [{dropped.id}]") : text.index("\n### ", text.index(f"### [{dropped.id}]"))
        + 1
    ]
    text = text.replace(dropped_block, "").replace("billing service", "payments service")
    text = text.replace(
        "## Archived Memories",
        "### [byhand1] fact | 0.50 | 2026-02-01 | 0\nplays the cello on sundays\n\n## Archived Memories",
    )
    path.write_text(text, encoding="utf-8")

    index = core.guard.index
    assert index is not None
    stats = await index.sync_scope(MAIN)
    # The edited entry and the new one tokenized; the edited and the dropped one removed;
    # the one left alone only moved.
    assert (stats.files_indexed, stats.chunks_added, stats.chunks_removed) == (1, 2, 2)
    assert dict(await long_term_chunks(core)) == {
        kept.id: "drinks oolong tea every morning",
        edited.id: "works on the payments service",
        "byhand1": "plays the cello on sundays",
    }
    assert await core.finder.search(MAIN, "billing") == []
    assert await core.finder.search(MAIN, "杭州") == []
    [hit] = await core.finder.search(MAIN, SearchRequest("cello", kinds=[ChunkKind.LONG_TERM]))
    assert (hit.ref, hit.line_from) == ("byhand1", header_line(core, "byhand1"))
    [hit] = await core.finder.search(MAIN, SearchRequest("oolong", kinds=[ChunkKind.LONG_TERM]))
    assert hit.line_from == header_line(core, kept.id)
    # Unchanged since: nothing is read again.
    again = await index.sync_scope(MAIN)
    assert (again.files_indexed, again.chunks_added, again.chunks_removed) == (0, 0, 0)


async def test_a_sync_overtaken_by_another_writer_indexes_the_file_as_it_now_is(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes sync one long-term file: between this sync's read of the index and
    its write, the other one writes a newer file (an entry added above the others, every
    line moved) and indexes it. The difference computed from the older read no longer
    applies; the file is indexed as it now is, one chunk per entry on its own line."""
    first, _ = await core.memories.capture(MAIN, "drinks oolong tea every morning")
    second, _ = await core.memories.capture(MAIN, "works on the billing service")
    await core.memories.flush()
    index = core.guard.index
    assert index is not None
    path = core.workspace.long_term_path(MAIN)
    path.write_text(  # a hand edit this process's next sync compares entry by entry
        path.read_text(encoding="utf-8").replace("billing service", "payments service"),
        encoding="utf-8",
    )
    relative = core.workspace.relative(path)
    sid = await index.scope_id(MAIN)
    assert sid is not None
    read_held = search.held_chunks

    def overtaken(conn: Connection, scope_id: int, file: str) -> dict[str, tuple[str, str]] | None:
        held = read_held(conn, scope_id, file)
        text = path.read_text(encoding="utf-8")
        top = text.index("### [")
        path.write_text(
            text[:top]
            + "### [other1] fact | 0.90 | 2026-02-01 | 0\nplays the cello\n\n"
            + text[top:],
            encoding="utf-8",
        )
        item = prepare_file(core.workspace, path, UTC)
        assert item is not None
        writes.replace_file(conn, scope_id, item, SyncStats())  # the other process's index
        monkeypatch.setattr(search, "held_chunks", read_held)
        return held

    monkeypatch.setattr(search, "held_chunks", overtaken)
    await index.sync_scope(MAIN)

    assert dict(await long_term_chunks(core)) == {
        first.id: "drinks oolong tea every morning",
        second.id: "works on the payments service",
        "other1": "plays the cello",
    }
    rows = await sql(
        core,
        f"SELECT c.ref, {LINE_FROM} FROM chunks AS c WHERE c.kind = 'long_term' AND c.path = ?",
        relative,
    )
    assert {str(ref): int(line) for ref, line in rows} == {
        ref: header_line(core, ref) for ref in (first.id, second.id, "other1")
    }
    assert core.degraded_reason is None


async def test_lines_after_captures_edits_and_forgets_equal_a_full_reindex(
    core: MemoryCore,
) -> None:
    """Entries arriving above, between and below the others, edited and forgotten: every
    chunk of the file sits where a full reindex of the file puts it."""
    made = []
    for n, importance in enumerate(["low", "high", "medium", "low", "high", "medium", "low"]):
        entry, _ = await core.memories.capture(
            MAIN, f"fact number {n} of many", importance=importance
        )
        made.append(entry)
    await core.memories.edit(MAIN, made[2].id, "fact number two, now much longer than before")
    await core.memories.forget(MAIN, made[4].id)
    await core.memories.capture(MAIN, "a late and important fact", importance="high")
    await core.memories.flush()
    held, whole = await long_term_chunks_and_file(core)
    assert [(ref, first, last, text) for ref, first, last, _, text in held] == whole
    assert {piece for _, _, _, piece, _ in held} == {0}
    for entry in made:
        if entry.id != made[4].id:
            assert (entry.id, header_line(core, entry.id)) in {
                (ref, first) for ref, first, *_ in held
            }
