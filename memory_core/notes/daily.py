"""Daily notes: append-only `YYYY-MM-DD.md` per scope, one timestamped bullet per note.

Appends go through the scope's file lock and a single O_APPEND write, so notes from many
tasks and processes never interleave or vanish. Continuation lines of a multi-line note are
indented, which keeps one note one Markdown list item (and one index chunk).
"""

from __future__ import annotations

import errno
import logging
import os
import re
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

from memory_core.base import safe_files
from memory_core.base.atomic import describe, write_error
from memory_core.base.errors import FileRefused, MemoryFileError

log = logging.getLogger(__name__)

NOTE = re.compile(r"^- (?P<time>\d{2}:\d{2}(?::\d{2})?) (?P<text>.*)$")


@dataclass(frozen=True, slots=True)
class DailyNote:
    day: date
    time: str
    text: str
    line_from: int
    line_to: int


def format_note(text: str, when: datetime) -> str:
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()] or [""]
    head = f"- {when.strftime('%H:%M:%S')} {lines[0]}"
    return "\n".join([head, *(f"  {line}" for line in lines[1:])]) + "\n"


@dataclass(frozen=True, slots=True)
class AppendedNote:
    """Where an appended note landed, and the file's stamps around the write."""

    line_from: int
    line_to: int
    text: str
    """The note as `parse_notes` reads it back: what the index stores as its chunk."""
    before: tuple[int, int]
    """(mtime_ns, size) before the write; (0, 0) when the file did not exist."""
    after: tuple[int, int]
    """(mtime_ns, size) right after the write, from the descriptor that wrote it."""


