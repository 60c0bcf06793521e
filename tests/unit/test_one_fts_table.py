"""SQLite's one FTS5 table for every scope (memory_core/storage/shared_fts.py): an index
of per-scope tables moves into it once, a crafted term never reaches another scope's
postings, and opening a workspace to use one scope touches no other scope's files."""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

import memory_core.recall.index.search_index as search_index
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall.request import SearchRequest
from tests.support import posting_ids, sql

OLD_TABLE = (
    "CREATE VIRTUAL TABLE fts_{sid} USING fts5(tokens, content='chunks', content_rowid='id',"
    " tokenize='unicode61 remove_diacritics 0')"
)
"""A scope's table as b42d7a9 and every revision before made it."""
PEERS = [ScopeKey(f"peer:{n}") for n in range(1, 13)]
QUERIES = ["green tea", "kayak lake", "数据库 连接池", "tea", "secret"]


def fts_tables(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        names = {
            str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
    conn.close()
    return {n for n in names if n.startswith("fts_")}


async def fill(core: MemoryCore) -> None:
    notes = ["green tea at noon", "kayak on the lake", "数据库 连接池 满了", "black tea"]
    for n, scope in enumerate([MAIN, *PEERS]):
        for k, note in enumerate(notes):
            if (n + k) % 3:
                await core.notes.append(scope, f"{note} ({scope.value})")
        await core.memories.capture(scope, f"a secret of {scope.value}: tea with {n} sugars")
    await core.memories.flush()


async def answers(core: MemoryCore) -> dict[tuple[str, str], list[tuple[str, float]]]:
    found = {}
    for scope in [MAIN, *PEERS]:
        for query in QUERIES:
            hits = await core.finder.search(scope, SearchRequest(query, limit=10, min_score=0.0))
            found[(scope.value, query)] = [(h.text, round(h.score, 9)) for h in hits]
    return found


async def test_per_scope_tables_move_into_the_shared_one(config: Config) -> None:
    """An index of per-scope tables (made here with the old DDL from the rows) is moved
    into the shared table at its next open, once, and answers every search as before."""
    async with MemoryCore.open(config) as core:
        await fill(core)
        before = await answers(core)
        sids = [int(r[0]) for r in await sql(core, "SELECT id FROM scopes")]
    db = Workspace.at(config.workspace_path).db_path
    with sqlite3.connect(db) as old:
        for sid in sids:
            old.execute(OLD_TABLE.format(sid=sid))
            old.execute(
                f"INSERT INTO fts_{sid} (rowid, tokens) SELECT id, tokens FROM chunks"
                " WHERE scope_id = ? ORDER BY id",
                (sid,),
            )
        old.execute("DROP TABLE fts_scoped")
        old.execute("DELETE FROM _migrations WHERE name = 'm014_one_fts_table'")
    old.close()
    assert {f"fts_{sid}" for sid in sids} <= fts_tables(db)

    async with MemoryCore.open(config) as core:
        assert await answers(core) == before
        await sql(core, "INSERT INTO fts_scoped (fts_scoped) VALUES ('integrity-check')")
        await core.notes.append(PEERS[0], "a paddle for the kayak")
        hits = await core.finder.search(PEERS[0], "paddle")
        assert [h.text for h in hits] == ["a paddle for the kayak"]
    assert not {name for name in fts_tables(db) if re.fullmatch(r"fts_[0-9]+", name)}
    assert "fts_scoped" in fts_tables(db)


async def test_a_term_shaped_like_another_scopes_key_stays_in_its_scope(
    config: Config,
) -> None:
    """Scope A's text holds `<B's id>xsecret`, the very key of B's term `secret` without
    A's prefix: neither scope's postings or counts see the other's. Ids 1 and 1x (10, 11)
    share leading digits, so a prefix without its `x` would mix them."""
    async with MemoryCore.open(config) as core:
        await fill(core)
        ids = {str(r[1]): int(r[0]) for r in await sql(core, "SELECT id, key FROM scopes")}
        main, other = ids[MAIN.value], ids[PEERS[-1].value]
        assert str(other).startswith(str(main)) and other != main
        crafted = f"{other}xsecret"
        await core.notes.append(MAIN, f"look: {crafted} and {main}xsecret")
        await core.reindex()
        own = {int(r[0]) for r in await sql(core, "SELECT id FROM chunks WHERE scope_id = ?", main)}
        theirs = {
            int(r[0]) for r in await sql(core, "SELECT id FROM chunks WHERE scope_id = ?", other)
        }
        assert await posting_ids(core, main, crafted) <= own
        assert await posting_ids(core, main, crafted)
        assert await posting_ids(core, other, "secret") <= theirs
        assert not await posting_ids(core, other, crafted)
        hits = await core.finder.search(PEERS[-1], SearchRequest(crafted, min_score=0.0))
        assert all(PEERS[-1].value in h.text for h in hits)
        hits = await core.finder.search(MAIN, SearchRequest(crafted, min_score=0.0))
        assert [h.text for h in hits] == [f"look: {crafted} and {main}xsecret"]
        # Each scope's document frequencies, counted from the shared vocabulary's range,
        # are exactly its own chunks' terms.
        for sid in (main, other, ids[PEERS[0].value]):
            counted: Counter[str] = Counter()
            for (tokens,) in await sql(core, "SELECT tokens FROM chunks WHERE scope_id = ?", sid):
                counted.update(set(str(tokens).split()))
            stored = await sql(core, "SELECT term, df FROM terms WHERE scope_id = ?", sid)
            assert {str(t): int(df) for t, df in stored} == dict(counted), sid


@pytest.mark.storage
async def test_opening_and_searching_one_scope_reads_no_other_scope(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workspace of many scopes: a new core that searches one of them lists no scope
    and stats the files of that scope and the main one only, yet sees an edit made to
    that scope's file while nothing ran."""
    async with MemoryCore.open(config) as core:
        await fill(core)
    target = PEERS[4]
    ws = Workspace.at(config.workspace_path)
    daily = sorted(ws.memory_dir(target).glob("????-??-??.md"))[-1]
    daily.write_text(daily.read_text() + "- 09:00:00 edited by hand: a red canoe\n")

    stated: list[str] = []
    real_stat = search_index.stat_files

    def stat_spy(workspace: Workspace, scope: ScopeKey) -> object:
        stated.append(scope.value)
        return real_stat(workspace, scope)

    def no_listing(self: Workspace) -> list[ScopeKey]:
        raise AssertionError("the workspace's scopes were listed")

    monkeypatch.setattr(search_index, "stat_files", stat_spy)
    monkeypatch.setattr(Workspace, "scopes", no_listing)
    async with MemoryCore.open(config) as core:
        hits = await core.finder.search(target, "canoe")
        assert [h.text for h in hits] == ["edited by hand: a red canoe"]
    assert set(stated) == {MAIN.value, target.value}
