"""Writes the disk refuses (issue 11, items 3 and 8): a full disk, a file size limit, a
read-only workspace. Nothing acknowledged may be torn, every refusal is one `MemoryFileError`
line (exit 2 from the CLI), and the old files stay as they were.

The disk is real where the machine allows it: a small tmpfs needs CAP_SYS_ADMIN (root in
a container usually has it); without it the full-disk trials inject the fault at
`os.write` (part written, then ENOSPC) and say so in their figures. A file size limit
(`RLIMIT_FSIZE`, `ulimit -f`) needs no privilege and is always real.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import pytest

from memory_core.base.errors import ChatmemError, MemoryFileError
from memory_core.base.records import RecordedMessage
from memory_core.base.scope import ScopeKey
from memory_core.config import env_bindings, load_config
from memory_core.engine import MemoryCore
from memory_core.notes import daily
from tests.support import database, is_daily_note_fd, sql

# The database's own disk is the workspace's only with SQLite.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600), pytest.mark.sqlite_only]

ROOT = Path(__file__).resolve().parents[2]
MAIN = ScopeKey("main")
WORDS = ["disk", "full", "note", "长期", "记忆", "磁盘", "满了", "测试", "memory", "line"]


# --- the disks ------------------------------------------------------------------------------


def _mount_tmpfs(directory: Path, options: str) -> bool:
    """A real small file system at `directory`, if this process may mount one."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def _umount(directory: Path) -> None:
    if subprocess.run(["umount", str(directory)], capture_output=True, check=False).returncode:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path | None]:
    """An 8 MiB tmpfs of 512 inodes, or None where mounting is not allowed. Larger than
    SQLite's WAL between automatic checkpoints (1 000 pages, 4 MiB): once the tests free
    the space they filled, the index's log must fit beside the files, as on any real disk."""
    directory = tmp_path / "tmpfs"
    directory.mkdir()
    if not _mount_tmpfs(directory, "size=8m,nr_inodes=512"):
        yield None
        return
    try:
        yield directory
    finally:
        _umount(directory)


def _fill(directory: Path, leave: int) -> None:
    """Fill the file system of `directory`, then free about `leave` bytes of it."""
    filler = directory / "filler"
    with open(filler, "ab", buffering=0) as handle:
        for block in (1 << 16, 4096, 256, 1):
            chunk = b"\0" * block
            try:
                while handle.write(chunk):
                    pass
            except OSError:
                continue
    os.truncate(filler, max(0, filler.stat().st_size - leave))


def _note_text(rng: random.Random) -> str:
    """Chinese and English (multi-byte characters can be cut mid-character), one to three
    lines, each line without surrounding spaces: `parse_notes` gives it back verbatim."""
    lines = [
        " ".join(rng.choice(WORDS) for _ in range(rng.randrange(2, 300)))
        for _ in range(rng.choice((1, 1, 2, 3)))
    ]
    return "\n".join(lines)


@dataclass
class Tally:
    trials: int = 0
    acknowledged: int = 0
    refused: int = 0
    torn: int = 0
    torn_trials: int = 0
    unacknowledged_in_file: int = 0
    stray_index_rows: int = 0
    degraded: int = 0
    unclear: int = 0
    """Refusals that were not one MemoryFileError line."""
    problems: list[str] = field(default_factory=list)

    def line(self, label: str) -> str:
        return (
            f"{label}: {self.trials} trials, {self.acknowledged} notes acknowledged,"
            f" {self.refused} refused ({self.unclear} not as one clear line),"
            f" torn {self.torn} (in {self.torn_trials} trials),"
            f" unacknowledged notes in the file {self.unacknowledged_in_file},"
            f" index rows without a note {self.stray_index_rows},"
            f" index degraded in {self.degraded} trials"
        )


def _clear_refusal(exc: BaseException | str) -> bool:
    text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return text.startswith("MemoryFileError: note not saved: ") and "\n" not in text