def append_note_blocking(
    path: Path, text: str, when: datetime, *, root: Path, durable: bool = True
) -> AppendedNote:
    """Append one note. Caller holds the scope's file lock.

    The stamps come from the same call as the write, so the index can tell whether it
    holds the file exactly as it was before (then adding just this note is enough) and
    record exactly this write, not a hand edit that might follow it. With `durable`
    false the caller fsyncs (`fsync_path`) itself, e.g. while the index write runs.

    A note is written whole or not at all: a write the disk cannot take (full, over the
    file size limit, read-only) is cut back to the old length and raised as MemoryFileError,
    so no caller is told a torn note was saved. `root` is the workspace's: a note file
    or folder that leads outside it, or is no regular file, is refused (`safe_files`).
    """
    try:
        safe_files.make_dirs(root, path.parent)
        st = safe_files.file_stat(root, path)
        before = (0, 0) if st is None else (st.st_mtime_ns, st.st_size)
        # Read and write: the last byte says whether the file ends its last line.
        fd = safe_files.open_fd(root, path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise write_error("note not saved", path, exc) from exc
    try:
        try:
            size = os.fstat(fd).st_size
            existing_lines, ends_line = _scan(fd, size)
        except OSError as exc:
            raise write_error("note not saved", path, exc) from exc
        note = format_note(text, when)
        if size == 0:
            payload = f"# {when.date().isoformat()}\n\n" + note
            first_line = 3
        elif ends_line:
            payload = note
            first_line = existing_lines + 1
        else:
            # A hand edit (or an older torn write) left the last line open: a note glued
            # to it would become part of that line.
            payload = "\n" + note
            first_line = existing_lines + 2
        _write_whole(fd, payload.encode("utf-8"), size, path)
        try:
            if durable:
                os.fsync(fd)
            st = os.fstat(fd)
        except OSError as exc:
            raise write_error("note may not be saved", path, exc) from exc
    finally:
        os.close(fd)
    return AppendedNote(
        line_from=first_line,
        line_to=first_line + note.count("\n") - 1,
        text=_note_text(note, when.date()),
        before=before,
        after=(st.st_mtime_ns, st.st_size),
    )


def _write_whole(fd: int, data: bytes, old_size: int, path: Path) -> None:
    """All of `data`, or the file cut back to `old_size` and MemoryFileError.

    `os.write` may write less than asked (a disk that fills, a file size limit) and only
    the next call fails; the bytes already written would be a torn note.
    """
    view = memoryview(data)
    try:
        while view:
            written = os.write(fd, view)
            if written <= 0:  # a regular file never does this; never loop on it
                raise OSError(errno.EIO, "write made no progress")
            view = view[written:]
    except OSError as exc:
        try:
            os.ftruncate(fd, old_size)
        except OSError as undo:
            raise MemoryFileError(
                f"note not saved: cannot write {path}: {describe(exc)}; cutting the partial"
                f" note off failed too ({describe(undo)}), so its last line may be torn"
            ) from exc
        raise write_error("note not saved", path, exc) from exc


_SYNCING = ThreadPoolExecutor(max_workers=2, thread_name_prefix="chatmem-fsync")


def fsync_soon(path: Path, root: Path) -> Future[None]:
    """`fsync_path` on a worker thread, started now: a caller on another thread (the
    database's) overlaps it with its own work and waits for the future before it says the
    note is stored."""
    return _SYNCING.submit(fsync_path, path, root)


def fsync_path(path: Path, root: Path) -> None:
    """Flush a file written through another descriptor (fsync is per file, not per
    descriptor). Some file systems report a full disk only here (NFS, some FUSE)."""
    try:
        fd = safe_files.open_fd(root, path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise write_error("note may not be saved", path, exc) from exc


def _note_text(note: str, day: date) -> str:
    """The text a later read of the file gives this note (`parse_notes`: continuation
    lines stripped), so an appended note's chunk equals the one a full sync makes."""
    parsed = parse_notes(note, day)
    return parsed[0].text if len(parsed) == 1 else note.split(" ", 2)[-1].strip()


def _scan(fd: int, size: int) -> tuple[int, bool]:
    """The first `size` bytes of the file: how many lines they end, and whether the last
    byte ends a line (true for an empty file)."""
    lines = 0
    last = b"\n"
    offset = 0
    while offset < size:
        chunk = os.pread(fd, min(1 << 16, size - offset), offset)
        if not chunk:
            break
        lines += chunk.count(b"\n")
        last = chunk[-1:]
        offset += len(chunk)
    return lines, last == b"\n"


def parse_notes(text: str, day: date) -> list[DailyNote]:
    """Notes of a daily file with their line ranges (hand-written lines become notes too)."""
    notes: list[DailyNote] = []
    current: list[str] = []
    start = 0
    time = ""

    def close(end: int) -> None:
        if current:
            notes.append(DailyNote(day, time, "\n".join(current).strip(), start, end))

    for number, line in enumerate(text.splitlines(), start=1):
        match = NOTE.match(line)
        if match:
            close(number - 1)
            current, start, time = [match.group("text")], number, match.group("time")
        elif line.startswith("  ") and current:
            current.append(line.strip())
        elif line.strip() and not line.startswith("# "):
            close(number - 1)
            current, start, time = [line.strip().removeprefix("- ")], number, ""
        else:
            close(number - 1)
            current = []
    close(len(text.splitlines()))
    return [n for n in notes if n.text]


def read_recent_blocking(
    root: Path, directory: Path, today: date, max_chars: int, days: int = 2
) -> list[tuple[date, str]]:
    """Today's and yesterday's files, newest notes kept when the cap bites. A file the
    workspace boundary refuses (`safe_files`) is left out with a warning: the prompt is
    built all the same."""
    picked: list[tuple[date, str]] = []
    budget = max_chars
    for offset in range(days):
        day = today - timedelta(days=offset)
        path = directory / f"{day.isoformat()}.md"
        try:
            text = safe_files.read_text(root, path, safe_files.NOTE_BYTES)
        except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
            continue
        except FileRefused as exc:
            log.warning("%s", exc)
            continue
        notes = parse_notes(text, day)
        kept: list[str] = []
        for note in reversed(notes):
            line = f"- {note.time} {note.text}".replace(" \n", "\n").strip()
            if len(line) + 1 > budget:
                budget = 0
                break
            kept.append(line)
            budget -= len(line) + 1
        if kept:
            picked.append((day, "\n".join(reversed(kept))))
        if budget <= 0:
            break
    return list(reversed(picked))


def render_recent(notes: list[tuple[date, str]]) -> str:
    return "\n\n".join(f"## {day.isoformat()}\n{text}" for day, text in notes)
