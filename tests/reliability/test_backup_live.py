"""Item 5 of issue 36: `chatmem backup` of a workspace six processes are writing.

Six real processes capture memories and append daily notes, each in its own scope and
in main; three keep their captures in the journal only (a long write delay: the state
in which the documented recipe, copying `index.sqlite3` alone, lost acknowledged
captures), three write MEMORY.md as usual. Every capture and note a process was told
is saved goes to its ack file. The backup runs through the command line while they
write; the acks read just before it started are "acknowledged before the backup".

The backup is then restored through the command line into a fresh directory (on
PostgreSQL: a fresh database schema) and over the workspace itself (`--force`), and:
every acknowledged capture and note is there, every daily-note line is whole, and
the validation `chatmem restore` runs on what it restored passes (it exits 1 if not).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from memory_core.base.scope import ScopeKey
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from testkit.waiting import until_sync
from tests.postgres import PostgresServer
from tests.reliability.support import REPO, cli

pytestmark = [pytest.mark.storage, pytest.mark.timeout(240)]

WRITERS = 6
JOURNAL_ONLY = 3
"""Writers 0..2 leave their captures in the journal for as long as they run."""
BEFORE = 4
"""Captures each writer has acknowledged before the backup starts."""
NOTE = re.compile(r"- (?:\d\d:\d\d:\d\d )?bk note w\d n\d+ [a-z]{7}")

WRITER = """
import asyncio, os, random, sys
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from memory_core.base.scope import ScopeKey

async def main():
    n, delay = {n!r}, {delay!r}
    config = load_config(None, env={env!r}, workspace={workspace!r})
    config = config.model_copy(update={{"long_term": config.long_term.model_copy(
        update={{"write_delay_seconds": delay}})}})
    rng = random.Random(n)
    acks = open({acks!r}, "a", encoding="utf-8")
    async with MemoryCore.open(config) as core:
        i = 0
        while not os.path.exists({stop!r}):
            scope = ScopeKey("main" if i % 2 else f"peer:w{{n}}")
            word = "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(7))
            text = f"bk capture w{{n}} c{{i}} {{word}}"
            entry, _ = await core.memories.capture(scope, text)
            acks.write(f"capture\\t{{scope.value}}\\t{{entry.id}}\\t{{text}}\\n")
            note = f"bk note w{{n}} n{{i}} {{word}}"
            path, _ = await core.notes.append(scope, note)
            acks.write(f"note\\t{{scope.value}}\\t{{path}}\\t{{note}}\\n")
            acks.flush()
            i += 1

asyncio.run(main())
"""


def child_env(storage: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATMEM_")}
    return {**env, **storage, "PYTHONPATH": str(REPO)}


def acked(directory: Path) -> list[tuple[str, str, str, str]]:
    """Every complete line of every writer's ack file: (kind, scope, id or path, text)."""
    found: list[tuple[str, str, str, str]] = []
    for path in sorted(directory.glob("acks-*.txt")):
        text = path.read_text("utf-8")
        for line in text[: text.rfind("\n") + 1].splitlines():
            kind, scope, where, what = line.split("\t")
            found.append((kind, scope, where, what))
    return found


def run_cli(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli(*args), cwd=REPO, env=dict(env), capture_output=True, text=True, timeout=180
    )