def _check_file(tally: Tally, trial: int, path: Path, day: date, acked: list[str]) -> list[str]:
    """Count torn notes: an acknowledged note not whole where it belongs, or a last line
    left open. Returns the notes the file holds (after the trial's first note)."""
    raw = path.read_bytes()
    text = raw.decode("utf-8", errors="replace")
    notes = [n.text for n in daily.parse_notes(text, day)][1:]
    torn = sum(1 for i, note in enumerate(acked) if i >= len(notes) or notes[i] != note)
    if raw and not raw.endswith(b"\n"):
        torn += 1
    if "\ufffd" in text:
        torn += 1
    if torn:
        tally.problems.append(f"trial {trial}: {torn} torn in {path}: ...{text[-200:]!r}")
    tally.torn += torn
    tally.torn_trials += torn > 0
    tally.unacknowledged_in_file += max(0, len(notes) - len(acked))
    return notes


# --- full disk --------------------------------------------------------------------------------


@pytest.fixture
async def refusing_disk(
    tmpfs: Path | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[str, Path]]:
    """("tmpfs", its path) or ("injected", a plain directory): in the injected mode writes
    to daily files follow `_INJECTED` (set per trial)."""
    if tmpfs is not None:
        yield "tmpfs", tmpfs
        return
    real_write = os.write

    def write(fd: int, data: bytes | memoryview) -> int:
        budget = _INJECTED.get("room")
        if budget is None or not is_daily_note_fd(fd):
            return real_write(fd, data)
        if budget <= 0:
            raise OSError(28, os.strerror(28))  # ENOSPC
        size = min(len(data), budget, _INJECTED["per_call"])
        _INJECTED["room"] = budget - size
        return real_write(fd, bytes(data[:size]))

    monkeypatch.setattr(os, "write", write)
    base = tmp_path / "plain"
    base.mkdir()
    try:
        yield "injected", base
    finally:
        _INJECTED.clear()


_INJECTED: dict[str, int] = {}


async def test_daily_notes_on_a_full_disk(
    refusing_disk: tuple[str, Path], record_property: pytest.RecordProperty
) -> None:
    """30 trials: a note, the disk filled up to a few KiB, then notes until one is refused.
    Every acknowledged note is whole, a refused one left nothing in the file or the index."""
    mode, base = refusing_disk
    rng = random.Random(11)
    tally = Tally()
    for trial in range(30):
        workspace = base / f"w{trial}"
        config = load_config(None, env={}, workspace=workspace)
        async with MemoryCore.open(config) as core:
            relative, _ = await core.notes.append(MAIN, "first note of the trial")
            path = workspace / relative
            day = core.notes.today()
            acked: list[str] = []
            if mode == "tmpfs":
                # Grow the database's write-ahead log, then checkpoint it: the next index
                # writes reuse its blocks, so the index keeps working on the full disk and
                # the one-trip path (note and index row together) meets the refusal.
                for n in range(12):
                    acked.append(f"warm-up note {n}" + " 长期记忆" * 200)
                    await core.notes.append(MAIN, acked[-1])
                await database(core).autocommit(
                    lambda c: c.execute("PRAGMA wal_checkpoint(PASSIVE)")
                )
                _fill(base, rng.randrange(0, 12_000))
            else:
                _INJECTED.update(room=rng.randrange(0, 12_000), per_call=rng.randrange(1, 4096))
            refused = ""
            for _ in range(500):
                text = _note_text(rng)
                try:
                    await core.notes.append(MAIN, text)
                except Exception as exc:  # checked below, after the file is counted
                    tally.unclear += not _clear_refusal(exc)
                    refused = text
                    break
                acked.append(text)
            assert refused, "the disk never filled"
            tally.trials += 1
            tally.acknowledged += len(acked)
            tally.refused += 1
            notes = _check_file(tally, trial, path, day, acked)
            tally.degraded += core.degraded_reason is not None
            if core.degraded_reason is None:  # the index still works: it holds no refused note
                rows = await sql(core, "SELECT text FROM chunks WHERE path = ?", relative)
                stray = [t for (t,) in rows if t not in notes and t != "first note of the trial"]
                tally.stray_index_rows += len(stray)
                assert refused not in [t for (t,) in rows]
            _INJECTED.clear()
        await _clear(base)
    figures = tally.line(f"disk full ({mode})")
    record_property("disk_full", figures)
    print(figures)
    assert tally.torn == 0, tally.problems
    assert tally.unclear == 0, figures
    assert tally.unacknowledged_in_file == 0 and tally.stray_index_rows == 0, figures
    assert tally.acknowledged > 0


