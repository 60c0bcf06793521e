"""`chatmem scopes` and `stats` answered from the index's scope summaries
(memory_core/scope_listing/): the same output as reading every scope's files, as of
any instant (scores decay at read time), after an edit by another program while nothing
ran, and with no file read for a scope whose files did not change."""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import memory_core.scope_listing.listing as listing
from adapters.cli.commands import Stats
from adapters.cli.scopes import Scopes
from memory_core.base.clock import ManualClock
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.longterm.long_term import LongTermMemory

pytestmark = pytest.mark.storage

PEERS = [ScopeKey(f"peer:{n}") for n in range(1, 5)]
KINDS = [("preference", "event"), ("fact", None), ("experience", "event"), ("preference", None)]


async def fill(core: MemoryCore) -> None:
    """Scopes unlike each other: several categories and classes, an archived entry, a
    pinned-free main, daily notes in some, none in others."""
    for n, scope in enumerate([MAIN, *PEERS]):
        for k, (category, memory_class) in enumerate(KINDS[: n + 1]):
            await core.memories.capture(
                scope,
                f"{scope.value} item {k}: {['tea', 'kayak', 'chess', 'rain'][k]} {n}",
                category=category,
                memory_class=memory_class,
                importance=["high", "medium", "low"][(n + k) % 3],
            )
        if n % 2:
            await core.notes.append(scope, f"a note of {scope.value}")
    await core.memories.flush()
    entry = (await core.memories.status(PEERS[2])).active[-1]
    await core.memories.archive(PEERS[2], entry.id)


async def old_stats(core: MemoryCore) -> dict[str, Any]:
    """`stats --json` as it was made before the summaries: every scope's files read."""
    rows = []
    for scope in await core.memories.scopes():
        status = await core.memories.status(scope)
        scores = [e.score for e in status.active]
        rows.append(
            {
                "scope": scope.value,
                "active": len(status.active),
                "archived": len(status.archived),
                "quarantined": len(status.quarantined),
                "daily_files": status.daily_files,
                "mean_active_score": round(sum(scores) / len(scores), 3) if scores else None,
                "categories": dict(Counter(e.category for e in status.active)),
            }
        )
    return {"scopes": rows, "audit": await core.audit.action_counts()}


async def old_scopes(core: MemoryCore) -> list[dict[str, Any]]:
    rows = []
    for scope in await core.memories.scopes():
        status = await core.memories.status(scope)
        rows.append(
            {
                "scope": scope.value,
                "active": len(status.active),
                "archived": len(status.archived),
                "path": status.path,
            }
        )
    return rows


async def run_json(
    core: MemoryCore, command: Any, capsys: pytest.CaptureFixture[str], **paging: int
) -> Any:
    args = argparse.Namespace(json=True, merge=None, limit=paging.get("limit"), offset=0)
    capsys.readouterr()
    assert await command.run(core, args) == 0
    return json.loads(capsys.readouterr().out)


def settle(*paths: Path) -> None:
    """Files dated an hour back, past the racy window, as a workspace a bot restarts
    into: every file and folder under each of `paths`."""
    stamp = time.time() - 3600
    for path in paths:
        if path.exists():
            for each in [path, *(path.rglob("*") if path.is_dir() else [])]:
                os.utime(each, (stamp, stamp))


def spy_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    read: list[str] = []
    real = listing._summary

    async def spy(memories: LongTermMemory, scope: ScopeKey) -> str:
        read.append(scope.value)
        return await real(memories, scope)

    monkeypatch.setattr(listing, "_summary", spy)
    return read


