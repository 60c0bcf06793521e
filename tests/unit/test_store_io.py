"""MEMORY.md on disk: backup, permissions, crash safety, and locking across processes."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest
from filelock import Timeout

from memory_core.base.clock import ManualClock
from memory_core.base.entries import MemoryEntry
from memory_core.base.locks import LockRegistry
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.longterm.memory_md_parser import ParsedMemory
from memory_core.longterm.store import LongTermStore, read_memory_file

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def entry(entry_id: str, content: str, score: float = 0.5) -> MemoryEntry:
    return MemoryEntry(entry_id, content, "fact", score, NOW, NOW, NOW)


def replace_all(new: list[MemoryEntry]) -> Callable[[ParsedMemory], tuple[list[MemoryEntry], None]]:
    def change(parsed: ParsedMemory) -> tuple[list[MemoryEntry], None]:
        return list(new), None

    return change


def temp_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# --- backup and permissions --------------------------------------------------------------


@pytest.mark.parametrize("scope", [MAIN, ScopeKey("peer:7")])
async def test_backup_holds_the_previous_version(tmp_path: Path, scope: ScopeKey) -> None:
    ws = Workspace.at(tmp_path)
    store = LongTermStore(ws, LockRegistry(ws.locks_dir))
    path, backup = ws.long_term_path(scope), ws.backup_path(scope)
    assert backup.name == path.name + ".bak"

    await store.update(scope, replace_all([entry("a", "first")]), NOW)
    assert path.is_file()
    assert not backup.exists()
    first = path.read_bytes()

    await store.update(scope, replace_all([entry("a", "second")]), NOW)
    second = path.read_bytes()
    assert backup.read_bytes() == first
    assert second != first

    await store.update(scope, replace_all([entry("b", "third")]), NOW)
    assert backup.read_bytes() == second
    assert [e.content for e in (await store.load(scope)).entries] == ["third"]
    assert temp_files(path.parent) == []


async def test_backup_through_the_core(core: MemoryCore) -> None:
    await core.memories.capture(MAIN, "用户喜欢用 pytest 而非 unittest")
    await core.memories.flush()
    first = core.memories.path(MAIN).read_bytes()
    await core.memories.capture(MAIN, "another memory entirely")
    await core.memories.flush()
    assert core.workspace.backup_path(MAIN).read_bytes() == first


async def test_new_file_is_0644_and_existing_mode_is_kept(tmp_path: Path) -> None:
    ws = Workspace.at(tmp_path)
    store = LongTermStore(ws, LockRegistry(ws.locks_dir))
    old_umask = os.umask(0o077)  # a strict umask must not leak into the file's mode
    try:
        await store.update(MAIN, replace_all([entry("a", "x")]), NOW)
    finally:
        os.umask(old_umask)
    path = ws.long_term_path(MAIN)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    path.chmod(0o600)
    await store.update(MAIN, replace_all([entry("a", "y")]), NOW)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # The backup is the previous file itself (a hard link), so it keeps that file's
    # restricted mode rather than widening it.
    assert stat.S_IMODE(ws.backup_path(MAIN).stat().st_mode) == 0o600


async def test_stale_temp_files_are_removed_by_the_next_write(tmp_path: Path) -> None:
    ws = Workspace.at(tmp_path)
    store = LongTermStore(ws, LockRegistry(ws.locks_dir))
    stale = [tmp_path / ".MEMORY.md.abc123.tmp", tmp_path / ".MEMORY.md.bak.def456.tmp"]
    for path in stale:
        path.write_text("half a file", encoding="utf-8")
    unrelated = tmp_path / ".other.md.x.tmp"
    unrelated.write_text("not ours", encoding="utf-8")
    await store.update(MAIN, replace_all([entry("a", "x")]), NOW)
    assert temp_files(tmp_path) == [unrelated.name]


async def test_cache_sees_changes_made_by_others(tmp_path: Path) -> None:
    ws = Workspace.at(tmp_path)
    mine = LongTermStore(ws, LockRegistry(ws.locks_dir))
    theirs = LongTermStore(ws, LockRegistry(ws.locks_dir))
    await mine.update(MAIN, replace_all([entry("a", "mine")]), NOW)
    assert [e.content for e in (await mine.load(MAIN)).entries] == ["mine"]
    await theirs.update(MAIN, replace_all([entry("b", "theirs")]), NOW)
    assert [e.content for e in (await mine.load(MAIN)).entries] == ["theirs"]


async def test_a_load_overtaken_by_a_write_keeps_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A background read (a serving core's read-ahead) that saw the file before a write
    of this process must not put its older snapshot back over the write's."""
    ws = Workspace.at(tmp_path)
    store = LongTermStore(ws, LockRegistry(ws.locks_dir))
    await store.update(MAIN, replace_all([entry("a", "before")]), NOW)
    fresh = LongTermStore(ws, LockRegistry(ws.locks_dir))
    read_done, go_on = threading.Event(), threading.Event()
    plain_read = fresh._read
    held: list[object] = []

    def slow_first_read(scope: ScopeKey, cached: object) -> object:
        snapshot = plain_read(scope, cached)  # type: ignore[arg-type]
        if not held:
            held.append(snapshot)
            read_done.set()
            go_on.wait()
        return snapshot

    monkeypatch.setattr(fresh, "_read", slow_first_read)
    reading = asyncio.create_task(fresh.load(MAIN))
    await asyncio.to_thread(read_done.wait)
    await fresh.update(MAIN, replace_all([entry("b", "after")]), NOW)
    go_on.set()
    assert [e.content for e in (await reading).entries] == ["after"]
    # The hot path reuses the last check: it must be the write's.
    assert [e.content for e in (await fresh.load(MAIN, max_age=3600)).entries] == ["after"]