async def _clear(base: Path) -> None:
    def clear() -> None:
        for child in base.iterdir():
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()

    await asyncio.to_thread(clear)


async def test_a_full_disk_keeps_memory_md_and_history(tmpfs: Path | None) -> None:
    """MEMORY.md (atomic write) and archive files on a really full disk: one clear line,
    the old file byte for byte, no temp file left, no message lost; all works once there
    is room again. First the disk runs out of inodes (no new file: the database, whose
    files exist, still works, so the archive run reaches its file write), then of space."""
    if tmpfs is None:
        pytest.skip("mounting a tmpfs needs CAP_SYS_ADMIN; the file size limit tests cover this")
    workspace = tmpfs / "w"
    direct = load_config(None, env={}, workspace=workspace)
    direct = direct.model_copy(
        update={"long_term": direct.long_term.model_copy(update={"journal": False})}
    )
    async with MemoryCore.open(direct) as core:
        await core.memories.capture(MAIN, "likes green tea")
        assert (await core.conversation.archive(MAIN)).moved == 0  # its lock file exists now
        now = core.now()
        talk = [RecordedMessage("user", "", f"message {i} " + "字" * 400, now) for i in range(20)]
        await core.record_session(MAIN, "s1", now, talk)
        memory_md = workspace / "MEMORY.md"
        before = memory_md.read_bytes()

        _fill_inodes(tmpfs)
        with pytest.raises(
            MemoryFileError, match=r"^MEMORY\.md left as it was: .*disk full \(ENOSPC\)$"
        ):
            await core.memories.capture(MAIN, "likes coffee")
        with pytest.raises(MemoryFileError, match=r"\.md left as it was: .*disk full \(ENOSPC\)$"):
            await core.conversation.archive(MAIN)
        assert memory_md.read_bytes() == before
        assert _files(workspace) == _files(workspace, before_archive=True)
        shutil.rmtree(tmpfs / "inodes")

        _fill(tmpfs, 0)
        for attempt in (
            core.memories.capture(MAIN, "likes coffee " + "咖啡" * 3000),
            core.conversation.archive(MAIN),
        ):
            with pytest.raises(ChatmemError) as refused:
                await attempt
            assert "\n" not in str(refused.value) and "full" in str(refused.value)
        assert memory_md.read_bytes() == before
        assert _files(workspace) == _files(workspace, before_archive=True)
        (tmpfs / "filler").unlink()

        report = await core.conversation.archive(MAIN)
        assert report.moved == 20
        archived = (workspace / report.files[0]).read_text(encoding="utf-8")
        assert all(f"message {i} " in archived for i in range(20))
        await core.memories.capture(MAIN, "likes coffee")
        assert {e.content for e in await core.memories.entries(MAIN)} == {
            "likes green tea",
            "likes coffee",
        }


def _fill_inodes(directory: Path) -> None:
    """Make empty files until the file system has no inode left."""
    holder = directory / "inodes"
    holder.mkdir()
    for n in range(1_000_000):
        try:
            (holder / str(n)).touch()
        except OSError:
            return


def _files(workspace: Path, *, before_archive: bool = False) -> list[str]:
    """The workspace's Markdown files and any temp file; with `before_archive`, what it
    held before any archive run (MEMORY.md, its backup, today's daily notes: none)."""
    found = sorted(
        p.relative_to(workspace).as_posix()
        for p in workspace.rglob("*")
        if p.is_file() and (p.suffix in (".md", ".tmp", ".bak") or p.name.endswith(".tmp"))
    )
    if before_archive:
        return [f for f in found if not f.startswith("memory/") and not f.endswith(".tmp")]
    return found


# --- a file size limit (RLIMIT_FSIZE), in child processes --------------------------------------

