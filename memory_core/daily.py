"""Daily notes: append-only `YYYY-MM-DD.md` per scope, one timestamped bullet per note.

Appends go through the scope's file lock and a single O_APPEND write, so notes from many
tasks and processes never interleave or vanish. Continuation lines of a multi-line note are
indented, which keeps one note one Markdown list item (and one index chunk).
"""

from __future__ import annotations

import os
import re
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

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
    path: Path, text: str, when: datetime, *, durable: bool = True
) -> AppendedNote:
    """Append one note. Caller holds the scope's file lock.

    The stamps come from the same call as the write, so the index can tell whether it
    holds the file exactly as it was before (then adding just this note is enough) and
    record exactly this write, not a hand edit that might follow it. With `durable`
    false the caller fsyncs (`fsync_path`) itself, e.g. while the index write runs.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        st = os.stat(path)
        before = (st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        before = (0, 0)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        existing_lines = _count_lines(path) if size else 0
        note = format_note(text, when)
        payload = note
        if size == 0:
            payload = f"# {when.date().isoformat()}\n\n" + note
            first_line = 3
        else:
            first_line = existing_lines + 1
        os.write(fd, payload.encode("utf-8"))
        if durable:
            os.fsync(fd)
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return AppendedNote(
        line_from=first_line,
        line_to=first_line + note.count("\n") - 1,
        text=_note_text(note, when.date()),
        before=before,
        after=(st.st_mtime_ns, st.st_size),
    )


_SYNCING = ThreadPoolExecutor(max_workers=2, thread_name_prefix="chatmem-fsync")


def fsync_soon(path: Path) -> Future[None]:
    """`fsync_path` on a worker thread, started now: a caller on another thread (the
    database's) overlaps it with its own work and waits for the future before it says the
    note is stored."""
    return _SYNCING.submit(fsync_path, path)


def fsync_path(path: Path) -> None:
    """Flush a file written through another descriptor (fsync is per file, not per
    descriptor)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _note_text(note: str, day: date) -> str:
    """The text a later read of the file gives this note (`parse_notes`: continuation
    lines stripped), so an appended note's chunk equals the one a full sync makes."""
    parsed = parse_notes(note, day)
    return parsed[0].text if len(parsed) == 1 else note.split(" ", 2)[-1].strip()


def _count_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 16), b""))


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
    directory: Path, today: date, max_chars: int, days: int = 2
) -> list[tuple[date, str]]:
    """Today's and yesterday's files, newest notes kept when the cap bites."""
    picked: list[tuple[date, str]] = []
    budget = max_chars
    for offset in range(days):
        day = today - timedelta(days=offset)
        path = directory / f"{day.isoformat()}.md"
        try:
            text = path.read_text(encoding="utf-8")
        except (FileNotFoundError, UnicodeDecodeError):
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
