"""Daily-note appends that the disk or the database refuse (issue 11, items 2, 3, 4, 8).

The faults are real where a test can make them real (a database put in query-only mode, a
file without a final newline); a disk that fills mid-write is injected at `os.write`, the
one call the daily file's bytes go through (tests/reliability/test_disk_full.py fills a
real file system and a real file size limit).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.errors import ChatmemError, MemoryFileError
from memory_core.base.scope import ScopeKey
from memory_core.engine import MemoryCore
from memory_core.notes import daily
from memory_core.notes import daily_notes as notes_module
from tests.support import database, is_daily_note_fd, sql

pytestmark = pytest.mark.storage

MAIN = ScopeKey("main")
DAILY = "memory/2026-03-01.md"


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int, int | None], None]]:
    """`disk(per_call, room)`: writes to daily files take at most `per_call` bytes a
    call (a short write, as a filling disk or a size limit gives) and fail with ENOSPC
    once `room` bytes are written (None: never)."""
    real_write = os.write
    state: dict[str, int | None] = {"per_call": None, "room": None}

    def write(fd: int, data: bytes | memoryview) -> int:
        per_call, room = state["per_call"], state["room"]
        if per_call is None or not is_daily_note_fd(fd):
            return real_write(fd, data)
        size = min(len(data), per_call)
        if room is not None:
            if room <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            size = min(size, room)
            state["room"] = room - size
        return real_write(fd, bytes(data[:size]))

    monkeypatch.setattr(os, "write", write)

    def configure(per_call: int, room: int | None) -> None:
        state["per_call"], state["room"] = per_call, room

    yield configure


async def _daily_chunks(core: MemoryCore) -> list[str]:
    rows = await sql(
        core,
        "SELECT text FROM chunks WHERE path = ? AND kind = ? ORDER BY line_from",
        DAILY,
        ChunkKind.DAILY.value,
    )
    return [str(text) for (text,) in rows]


def _hand_append(path: Path, text: str) -> None:
    """`printf -- TEXT >> PATH`: no final newline."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)


def _daily_bytes(core: MemoryCore) -> bytes:
    return (core.workspace.root / DAILY).read_bytes()


# --- item 3: a short write is completed, or rolled back and reported ------------------------


async def test_short_writes_are_completed(
    core: MemoryCore, disk: Callable[[int, int | None], None]
) -> None:
    await core.notes.append(MAIN, "first note")
    disk(7, None)  # every write stops after 7 bytes; none fails
    note = "第二条笔记 written in pieces\nwith a second line"
    path, line = await core.notes.append(MAIN, note)
    assert (path, line) == (DAILY, 4)
    lines = _daily_bytes(core).decode("utf-8").splitlines()
    assert lines[3:] == ["- 12:00:00 第二条笔记 written in pieces", "  with a second line"]
    assert await _daily_chunks(core) == [
        "first note",
        "第二条笔记 written in pieces\nwith a second line",
    ]


async def test_a_full_disk_mid_note_rolls_back_and_says_so(
    core: MemoryCore, disk: Callable[[int, int | None], None]
) -> None:
    """The fast path (note and index row in one trip to the database thread)."""
    await core.notes.append(MAIN, "first note")
    before = _daily_bytes(core)
    disk(10, 25)  # 25 bytes fit, then the disk is full
    with pytest.raises(MemoryFileError) as caught:
        await core.notes.append(MAIN, "a long second note that does not fit on the disk")
    message = str(caught.value)
    assert "\n" not in message
    assert "note not saved" in message and "disk full (ENOSPC)" in message and DAILY in message
    assert _daily_bytes(core) == before
    assert await _daily_chunks(core) == ["first note"]
    assert core.degraded_reason is None  # the disk, not the index, refused
    disk(1 << 20, None)
    _, line = await core.notes.append(MAIN, "third note, the disk has room again")
    assert line == 4
    assert (await core.finder.search(MAIN, "third note"))[0].line_from == 4