@contextlib.contextmanager
def writers(workspace: Path, storage: Mapping[str, str], tmp: Path) -> Iterator[Path]:
    """The six writing processes, stopped (and checked) on leaving."""
    stop = tmp / "stop"
    procs = []
    for n in range(WRITERS):
        script = WRITER.format(
            n=n,
            delay=600.0 if n < JOURNAL_ONLY else 0.05,
            env=dict(storage),
            workspace=str(workspace),
            acks=str(tmp / f"acks-{n}.txt"),
            stop=str(stop),
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", textwrap.dedent(script)],
                cwd=REPO,
                env=child_env({}),
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    try:
        yield tmp
    finally:
        stop.touch()
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err[-3000:]


def wait_for_acks(tmp: Path, per_writer: int) -> None:
    """Until every writer has acknowledged `per_writer` captures (a state, not a pause)."""
    counts: dict[int, int] = {}

    def acknowledged() -> bool:
        counts.clear()
        counts.update({n: 0 for n in range(WRITERS)})
        for kind, _, _, text in acked(tmp):
            if kind == "capture":
                counts[int(text.split()[2][1:])] += 1
        return min(counts.values()) >= per_writer

    until_sync(acknowledged, within=120, what=f"every writer's captures (so far {counts})")


async def check_restored(
    workspace: Path, storage: Mapping[str, str], before: list[tuple[str, str, str, str]]
) -> None:
    """Every acknowledged capture and note is in the restored workspace, whole."""
    config = load_config(None, env=dict(storage), workspace=workspace)
    async with MemoryCore.open(config) as core:
        entries: dict[str, dict[str, str]] = {}
        for scope in {s for _, s, _, _ in before}:
            live = await core.memories.entries(ScopeKey(scope))
            entries[scope] = {e.id: e.content for e in live}
    missing = [
        (scope, where, text)
        for kind, scope, where, text in before
        if kind == "capture" and entries[scope].get(where) != text
    ]
    assert missing == []
    check_notes(workspace, before)


def check_notes(workspace: Path, before: list[tuple[str, str, str, str]]) -> None:
    """Every acknowledged note is in its daily file, and every note line is whole."""
    for kind, _, where, text in before:
        if kind == "note":
            assert text in (workspace / where).read_text("utf-8")
    for daily in workspace.rglob("????-??-??.md"):
        for line in daily.read_text("utf-8").splitlines():
            if line.startswith("- ") and "bk note" in line:
                assert NOTE.fullmatch(line), f"torn line in {daily}: {line!r}"


@contextlib.contextmanager
def fresh_storage(
    storage: Mapping[str, str], request: pytest.FixtureRequest
) -> Iterator[dict[str, str]]:
    """Another database for the fresh restore: a new schema on PostgreSQL."""
    if not storage:
        yield {}
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    with server.schema() as dsn:
        yield {**storage, "CHATMEM_POSTGRES_DSN": dsn}


async def test_backup_while_six_processes_write_restores_every_acknowledged_capture(
    workspace: Path,
    storage_env: Mapping[str, str],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    started = time.monotonic()
    env = child_env(storage_env)
    async with MemoryCore.open(load_config(None, env=dict(storage_env), workspace=workspace)):
        pass  # the workspace exists before the writers start
    dest = tmp_path / "backup"
    with writers(workspace, storage_env, tmp_path) as tmp:
        wait_for_acks(tmp, BEFORE)
        before = acked(tmp)
        done = run_cli(env, "backup", str(dest), "--workspace", str(workspace))
        assert done.returncode == 0, done.stderr
        wait_for_acks(tmp, BEFORE + 2)  # they went on writing after it
    captures = sum(1 for kind, *_ in before if kind == "capture")
    journalled = sum(
        1
        for kind, _, _, text in before
        if kind == "capture" and int(text.split()[2][1:]) < JOURNAL_ONLY
    )
    print(
        f"backup under {WRITERS} writers: {captures} captures and"
        f" {len(before) - captures} notes acknowledged before it ({journalled} in the"
        f" journal only); {len(acked(tmp_path))} acknowledged in all"
    )
    assert "restore" in done.stdout

    # Into a fresh directory (and database) and over the workspace itself, at once.
    fresh = tmp_path / "fresh"
    with fresh_storage(storage_env, request) as other:
        into_fresh, over = await asyncio.gather(
            asyncio.to_thread(
                run_cli, child_env(other), "restore", str(dest), "--workspace", str(fresh)
            ),
            asyncio.to_thread(
                run_cli, env, "restore", str(dest), "--workspace", str(workspace), "--force"
            ),
        )
        for done in (into_fresh, over):
            assert done.returncode == 0, done.stdout + done.stderr
            assert "all memory files are valid" in done.stdout  # it validates (exit 1 if not)
        assert "before-restore" in over.stdout  # what it replaced is kept aside
        await check_restored(fresh, other, before)
    await check_restored(workspace, storage_env, before)
    print(f"backup and two restores took {time.monotonic() - started:.1f} s")