# --- locks -------------------------------------------------------------------------------


def watch_process_locks(
    registry: LockRegistry, monkeypatch: pytest.MonkeyPatch
) -> tuple[threading.Event, threading.Event]:
    """Events set when `registry` begins to wait for a process lock (in its worker
    thread) and when it gives one back: the states the lock tests wait for."""
    process = registry.process
    waiting, given_back = threading.Event(), threading.Event()
    take, give_back = process.take, process.give_back

    def watched_take(name: str) -> object:
        waiting.set()
        return take(name)

    def watched_give_back(handle: object) -> None:
        give_back(handle)
        given_back.set()

    monkeypatch.setattr(process, "take", watched_take)
    monkeypatch.setattr(process, "give_back", watched_give_back)
    return waiting, given_back


async def test_cancelled_lock_wait_does_not_leak_the_file_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task cancelled while waiting for another process's lock must not keep it later."""
    other_process = LockRegistry(tmp_path)
    this_process = LockRegistry(tmp_path)
    waiting, given_back = watch_process_locks(this_process, monkeypatch)
    entered = asyncio.Event()

    async def wait_for_lock() -> None:
        async with this_process.hold("main.memory"):
            entered.set()

    async with other_process.hold("main.memory"):
        waiter = asyncio.create_task(wait_for_lock())
        assert await asyncio.to_thread(waiting.wait, 10)  # now blocked in the worker thread
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
    assert not entered.is_set()
    # the orphaned worker thread gets the lock, and it is given back
    assert await asyncio.to_thread(given_back.wait, 10), "the cancelled waiter kept the lock"
    third = LockRegistry(tmp_path, timeout=3)
    try:
        async with asyncio.timeout(10), third.hold("main.memory"):
            pass
    except Timeout:
        pytest.fail("the cancelled waiter kept the file lock")
    # This process can still take it too.
    async with asyncio.timeout(10), this_process.hold("main.memory"):
        pass


