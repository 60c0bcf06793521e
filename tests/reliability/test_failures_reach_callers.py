"""Item 2 of issue 11: what a caller or the model sees of a failure is one clear line.

Searches in flight when the index fails answer from the files (no AttributeError on an
index that went away between two awaits), and the memory tools answer a database or disk
failure under them with a JSON error instead of ending the turn with an exception.
"""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.errors import ChatmemError
from memory_core.base.scope import MAIN
from memory_core.config import Config
from memory_core.conversation.tools import dispatch
from memory_core.engine import MemoryCore
from tests.reliability.support import with_long_term
from tests.support import database, journal_sql, sql_write

NOTES = [
    "postgres upgrade planned for friday",
    "the billing service moved to postgres",
    "kayak trip on the lake in june",
    "上次说的数据库连接池问题已经解决",
]


async def test_searches_in_flight_when_the_index_fails_answer_from_files(
    config: Config, clock: ManualClock
) -> None:
    # Every search syncs first: an await on the database before the one that fails.
    eager = config.model_copy(
        update={"recall": config.recall.model_copy(update={"sync_min_interval_seconds": 0.0})}
    )
    async with MemoryCore.open(eager, clock=clock) as core:
        await _search_while_the_index_fails(core)


async def _search_while_the_index_fails(core: MemoryCore) -> None:
    for note in NOTES:
        await core.notes.append(MAIN, note)
    queries = ["postgres", "kayak lake", "数据库 连接池", "billing"]
    healthy = [sorted(h.text for h in await core.finder.search(MAIN, q)) for q in queries]
    if database(core).dialect.name == "sqlite":
        await sql_write(core, ("DROP TABLE fts_scoped", ()))
    else:
        await sql_write(core, ("DROP FUNCTION chatmem_postings CASCADE", ()))

    # All of them read the index before the first one's failure turns it off.
    searched, recalled = await asyncio.gather(
        asyncio.gather(*(core.finder.search(MAIN, q) for q in queries), return_exceptions=True),
        asyncio.gather(
            core.finder.recall(MAIN, "上次说的 postgres 升级是哪天？"), return_exceptions=True
        ),
    )
    errors = [a for a in [*searched, *recalled] if isinstance(a, BaseException)]
    assert errors == []
    found = [sorted(h.text for h in hits) for hits in searched if isinstance(hits, list)]
    assert found == healthy
    assert core.guard.index is None and core.guard.degradations == 1
    [injection] = recalled
    assert not isinstance(injection, BaseException)
    assert any("postgres" in hit.text for hit in injection.hits)


async def test_a_tool_answers_a_database_failure_with_one_json_line(core: MemoryCore) -> None:
    ctx = core.tool_context(MAIN)
    turn = await core.conversation.turn(MAIN, "the boiler makes a knocking noise")
    await sql_write(
        core, ("DROP TABLE chunks CASCADE" if postgres(core) else "DROP TABLE chunks", ())
    )
    await journal_sql(core, "DROP TABLE captures")
    missing = "does not exist" if postgres(core) else "no such table"

    read = json.loads(await dispatch(ctx, "memory_get", {"path": f"sessions/{turn.session_id}"}))
    saved = json.loads(
        await dispatch(ctx, "memory_save", {"content": "boiler serviced", "target": "long-term"})
    )
    for answer, says in ((read, "the index failed"), (saved, "capture not saved")):
        assert set(answer) == {"error"}
        assert says in answer["error"] and missing in answer["error"]
        assert "\n" not in answer["error"]
    # The same failures reach a person's command as one ChatmemError line.
    with pytest.raises(ChatmemError, match="capture not saved"):
        await core.memories.capture(MAIN, "boiler serviced")


@pytest.mark.sqlite_only  # the failure is the lock files' directory, which PostgreSQL's
# advisory locks do not use
async def test_a_tool_answers_a_disk_failure_with_one_json_line(
    config: Config, clock: ManualClock
) -> None:
    held = with_long_term(config, write_delay_seconds=600.0)
    async with MemoryCore.open(held, clock=clock) as core:
        ctx = core.tool_context(MAIN)
        saved = json.loads(
            await dispatch(
                ctx, "memory_save", {"content": "allergic to peanuts", "target": "long-term"}
            )
        )
        assert saved["saved"] == "long-term"
        # The staged capture must be written before the search: the lock directory it
        # needs is a file now.
        locks = core.workspace.locks_dir
        shutil.rmtree(locks, ignore_errors=True)
        locks.write_text("not a directory", encoding="utf-8")
        answer = json.loads(await dispatch(ctx, "memory_search", {"query": "peanuts"}))
        # Raw, the OSError ended the turn; now it is a line the model can pass on (the
        # lock layer may name it itself, or dispatch says which storage failed).
        assert set(answer) == {"error"}
        assert "locks" in answer["error"] or answer["error"].startswith("memory storage failed")
        assert "\n" not in answer["error"]
        locks.unlink()
        found = json.loads(await dispatch(ctx, "memory_search", {"query": "peanuts"}))
        assert [r["text"] for r in found["results"]] == ["allergic to peanuts"]


def postgres(core: MemoryCore) -> bool:
    return database(core).dialect.name == "postgres"