CHILD = r"""
import asyncio, json, random, resource, signal, sys
from pathlib import Path

from memory_core.config import load_config
from memory_core.engine import MemoryCore
from memory_core.base.errors import ChatmemError, MemoryFileError
from memory_core.base.scope import ScopeKey

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death, as Python does
base, first, trials, seed = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
WORDS = json.loads(sys.argv[5])
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)


def note():
    return "\n".join(
        " ".join(rng.choice(WORDS) for _ in range(rng.randrange(2, 300)))
        for _ in range(rng.choice((1, 1, 2, 3)))
    )


def say(**row):
    print(json.dumps(row, ensure_ascii=False), flush=True)


async def trial(n):
    workspace = base / f"w{n}"
    async with MemoryCore.open(load_config(None, env={}, workspace=workspace)) as core:
        relative, _ = await core.notes.append(ScopeKey("main"), "first note of the trial")
        size = (workspace / relative).stat().st_size
        say(trial=n, path=str(workspace / relative), day=core.notes.today().isoformat())
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + rng.randrange(0, 16_000), hard))
        try:
            for _ in range(500):
                text = note()
                try:
                    await core.notes.append(ScopeKey("main"), text)
                except Exception as exc:
                    say(trial=n, refused=f"{type(exc).__name__}: {exc}")
                    return
                say(trial=n, ack=text)
            say(trial=n, never_refused=True)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            say(trial=n, degraded=core.degraded_reason is not None)


async def main():
    for n in range(first, first + trials):
        await trial(n)


asyncio.run(main())
"""


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in dict(env_bindings())}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def test_daily_notes_under_a_file_size_limit(
    tmp_path: Path, record_property: pytest.RecordProperty
) -> None:
    """20 trials in 4 child processes: each sets RLIMIT_FSIZE a little above its daily
    file (SIGXFSZ ignored) and appends notes until one is refused; then this process
    checks that every note a child was told was saved is whole in the file."""
    tally = Tally()
    for child in range(4):
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(tmp_path), str(child * 5), "5", str(child),
             json.dumps(WORDS)],
            capture_output=True, text=True, cwd=ROOT, env=_child_env(), timeout=300,
            check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        for trial in sorted({row["trial"] for row in rows}):
            mine = [row for row in rows if row["trial"] == trial]
            head = mine[0]
            acked = [row["ack"] for row in mine if "ack" in row]
            refusals = [row["refused"] for row in mine if "refused" in row]
            assert len(refusals) == 1, mine[-3:]
            tally.unclear += not _clear_refusal(refusals[0])
            tally.trials += 1
            tally.acknowledged += len(acked)
            tally.refused += 1
            tally.degraded += any(row.get("degraded") for row in mine)
            _check_file(tally, trial, Path(head["path"]), date.fromisoformat(head["day"]), acked)
    figures = tally.line("file size limit")
    record_property("rlimit_fsize", figures)
    print(figures)
    assert tally.torn == 0, tally.problems
    assert tally.unclear == 0, figures
    assert tally.unacknowledged_in_file == 0, figures
    assert tally.acknowledged > 0


# --- the command line -----------------------------------------------------------------------

LIMITED_CLI = r"""
import resource, runpy, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
sys.argv = ["chatmem", *sys.argv[2:]]
runpy.run_module("adapters.cli", run_name="__main__")
"""


def _chatmem(*argv: str, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "adapters.cli", *argv]
    if limit is not None:
        command = [sys.executable, "-c", LIMITED_CLI, str(limit), *argv]
    return subprocess.run(
        command, capture_output=True, text=True, cwd=ROOT, env=_child_env(), timeout=120,
        check=False,
    )  # fmt: skip


def _one_clear_line(done: subprocess.CompletedProcess[str], starts: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"chatmem: error: {starts}"), done.stderr


@pytest.fixture
def cli_workspace(tmp_path: Path) -> tuple[Path, Path]:
    """An initialised workspace with a note and a memory, and a config that writes
    MEMORY.md on each capture (so the capture itself meets the disk)."""
    workspace = tmp_path / "W"
    toml = tmp_path / "direct.toml"
    toml.write_text("[long_term]\njournal = false\n", encoding="utf-8")
    for argv in (
        ("init",),
        ("append", "first note"),
        ("capture", "likes green tea", "--category", "preference"),
    ):
        done = _chatmem(*argv, "--workspace", str(workspace), "--config", str(toml))
        assert done.returncode == 0, done.stderr
    return workspace, toml


