"""`chatmem migrate`: a workspace's database moves between SQLite and PostgreSQL with
nothing lost, twice without copying twice, and after an interruption to the end."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.cli import main
from memory_core import migrate
from memory_core.base.clock import ManualClock
from memory_core.base.errors import DatabaseForeign
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config, load_config
from memory_core.engine import MemoryCore
from tests.conftest import START
from tests.postgres import PostgresServer
from tests.support import sql

ALICE = ScopeKey("peer:alice")
QUERIES = ["kayak", "boiler", "绿茶", "bees"]
TABLE_QUERIES = {
    "messages": "SELECT id, scope, session_id, role, content, created_at FROM messages",
    "sessions": "SELECT id, scope, status FROM sessions",
    "audit": "SELECT id, scope, entry_id, action, content FROM audit",
    "schedule_state": "SELECT name, last_run FROM schedule_state",
    "deliveries": "SELECT channel, chat_id, message_id FROM deliveries",
}


@pytest.fixture
def pg_dsn(postgres_server: PostgresServer) -> Iterator[str]:
    with postgres_server.schema() as dsn:
        yield dsn


def sqlite_config(workspace: Path) -> Config:
    return load_config(None, env={}, workspace=workspace)


def pg_config(workspace: Path, dsn: str) -> Config:
    env = {"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": dsn}
    return load_config(None, env=env, workspace=workspace)


async def fill(core: MemoryCore, clock: ManualClock) -> None:
    await core.conversation.turn(ALICE, "the kayak is red and lives in the shed")
    await core.conversation.turn(ALICE, "the boiler was serviced in May")
    await core.conversation.turn(MAIN, "我喜欢喝绿茶")
    await core.memories.capture(ALICE, "keeps bees in the garden")
    await core.notes.append(MAIN, "kayak lesson booked for Sunday")
    await core.claim_delivery("telegram:bot", "42", "1001")
    clock.advance(timedelta(minutes=30))
    await core.conversation.tick()  # the daily jobs archive those messages, mark schedule_state
    await core.conversation.turn(ALICE, "the kayak paddles are in the car")  # not archived: a chunk


async def state(core: MemoryCore) -> dict[str, Any]:
    tables = {
        name: sorted(tuple(r) for r in await sql(core, query))
        for name, query in TABLE_QUERIES.items()
    }
    hits = {
        (scope.value, q): [
            (h.path, h.text, round(h.score, 9)) for h in await core.finder.search(scope, q)
        ]
        for scope in (MAIN, ALICE)
        for q in QUERIES
    }
    return {"tables": tables, "hits": hits}


async def test_a_move_to_postgres_and_back_keeps_everything(tmp_path: Path, pg_dsn: str) -> None:
    workspace = tmp_path / "ws"
    clock = ManualClock(START)
    async with MemoryCore.open(sqlite_config(workspace), clock=clock) as core:
        await fill(core, clock)
        before = await state(core)
        assert before["tables"]["messages"] and before["hits"][(ALICE.value, "kayak")]
        report = await core.move_storage("postgres", pg_dsn)
        assert report.copied["messages"] == len(before["tables"]["messages"])
        [(chunks,)] = await sql(core, "SELECT COUNT(*) FROM chunks WHERE kind = 'message'")
        assert report.message_chunks == chunks > 0
        again = await core.move_storage("postgres", pg_dsn)
        assert sum(again.copied.values()) == 0 and again.message_chunks == 0

    async with MemoryCore.open(pg_config(workspace, pg_dsn), clock=clock) as moved:
        # The same rows with the same ids, and the same hits with the same scores.
        assert await state(moved) == before
        # New rows continue after the copied ids.
        turn = await moved.conversation.turn(ALICE, "a message after the move")
        ids = [int(r[0]) for r in await sql(moved, "SELECT id FROM messages ORDER BY id")]
        assert ids[-1] > max(int(r[0]) for r in before["tables"]["messages"])
        assert turn.session_id
        after_move = await state(moved)
        back = await moved.move_storage("sqlite")
        assert back.copied["messages"] == len(after_move["tables"]["messages"])

    aside = list((workspace / ".chatmem").glob("index.sqlite3.before-move-*"))
    assert aside, "the old SQLite file is kept aside, not mixed in"
    async with MemoryCore.open(sqlite_config(workspace), clock=clock) as home:
        assert await state(home) == after_move


async def test_an_interrupted_move_finishes_when_run_again(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    clock = ManualClock(START)
    async with MemoryCore.open(sqlite_config(workspace), clock=clock) as core:
        for n in range(7):
            await core.conversation.turn(ALICE, f"message number {n} about the garden")
        before = await state(core)
        monkeypatch.setattr(migrate, "BATCH", 2)
        real = migrate._insert
        calls = {"n": 0}

        def dies_on_the_third_batch(conn: Any, sql: str, rows: list[tuple[Any, ...]]) -> int:
            calls["n"] += 1
            if calls["n"] == 3:
                raise KeyboardInterrupt  # the person pressed Ctrl-C
            return real(conn, sql, rows)

        monkeypatch.setattr(migrate, "_insert", dies_on_the_third_batch)
        with pytest.raises(KeyboardInterrupt):
            await core.move_storage("postgres", pg_dsn)
        monkeypatch.setattr(migrate, "_insert", real)
        report = await core.move_storage("postgres", pg_dsn)
        assert 0 < report.copied["messages"] < len(before["tables"]["messages"])
    async with MemoryCore.open(pg_config(workspace, pg_dsn), clock=clock) as moved:
        assert await state(moved) == before


async def test_the_command_line_moves_and_says_what_to_do_next(
    tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "ws"
    async with MemoryCore.open(sqlite_config(workspace), clock=ManualClock(START)) as core:
        await core.conversation.turn(ALICE, "the kayak is red")
    code = await _run_cli(
        ["--workspace", str(workspace), "migrate", "--to", "postgres", "--dsn", pg_dsn, "--json"]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["to"] == "postgres" and out["copied"]["messages"] == 1
    code = await _run_cli(["--workspace", str(workspace), "migrate", "--to", "postgres"])
    assert code == 2
    assert "needs --dsn or CHATMEM_POSTGRES_DSN" in capsys.readouterr().err


async def test_a_move_back_to_sqlite_names_the_files_it_kept_aside(
    tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The SQLite files from before the move to PostgreSQL are stale once the workspace
    moves back: they are kept, and the command says where and how to delete them."""
    workspace = tmp_path / "ws"
    async with MemoryCore.open(sqlite_config(workspace), clock=ManualClock(START)) as core:
        await core.conversation.turn(ALICE, "the kayak is red")
    to_pg = ["--workspace", str(workspace), "migrate", "--to", "postgres", "--dsn", pg_dsn]
    assert await _run_cli(to_pg) == 0
    assert "kept aside" not in capsys.readouterr().out
    env = {"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": pg_dsn}
    back = ["--workspace", str(workspace), "migrate", "--to", "sqlite"]
    assert await asyncio.to_thread(_main_with_env, back, env) == 0
    out = capsys.readouterr().out
    kept = sorted((workspace / ".chatmem").glob("*.before-move-*"))
    assert {p.name.split(".before-move-")[0] for p in kept} >= {
        "index.sqlite3",
        "journal.sqlite3",
    }
    lines = out.splitlines()
    assert lines[1].startswith("kept aside, from before the workspace moved away (stale;")
    assert "rm " in lines[1]
    assert [line.strip() for line in lines[2:]] == [str(p) for p in kept]
    # Moved again (the config still names PostgreSQL): this move's files and the earlier
    # one's, none overwritten even within the same second.
    assert await asyncio.to_thread(_main_with_env, [*back, "--json"], env) == 0
    again = json.loads(capsys.readouterr().out)["kept_aside"]
    assert again == [str(p) for p in sorted((workspace / ".chatmem").glob("*.before-move-*"))]
    assert len(again) == 2 * len(kept)


