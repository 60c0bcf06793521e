"""The search index degraded and repaired: a broken or missing index still answers from the files, and repair brings it back."""

from __future__ import annotations

import asyncio
import json
import logging
import random
from datetime import timedelta
from pathlib import Path

import pytest

from adapters import cli
from memory_core.base.clock import ManualClock
from memory_core.base.scope import MAIN
from memory_core.config import Config, load_config
from memory_core.engine import MemoryCore
from memory_core.recall.request import SearchRequest
from tests.conftest import START
from tests.postgres import with_storage
from tests.support import (
    database,
    index_of,
    sql_write,
)
from tests.unit.index_support import (
    DAY,
    texts,
    write,
)

pytestmark = pytest.mark.storage


# --- degraded mode and repair -----------------------------------------------------------

QUERIES = ["ramen Alice", "postgres billing", "数据库连接池", "护照 passport", "kayak"]


async def build_small_workspace(core: MemoryCore) -> None:
    await core.memories.capture(MAIN, "we picked postgres for the billing service")
    await core.memories.capture(MAIN, "护照八月到期，要记得续签 passport")
    await core.notes.append(
        MAIN, "lunch with Alice at the ramen place", now=START - timedelta(days=2)
    )
    await core.notes.append(MAIN, "订单系统的数据库连接池耗尽了")
    await core.notes.append(MAIN, "Alice moved to the platform team")
    write(core, "memory/summary/2026-02.md", "# 2026-02\n\nkayak trip, ramen tour\n")
    await index_of(core).sync_scope(MAIN)


def corrupt(workspace: Path) -> Path:
    db = workspace / ".chatmem" / "index.sqlite3"
    for extra in ("-wal", "-shm"):
        db.with_name(db.name + extra).unlink(missing_ok=True)
    db.write_bytes(random.Random(5).randbytes(16384))
    return db


@pytest.mark.sqlite_only
async def test_corrupt_index_degrades_to_files_and_reindex_repairs(
    config: Config, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with MemoryCore.open(config, clock=clock) as core:
        await build_small_workspace(core)
        healthy = {q: await core.finder.search(MAIN, SearchRequest(q, limit=3)) for q in QUERIES}
    assert all(healthy.values())
    db = corrupt(Path(config.workspace))

    caplog.set_level(logging.INFO, logger="memory_core")
    async with MemoryCore.open(config, clock=clock) as core:
        assert core.degraded_reason is not None and "index.sqlite3" in core.degraded_reason
        assert core.guard.index is None
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert any("database unavailable" in r.getMessage() for r in warnings)
        caplog.clear()
        for query, expected in healthy.items():
            hits = await core.finder.search(MAIN, SearchRequest(query, limit=3))
            assert hits, query
            assert (hits[0].path, hits[0].line_from, hits[0].text) == (
                expected[0].path,
                expected[0].line_from,
                expected[0].text,
            ), query
            assert [h.score for h in hits] == pytest.approx([h.score for h in expected], abs=1e-9)
        assert any("degraded search" in r.getMessage() for r in caplog.records)
        # Writing still works; reads of files too.
        await core.notes.append(MAIN, "note written while degraded: sourdough")
        assert texts(await core.finder.search(MAIN, "sourdough")) == [
            "note written while degraded: sourdough"
        ]
        assert (await core.finder.read(MAIN, DAY)).text.count("sourdough") == 1

        stats = await core.reindex()
        assert core.degraded_reason is None and core.guard.index is not None
        assert stats.files_indexed == 4
        aside = list(db.parent.glob("index.sqlite3.corrupt-*"))
        assert aside and aside[0].read_bytes() == random.Random(5).randbytes(16384)
        for query, expected in healthy.items():
            hits = await core.finder.search(MAIN, SearchRequest(query, limit=3))
            assert texts(hits)[:1] == texts(expected)[:1]
        assert texts(await core.finder.search(MAIN, "sourdough")) == [
            "note written while degraded: sourdough"
        ]
        assert (await core.guard.index.sync_scope(MAIN)).files_indexed == 0
    async with MemoryCore.open(config, clock=clock) as core:
        assert core.degraded_reason is None
        assert texts(await core.finder.search(MAIN, SearchRequest("kayak", min_score=0.0))) == [
            "kayak trip, ramen tour"
        ]


async def test_index_failure_at_search_time_falls_back(core: MemoryCore) -> None:
    await build_small_workspace(core)
    expected = await core.finder.search(MAIN, "postgres billing")
    if database(core).dialect.name == "sqlite":
        await sql_write(core, ("DROP TABLE fts_scoped", ()))
    else:
        await sql_write(core, ("DROP FUNCTION chatmem_postings CASCADE", ()))
    hits = await core.finder.search(MAIN, "postgres billing")
    assert core.guard.index is None and core.degraded_reason is not None
    assert texts(hits) == texts(expected)


def test_cli_reindex_repairs_a_corrupt_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.chdir(tmp_path)  # no ./chatmem.toml
    monkeypatch.delenv("CHATMEM_WORKSPACE", raising=False)
    config = load_config(None, env=with_storage(), workspace=workspace)

    async def build() -> None:
        async with MemoryCore.open(config, clock=ManualClock(START)) as core:
            await build_small_workspace(core)

    asyncio.run(build())
    db = corrupt(workspace)
    capsys.readouterr()
    assert cli.main(["search", "ramen", "--workspace", str(workspace)]) == 0
    out = capsys.readouterr().out
    assert "degraded" in out and "ramen" in out

    assert cli.main(["reindex", "--workspace", str(workspace), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["files"] == 4 and report["chunks"] >= 5
    assert list(db.parent.glob("index.sqlite3.corrupt-*"))

    assert cli.main(["search", "postgres", "--workspace", str(workspace), "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [h["text"] for h in hits] == ["we picked postgres for the billing service"]
    assert cli.main(["reindex", "--workspace", str(workspace)]) == 0
    assert "reindexed 4 files" in capsys.readouterr().out