async def test_the_listing_is_the_files_listing(
    config: Config,
    clock: ManualClock,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read = spy_reads(monkeypatch)
    async with MemoryCore.open(config, clock=clock) as core:
        await fill(core)
        settle(core.workspace.long_term_path(MAIN), core.workspace.memory_dir(MAIN))
        assert await run_json(core, Stats, capsys) == await old_stats(core)
        assert read == [s.value for s in [MAIN, *PEERS]]  # the first listing reads all
        read.clear()
        assert await run_json(core, Scopes, capsys) == await old_scopes(core)
        assert read == []  # nothing changed: every figure from the summaries
        # 40 days on, with no write: scores decayed, some entries Archived now.
        clock.advance(timedelta(days=40))
        assert await run_json(core, Stats, capsys) == await old_stats(core)
        assert read == []

    # Another program edits a memory file, adds a daily note and a quarantined block,
    # and makes a scope, while nothing runs.
    ws = core.workspace
    path = ws.long_term_path(PEERS[0])
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"(### \[\w+\] \w+ \| )\d\.\d+", r"\g<1>0.15", text, count=1)
    path.write_text(text + "\n### [bad1] fact | lots | 2026-01-01 | 1\nby hand\n", "utf-8")
    (ws.memory_dir(PEERS[3]) / "2026-01-02.md").write_text("# a day\n- by hand\n", "utf-8")
    settle(path, ws.memory_dir(PEERS[3]))
    clock.advance(timedelta(days=3))
    read.clear()
    async with MemoryCore.open(config, clock=clock) as core:
        await core.memories.capture(ScopeKey("peer:new"), "a newcomer likes tea")
        await core.memories.flush()
        stats = await run_json(core, Stats, capsys)
        assert stats == await old_stats(core)
        assert sorted(read) == ["peer:1", "peer:4", "peer:new"]
        by_scope = {row["scope"]: row for row in stats["scopes"]}
        assert by_scope["peer:1"]["quarantined"] == 1
        assert by_scope["peer:4"]["daily_files"] == 1  # none before
        assert by_scope["peer:3"]["archived"] >= 1
        assert len({json.dumps(r["categories"]) for r in stats["scopes"]}) > 2
        read.clear()
        page = await run_json(core, Scopes, capsys, limit=2)
        assert page == (await old_scopes(core))[:2]
        assert read == []


async def test_a_listing_without_an_index_reads_the_files(
    config: Config, clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    async with MemoryCore.open(config, clock=clock) as core:
        await fill(core)
        found = await listing.scope_figures(core.memories, None, core.memories.now())
        expected = await old_stats(core)
    assert [s.value for s in found.scopes] == [r["scope"] for r in expected["scopes"]]
    assert [
        (r.figures.active, r.figures.archived, r.figures.mean_active_score, r.figures.categories)
        for r in found.page
    ] == [
        (r["active"], r["archived"], r["mean_active_score"], r["categories"])
        for r in expected["scopes"]
    ]


async def test_a_summary_of_files_just_written_is_made_again(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file written within the racy window may be written again under the same stamp
    (size and mtime tick): its summary is trusted only once the files have settled."""
    read = spy_reads(monkeypatch)
    async with MemoryCore.open(config) as core:
        await core.memories.capture(PEERS[0], "likes tea")
        await core.memories.flush()
        main_folder = core.workspace.memory_dir(MAIN)  # settled, not its scopes' folders
        os.utime(main_folder, (time.time() - 3600,) * 2)
        settle(core.workspace.long_term_path(MAIN))
        for _ in range(2):
            await core.scope_listing()
        assert read == [MAIN.value, PEERS[0].value, PEERS[0].value]
        settle(core.workspace.memory_dir(PEERS[0]))
        read.clear()
        for _ in range(2):
            await core.scope_listing()
        assert read == [PEERS[0].value]


async def test_an_erased_scope_leaves_no_summary(config: Config) -> None:
    """Its entries' categories, scores and dates go with the scope (`chatmem erase`)."""
    async with MemoryCore.open(config) as core:
        await core.memories.capture(PEERS[0], "likes tea", category="preference")
        await core.memories.flush()
        await core.scope_listing()
        db = core._open.db
        assert db is not None

        def keys(conn: Any) -> list[str]:
            return [str(r[0]) for r in conn.execute("SELECT key FROM scope_summaries")]

        assert PEERS[0].value in await db.read(keys)
        await core.erase(scope=PEERS[0], by="test")
        assert PEERS[0].value not in await db.read(keys)