async def test_hold_running_does_not_leak_the_file_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The locked job runs in the thread that takes the lock: cancelled while it waits
    for another process, or failing, it must leave the lock free all the same."""
    other_process = LockRegistry(tmp_path)
    this_process = LockRegistry(tmp_path)
    waiting, given_back = watch_process_locks(this_process, monkeypatch)
    ran: list[str] = []

    async def locked_job() -> None:
        async with this_process.hold_running("main.daily", lambda: ran.append("job")) as value:
            ran.append(f"inside {value}")

    async with other_process.hold("main.daily"):
        waiter = asyncio.create_task(locked_job())
        assert await asyncio.to_thread(waiting.wait, 10)  # now blocked in the worker thread
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
    # the orphaned worker thread takes the lock, runs the job and gives the lock back
    assert await asyncio.to_thread(given_back.wait, 10), "the cancelled job kept the lock"
    assert ran == ["job"]

    def failing() -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        async with this_process.hold_running("main.daily", failing):
            pytest.fail("the block must not run when the job failed")
    third = LockRegistry(tmp_path, timeout=3)
    try:
        async with asyncio.timeout(10), third.hold("main.daily"):
            pass
    except Timeout:
        pytest.fail("a cancelled or failed job kept the file lock")
    async with asyncio.timeout(10), this_process.hold_running("main.daily", lambda: 7) as got:
        assert got == 7


# --- crash safety ------------------------------------------------------------------------

ZYGOTE = """
import asyncio, os, sys, threading
from datetime import UTC, datetime

from memory_core.base.entries import MemoryEntry
from memory_core.base.locks import LockRegistry
from memory_core.base.scope import MAIN
from memory_core.longterm.store import LongTermStore
from memory_core.base.workspace import Workspace

WS = Workspace.at(sys.argv[1])
NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def version(gen):
    # Alternating versions: 3 short entries, then 5 longer ones (different file sizes).
    count = 3 if gen % 2 else 5
    pad = "" if gen % 2 else "\\n" + "padding " * 40
    return [
        MemoryEntry(
            id=f"e{i}",
            content=f"generation {gen} item {i}{pad}",
            category="fact",
            score=0.9 - 0.1 * i,
            created_at=NOW,
            last_activated=NOW,
            scored_at=NOW,
            hits=gen,
        )
        for i in range(count)
    ]


def change(parsed):
    gens = {int(e.content.split()[1]) for e in parsed.entries}
    gen = max(gens) + 1 if gens else 1
    return version(gen), gen


async def write_forever():
    store = LongTermStore(WS, LockRegistry(WS.locks_dir))
    await store.update(MAIN, change, NOW)
    print(f"ready {os.getpid()}", flush=True)  # writing for real now: start the clock
    while True:
        await store.update(MAIN, change, NOW)


def stop_before_rename(writes):
    # The `writes`-th rename of a whole new MEMORY.md waits to be killed: its temp file
    # is written and synced, the file itself not yet replaced.
    real = os.replace
    count = [0]

    def replace(src, dst, **kwargs):
        if os.path.basename(dst) == "MEMORY.md":
            count[0] += 1
            if count[0] == writes:
                print(f"mid {os.getpid()}", flush=True)
                threading.Event().wait()  # until the test's SIGKILL
        return real(src, dst, **kwargs)

    os.replace = replace


def main():
    while True:
        command = sys.stdin.readline().split()
        if not command or command[0] == "exit":
            return
        if command[0] in ("fork", "mid"):
            pid = os.fork()
            if pid == 0:
                try:
                    if command[0] == "mid":
                        stop_before_rename(int(command[1]))
                    asyncio.run(write_forever())
                finally:
                    os._exit(3)
        elif command[0] == "reap":
            _, status = os.waitpid(int(command[1]), 0)
            print(status, flush=True)