def _snapshot(workspace: Path) -> dict[str, bytes]:
    return {
        p.relative_to(workspace).as_posix(): p.read_bytes()
        for p in [workspace / "MEMORY.md", *(workspace / "memory").glob("*.md")]
    }


def test_cli_over_a_file_size_limit_is_one_line_and_exit_2(
    cli_workspace: tuple[Path, Path],
) -> None:
    workspace, toml = cli_workspace
    before = _snapshot(workspace)
    common = ("--workspace", str(workspace), "--config", str(toml))
    biggest = max(len(data) for data in before.values())
    note = _chatmem("append", "大" * 5000, *common, limit=biggest + 100)
    _one_clear_line(note, "note not saved")
    assert "file size limit reached (EFBIG)" in note.stderr
    capture = _chatmem("capture", "likes coffee " + "咖啡" * 3000, *common, limit=biggest + 100)
    _one_clear_line(capture, "MEMORY.md left as it was")
    assert _snapshot(workspace) == before


def test_cli_on_a_full_disk_is_one_line_and_exit_2(tmpfs: Path | None, tmp_path: Path) -> None:
    if tmpfs is None:
        pytest.skip("mounting a tmpfs needs CAP_SYS_ADMIN; the file size limit test covers this")
    workspace = tmpfs / "W"
    toml = tmp_path / "direct.toml"
    toml.write_text("[long_term]\njournal = false\n", encoding="utf-8")
    common = ("--workspace", str(workspace), "--config", str(toml))
    for argv in (("init",), ("append", "first note"), ("capture", "likes green tea")):
        assert _chatmem(*argv, *common).returncode == 0
    before = _snapshot(workspace)
    _fill(tmpfs, 0)
    _one_clear_line(_chatmem("append", "x" * 20_000, *common), "note not saved")
    _one_clear_line(_chatmem("capture", "c" * 20_000, *common), "MEMORY.md left as it was")
    assert _snapshot(workspace) == before


def _permissions_enforced(directory: Path) -> bool:
    """False for a process that writes read-only files anyway (root with CAP_DAC_OVERRIDE)."""
    probe = directory / "probe"
    probe.write_text("", encoding="utf-8")
    probe.chmod(0o444)
    try:
        with open(probe, "a", encoding="utf-8"):
            return False
    except PermissionError:
        return True
    finally:
        probe.unlink()


def test_cli_in_a_read_only_workspace_is_one_line_and_exit_2(
    tmpfs: Path | None, tmp_path: Path
) -> None:
    """Remounted read-only where this process may mount; else (not root) the workspace's
    files and directories lose their write bits."""
    if tmpfs is None and not _permissions_enforced(tmp_path):
        pytest.skip("this process ignores permissions and may not mount: nothing is read-only")
    workspace = (tmpfs or tmp_path) / "W"
    common = ("--workspace", str(workspace))
    for argv in (("init",), ("append", "first note"), ("capture", "likes green tea")):
        assert _chatmem(*argv, *common).returncode == 0
    before = _snapshot(workspace)
    if tmpfs is not None:
        subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    else:
        for path in [workspace, *workspace.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
    try:
        refused = f"workspace {workspace} is read-only and `"
        _one_clear_line(_chatmem("append", "second note", *common), refused)
        _one_clear_line(_chatmem("capture", "likes coffee", *common), refused)
        chat = subprocess.run(
            [sys.executable, "-m", "adapters.cli", "chat", *common],
            input="remember that I like tea\nhello\n",
            capture_output=True, text=True, cwd=ROOT, env=_child_env(), timeout=120,
            check=False,
        )  # fmt: skip
        _one_clear_line(chat, refused)  # refused at the start, not line by line
        assert len(chat.stderr.splitlines()) == 1 and chat.stdout == "", chat
        for argv in (("status",), ("search", "green tea"), ("scopes",)):
            read = _chatmem(*argv, *common)
            assert read.returncode == 0 and read.stderr == "", (argv, read.stderr)
            assert "green tea" in read.stdout or argv == ("scopes",)
    finally:
        if tmpfs is not None:
            subprocess.run(["mount", "-o", "remount,rw", str(tmpfs)], check=True)
        else:
            for path in [workspace, *workspace.rglob("*")]:
                path.chmod(path.stat().st_mode | 0o200)
    assert _snapshot(workspace) == before