async def _run_cli(argv: list[str]) -> int:
    return await asyncio.to_thread(main, argv)


async def test_a_move_into_another_workspaces_database_is_refused(
    tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The database another workspace uses is refused, in one line, before anything is
    copied, and the workspace keeps searching its own memories."""
    clock = ManualClock(START)
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    async with MemoryCore.open(sqlite_config(theirs), clock=clock) as core:
        await core.conversation.turn(ALICE, "their kayak is blue")
        await core.move_storage("postgres", pg_dsn)
    async with MemoryCore.open(pg_config(theirs, pg_dsn), clock=clock) as core:
        theirs_before = await state(core)
    async with MemoryCore.open(sqlite_config(ours), clock=clock) as core:
        await core.conversation.turn(ALICE, "our kayak is green")

    argv = ["--workspace", str(ours), "migrate", "--to", "postgres", "--dsn", pg_dsn]
    assert await _run_cli(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "belongs to another workspace" in err[0], err
    assert "Traceback" not in "".join(err)

    async with MemoryCore.open(pg_config(theirs, pg_dsn), clock=clock) as core:
        assert await state(core) == theirs_before  # nothing of ours went in
    search = ["--workspace", str(ours), "--scope", ALICE.value, "search", "kayak", "--json"]
    assert await _run_cli(search) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits and all("blue" not in h["text"] for h in hits)


async def test_a_workspace_opening_another_workspaces_database_is_refused(
    tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = ManualClock(START)
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    async with MemoryCore.open(pg_config(theirs, pg_dsn), clock=clock) as core:
        await core.conversation.turn(ALICE, "their kayak is blue")
    async with MemoryCore.open(sqlite_config(ours), clock=clock):
        pass
    with pytest.raises(DatabaseForeign):
        async with MemoryCore.open(pg_config(ours, pg_dsn), clock=clock):
            pass
    env = {"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": pg_dsn}
    code = await asyncio.to_thread(
        _main_with_env, ["--workspace", str(ours), "search", "kayak"], env
    )
    assert code == 2
    captured = capsys.readouterr()
    assert "blue" not in captured.out
    lines = [line for line in captured.err.splitlines() if line.startswith("chatmem: error")]
    assert len(lines) == 1 and "belongs to another workspace" in lines[0]
    assert "Traceback" not in captured.err


async def test_a_used_database_without_an_owner_is_adopted_by_its_workspace_only(
    tmp_path: Path, pg_dsn: str
) -> None:
    """A database used before owners were recorded: its workspace opening it records
    itself; a move into it from elsewhere is refused."""
    clock = ManualClock(START)
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    async with MemoryCore.open(pg_config(theirs, pg_dsn), clock=clock) as core:
        await core.conversation.turn(ALICE, "their kayak is blue")
        await sql(core, "DELETE FROM workspace RETURNING id")
    async with MemoryCore.open(sqlite_config(ours), clock=clock) as core:
        await core.conversation.turn(ALICE, "our kayak is green")
        with pytest.raises(DatabaseForeign, match="already holds another workspace's data"):
            await core.move_storage("postgres", pg_dsn)
    async with MemoryCore.open(pg_config(theirs, pg_dsn), clock=clock) as core:
        [(owner,)] = await sql(core, "SELECT id FROM workspace")
        assert owner == (theirs / ".chatmem" / "workspace-id").read_text().strip()


def _main_with_env(argv: list[str], env: dict[str, str]) -> int:
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        return main(argv)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def test_a_workspace_id_is_made_once_by_processes_starting_together(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from memory_core.base.workspace import Workspace

    workspace = Workspace.at(tmp_path / "ws")
    with ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(lambda _: Workspace.at(workspace.root).identity(), range(32)))
    assert len(ids) == 1
    assert [p.name for p in workspace.state_dir.iterdir()] == ["workspace-id"]