main()
"""


def check_consistent(path: Path) -> int:
    """The file is one whole version the writer produced; returns its generation."""
    parsed = read_memory_file(path, 0.2, root=path.parent).parsed
    assert parsed.quarantined == [], parsed.quarantined
    gens = {int(e.content.split()[1]) for e in parsed.entries}
    assert len(gens) == 1, f"mixed generations {gens}"
    gen = gens.pop()
    expected = 3 if gen % 2 else 5
    assert sorted(e.id for e in parsed.entries) == [f"e{i}" for i in range(expected)]
    for e in parsed.entries:
        assert e.hits == gen
        assert e.content.startswith(f"generation {gen} item {e.id[1:]}")
        assert ("padding" in e.content) == (gen % 2 == 0)
    return gen


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """A pre-imported process that forks writers on request (python start-up is slow)."""
    ws = tmp_path / "crash-ws"
    ws.mkdir()
    script = tmp_path / "zygote.py"
    script.write_text(ZYGOTE, encoding="utf-8")
    errors = (tmp_path / "zygote.err").open("w")
    proc = subprocess.Popen(
        [sys.executable, str(script), str(ws)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
        cwd=REPO,
    )
    try:
        yield proc, ws
    finally:
        if proc.poll() is None:
            assert proc.stdin is not None
            try:
                proc.stdin.write("exit\n")
                proc.stdin.flush()
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        errors.close()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigkill_at_random_moments_never_breaks_memory_md(
    zygote: tuple[subprocess.Popen[str], Path], tmp_path: Path
) -> None:
    """Writers killed at random moments, and (so that the case never rests on timing)
    writers killed while a written temp file waits for its rename: after each, the file
    is one whole version, never older than the last, with at most one stray temp file."""
    proc, ws = zygote
    assert proc.stdin is not None and proc.stdout is not None
    path = ws / "MEMORY.md"
    rng = random.Random(20260301)
    last_gen = 0
    mid_write = 0  # kills that left a writer's temp file behind
    plan = [("fork", None)] * 200 + [("mid", rng.randint(2, 5)) for _ in range(10)]
    for command, writes in plan:
        proc.stdin.write(f"{command} {writes or ''}\n")
        proc.stdin.flush()
        ready, pid_text = proc.stdout.readline().split()
        assert ready == "ready"
        pid = int(pid_text)
        if command == "mid":
            assert proc.stdout.readline().split() == ["mid", pid_text]
        else:
            time.sleep(rng.uniform(0.001, 0.030))
        os.kill(pid, signal.SIGKILL)
        proc.stdin.write(f"reap {pid}\n")
        proc.stdin.flush()
        status = int(proc.stdout.readline())
        err = (tmp_path / "zygote.err").read_text(encoding="utf-8")
        assert os.WIFSIGNALED(status), f"writer died on its own (status {status}): {err}"
        assert os.WTERMSIG(status) == signal.SIGKILL
        gen = check_consistent(path)
        assert gen >= last_gen, "the file went back to an older version"
        last_gen = gen
        backup = ws / "MEMORY.md.bak"
        if backup.exists():
            assert check_consistent(backup) in (gen - 1, gen)
        strays = temp_files(ws)
        assert len(strays) <= 1, strays
        if command == "mid":
            assert len(strays) == 1, "the writer was killed with its temp file unrenamed"
        mid_write += bool(strays)
    print(f"{len(plan)} kills: {last_gen} versions, {mid_write} mid-write")
    # Writers really were writing when killed: every one wrote once before its delay.
    assert last_gen > len(plan), last_gen


# --- several processes -------------------------------------------------------------------

WORKER = """
import asyncio, hashlib, json, os, sys
from datetime import UTC, datetime

from memory_core.base.clock import ManualClock
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from memory_core.base.scope import ScopeKey

workspace, mode, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
scope = ScopeKey(sys.argv[5])
STORAGE_VARIABLES = ("CHATMEM_STORAGE_BACKEND", "CHATMEM_POSTGRES_DSN")