async def test_the_waiting_path_rolls_back_too(
    core: MemoryCore, disk: Callable[[int, int | None], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`_append_waiting`: the path taken when another process holds the file lock."""
    await core.notes.append(MAIN, "first note")
    before = _daily_bytes(core)
    monkeypatch.setattr(notes_module, "try_lock_file", lambda path: None)  # "held elsewhere"
    disk(10, 25)
    with pytest.raises(MemoryFileError, match=r"note not saved: .*disk full \(ENOSPC\)"):
        await core.notes.append(MAIN, "a long second note that does not fit on the disk")
    assert _daily_bytes(core) == before
    assert await _daily_chunks(core) == ["first note"]
    disk(3, None)
    _, line = await core.notes.append(MAIN, "third note through the waiting path")
    assert line == 4
    assert await _daily_chunks(core) == ["first note", "third note through the waiting path"]


async def test_a_file_size_limit_is_one_clear_line(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await core.notes.append(MAIN, "first note")
    before = _daily_bytes(core)
    real_write = os.write

    def over_the_limit(fd: int, data: bytes | memoryview) -> int:
        if is_daily_note_fd(fd):
            raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", over_the_limit)
    with pytest.raises(MemoryFileError, match=r"^note not saved: cannot write .*: file size limit"):
        await core.notes.append(MAIN, "second")
    assert _daily_bytes(core) == before


# --- item 4: a note never continues a line left open ------------------------------------


async def test_a_note_after_a_line_without_newline_starts_a_new_line(core: MemoryCore) -> None:
    await core.notes.append(MAIN, "first note")
    _hand_append(core.workspace.root / DAILY, "- 10:00:00 hand edit")
    path, line = await core.notes.append(MAIN, "second")
    assert (path, line) == (DAILY, 5)
    lines = _daily_bytes(core).decode("utf-8").splitlines()
    assert lines[2:] == ["- 12:00:00 first note", "- 10:00:00 hand edit", "- 12:00:00 second"]
    hits = await core.finder.search(MAIN, "second")
    assert [(h.text, h.line_from) for h in hits] == [("second", 5)]
    assert "hand edit" in await _daily_chunks(core)


def test_the_blocking_append_checks_the_last_byte(tmp_path: Path) -> None:
    """Without the core (no index): the file-level function itself."""
    from datetime import UTC, datetime

    path = tmp_path / "2026-03-01.md"
    path.write_text("# 2026-03-01\n\nloose text", encoding="utf-8")
    note = daily.append_note_blocking(
        path, "next", datetime(2026, 3, 1, 12, tzinfo=UTC), root=tmp_path
    )
    assert (note.line_from, note.line_to) == (4, 4)
    assert path.read_text(encoding="utf-8") == "# 2026-03-01\n\nloose text\n- 12:00:00 next\n"


# --- item 2: the database failing before the note is written ------------------------------


@pytest.mark.sqlite_only
async def test_a_database_error_before_the_write_still_saves_the_note(core: MemoryCore) -> None:
    """`BEGIN IMMEDIATE` fails (a read-only database) before the note is written: the
    note goes to the file (the memory), never a raw sqlite3 error to the caller."""
    await core.notes.append(MAIN, "first note")
    await database(core).autocommit(lambda conn: conn.execute("PRAGMA query_only = ON"))
    try:
        path, line = await core.notes.append(MAIN, "written although the index refused")
    finally:
        await database(core).autocommit(lambda conn: conn.execute("PRAGMA query_only = OFF"))
    assert (path, line) == (DAILY, 4)
    lines = _daily_bytes(core).decode("utf-8").splitlines()
    assert lines[3] == "- 12:00:00 written although the index refused"
    hits = await core.finder.search(MAIN, "index refused")
    assert [(h.path, h.line_from) for h in hits] == [(DAILY, 4)]


async def test_an_empty_note_is_still_refused(core: MemoryCore) -> None:
    with pytest.raises(ChatmemError, match="needs some text"):
        await core.notes.append(MAIN, " \n ")