async def main():
    clock = ManualClock(datetime(2026, 3, 1, 12, tzinfo=UTC))
    storage = {k: v for k, v in os.environ.items() if k in STORAGE_VARIABLES}
    config = load_config(None, env=storage, workspace=workspace)
    async with MemoryCore.open(config, clock=clock) as core:
        print("ready", flush=True)
        sys.stdin.readline()
        if mode == "daily":
            texts = [f"{name} note {i}" for i in range(count)]
            results = await asyncio.gather(*(core.notes.append(scope, t) for t in texts))
            print(json.dumps({t: list(r) for t, r in zip(texts, results)}), flush=True)
        else:
            texts = [f"{name} {hashlib.sha256(f'{name}{i}'.encode()).hexdigest()[:20]}" for i in range(count)]
            # Each task captures one memory; the tasks of this process run concurrently.
            await asyncio.gather(*(core.memories.capture(scope, t) for t in texts))
            print(json.dumps(texts), flush=True)


asyncio.run(main())
"""


def run_workers(
    tmp_path: Path,
    workspace: Path,
    mode: str,
    scope: str,
    count: int,
    names: list[str],
    storage_env: Mapping[str, str] | None = None,
) -> list[object]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER, encoding="utf-8")
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(workspace), mode, name, str(count), scope],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, **(storage_env or {})},
        )
        for name in names
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() != "ready":
                _, err = proc.communicate(timeout=30)
                pytest.fail(f"worker failed to start: {line!r} {err}")
        for proc in procs:  # release them together
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            outputs.append(json.loads(out))
        return outputs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.timeout(180)
def test_concurrent_daily_appends_from_two_processes(
    tmp_path: Path, config: Config, storage_env: Mapping[str, str]
) -> None:
    workspace = config.workspace_path
    scope = ScopeKey("group:telegram:-100")
    outputs = run_workers(
        tmp_path, workspace, "daily", scope.value, 50, ["alpha", "beta"], storage_env
    )
    ws = Workspace.at(workspace)
    path = ws.daily_path(scope, NOW.date())
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# 2026-03-01"
    assert lines[1] == ""
    assert sum(1 for line in lines if line.startswith("# ")) == 1
    notes = lines[2:]
    expected = {f"{name} note {i}" for name in ("alpha", "beta") for i in range(50)}
    assert len(notes) == 100
    assert sorted(line.removeprefix("- 12:00:00 ") for line in notes) == sorted(expected)
    assert all(line.startswith("- 12:00:00 ") for line in notes)
    # Every append reported the right place of its note.
    for output in outputs:
        assert isinstance(output, dict)
        for text, (rel, number) in output.items():
            assert rel == ws.relative(path)
            assert lines[number - 1] == f"- 12:00:00 {text}"


@pytest.mark.timeout(180)
def test_concurrent_captures_from_two_processes_lose_nothing(
    tmp_path: Path, config: Config, storage_env: Mapping[str, str]
) -> None:
    workspace = config.workspace_path
    scope = ScopeKey("peer:99")
    outputs = run_workers(
        tmp_path, workspace, "capture", scope.value, 20, ["alpha", "beta"], storage_env
    )
    written = {text for output in outputs for text in output}  # type: ignore[attr-defined]
    assert len(written) == 40
    ws = Workspace.at(workspace)
    parsed = read_memory_file(ws.long_term_path(scope), 0.2, root=ws.root).parsed
    assert parsed.quarantined == []
    assert {e.content for e in parsed.entries} == written
    assert len({e.id for e in parsed.entries}) == 40

    async def audited() -> int:
        async with MemoryCore.open(config, clock=ManualClock(NOW)) as core:
            return sum(1 for r in await core.audit.recent(scope, limit=1000) if r.action == "add")

    assert asyncio.run(audited()) == 40
    assert temp_files(ws.long_term_path(scope).parent) == []
