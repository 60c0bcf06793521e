"""Layer 3: the raw event log, `YYYY-MM-DD.jsonl` per scope beside the daily notes.

Facts only, in the order they happened: what came in, what went out, which tool was
called with what, what it returned, what was decided, what failed. Never rewritten: one
JSON object a line, appended with a single O_APPEND write (so concurrent writers, other
processes included, never interleave inside a line) and fsynced before `append` returns.

A crash can leave a torn last line. It is kept as it is (the log is never rewritten);
the next append first ends it with a newline so its own line stays whole, and readers
skip lines that do not parse, counting them, so nothing after a torn line is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Any

from memory_core.base import safe_files
from memory_core.base.atomic import atomic_write_bytes, describe, fsync_dir
from memory_core.base.clock import format_when, parse_day, parse_when
from memory_core.base.errors import FileRefused
from memory_core.base.scope import ScopeKey
from memory_core.base.workspace import Workspace

log = logging.getLogger(__name__)

MAX_TEXT_CHARS = 4000
"""Longer texts (a pasted document, a tool's large result) are cut, marked with …."""


class EventKind(StrEnum):
    INPUT = "input"
    OUTPUT = "output"
    ACTION = "action"
    RESULT = "result"
    DECISION = "decision"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Event:
    """One line of the log. `data` holds the kind's own fields (text, tool, arguments…)."""

    kind: EventKind
    at: datetime
    data: Mapping[str, Any] = field(default_factory=dict)
    session: str | None = None

    def to_line(self) -> str:
        record: dict[str, Any] = {"at": format_when(self.at), "type": self.kind.value}
        if self.session:
            record["session"] = self.session
        record.update({key: _bounded(value) for key, value in self.data.items()})
        return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"

    @classmethod
    def from_line(cls, line: str) -> Event:
        """The event of one line; ValueError for a line that is not one."""
        record = json.loads(line)
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
        kind = EventKind(record.pop("type"))
        at = parse_when(str(record.pop("at")))
        session = record.pop("session", None)
        return cls(kind, at, record, session if isinstance(session, str) else None)


@dataclass(frozen=True, slots=True)
class DayLog:
    """A day's events, and how many lines could not be read (a torn write, a hand edit)."""

    events: list[Event]
    unreadable: int = 0


def _bounded(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
        return value[: MAX_TEXT_CHARS - 1] + "…"
    return value


def log_path(memory_dir: Path, day: date) -> Path:
    return memory_dir / f"{day.isoformat()}.jsonl"


def append_blocking(path: Path, events: Sequence[Event], *, root: Path) -> None:
    """Append `events` in one write and fsync. Blocking: run it off the event loop.
    `root` is the workspace's: a log or folder leading outside it is refused."""
    if not events:
        return
    payload = "".join(event.to_line() for event in events).encode("utf-8")
    safe_files.make_dirs(root, path.parent)
    fd = safe_files.open_fd(root, path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            payload = b"\n" + payload  # a torn last line stays whole and apart
        written = os.write(fd, payload)
        if written != len(payload):
            raise OSError(f"short write to {path.name}: {written} of {len(payload)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)
    if not size:
        fsync_dir(path.parent)  # a new day's file: its name must survive a power loss


def read_blocking(path: Path, *, root: Path) -> DayLog:
    """A day's events in order; a missing file is an empty day, and so is one the
    workspace boundary refuses (warned once)."""
    try:
        raw = safe_files.read_bytes(root, path, safe_files.NOTE_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        return DayLog([])
    except FileRefused as exc:
        safe_files.warn_once(exc)
        return DayLog([])
    events: list[Event] = []
    unreadable = 0
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            events.append(Event.from_line(line.decode("utf-8")))
        except (ValueError, KeyError, UnicodeDecodeError):
            unreadable += 1
    return DayLog(events, unreadable)


class EventLog:
    """The scopes' event logs: appends and reads off the event loop."""

    def __init__(self, workspace: Workspace, today: Callable[[datetime], date]) -> None:
        self._workspace = workspace
        self._today = today
        self._failing = False

    def path(self, scope: ScopeKey, day: date) -> Path:
        return log_path(self._workspace.memory_dir(scope), day)

    async def record(self, scope: ScopeKey, *events: Event) -> bool:
        """Append events of one moment (a turn's message, a tool call and its result) to
        the day of the first one, fsynced when this returns. Best effort: the log records
        what happened, it is not what makes it happen, so a failed append (a full disk)
        is logged (once until appends work again) and never fails the turn whose message
        is already stored. False when it failed."""
        if not events:
            return True
        path = self.path(scope, self._today(events[0].at))

        def append() -> None:
            self._workspace.ensure_scope(scope)  # a hashed scope's directory keeps its key
            append_blocking(path, events, root=self._workspace.root)

        try:
            await asyncio.to_thread(append)
        except (OSError, FileRefused) as exc:
            if not self._failing:
                why = describe(exc) if isinstance(exc, OSError) else str(exc)
                log.warning("event log of scope %s not written: %s", scope, why)
            self._failing = True
            return False
        if self._failing:
            log.warning("event log written again")
        self._failing = False
        return True

    async def read(self, scope: ScopeKey, day: date) -> DayLog:
        return await asyncio.to_thread(
            partial(read_blocking, self.path(scope, day), root=self._workspace.root)
        )

    async def redact(self, scope: ScopeKey, texts: Sequence[str]) -> int:
        """`redact_blocking` over the scope's logs (for `chatmem purge`)."""
        directory = self._workspace.memory_dir(scope)
        return await asyncio.to_thread(redact_blocking, self._workspace.root, directory, texts)

    async def days(self, scope: ScopeKey) -> list[date]:
        """Days with a log, oldest first."""

        def listing() -> list[date]:
            found = []
            for name in _log_names(self._workspace.root, self._workspace.memory_dir(scope)):
                with contextlib.suppress(ValueError):
                    found.append(parse_day(name.removesuffix(".jsonl")))
            return sorted(found)

        return await asyncio.to_thread(listing)


def message_events(
    role: str,
    content: str,
    at: datetime,
    session: str | None,
    speaker: str = "",
    meta: Mapping[str, Any] | None = None,
    speaker_id: str | None = None,
) -> list[Event]:
    """The events of one stored chat message: a person's message is an input (with who
    said it: the name shown, and `speaker_id`, the sender's platform id, when known), a
    reply an output (after the error that made it a canned one), a tool message the call
    (action) and what it returned (result). Other roles (summaries) are derived, not
    events."""
    meta = meta or {}
    if role == "user":
        data = {"speaker": speaker, "text": content} if speaker else {"text": content}
        if speaker_id:
            data["speaker_id"] = speaker_id
        return [Event(EventKind.INPUT, at, data, session)]
    if role == "assistant":
        events = []
        if "error" in meta:
            events.append(
                Event(EventKind.ERROR, at, {"stage": "model", "detail": meta["error"]}, session)
            )
        return [*events, Event(EventKind.OUTPUT, at, {"text": content}, session)]
    if role == "tool":
        call = {"tool": speaker, "arguments": meta.get("arguments", "")}
        return [
            Event(EventKind.ACTION, at, call, session),
            Event(EventKind.RESULT, at, {"tool": speaker, "text": content}, session),
        ]
    return []


def decision_events(
    what: str, changes: Sequence[tuple[str, str]], at: datetime, session: str | None
) -> list[Event]:
    """One decision event per long-term change (kind, entry id) a capture or an extraction
    made. The entry's text is not copied here: `chatmem purge` can erase an entry's text
    for good, and this log is never rewritten."""
    return [
        Event(EventKind.DECISION, at, {"what": what, "change": kind, "entry": entry}, session)
        for kind, entry in changes
    ]


PURGED = "[purged]"


def _redacted(value: Any, forms: Sequence[str]) -> Any:
    if isinstance(value, str):
        for form in forms:
            value = value.replace(form, PURGED)
        return value
    if isinstance(value, list):
        return [_redacted(item, forms) for item in value]
    if isinstance(value, dict):
        return {key: _redacted(item, forms) for key, item in value.items()}
    return value


def _log_names(root: Path, directory: Path) -> list[str]:
    """The names of the folder's day logs; none when it is missing or refused (warned)."""
    return [e.name for e in safe_files.entries(root, directory) if e.name.endswith(".jsonl")]


def redact_blocking(root: Path, directory: Path, texts: Sequence[str]) -> int:
    """Blank `texts` wherever the day files in `directory` hold them: as they are, and as
    they stand inside a JSON string a value holds (a tool call's arguments). The one
    rewrite the log allows, for `chatmem purge`; each file is replaced atomically. The
    number of files rewritten."""
    forms = sorted(
        {
            form
            for text in texts
            if text
            for form in (text, json.dumps(text, ensure_ascii=False)[1:-1])
        },
        key=len,
        reverse=True,
    )
    if not forms:
        return 0
    encoded = [json.dumps(form, ensure_ascii=False)[1:-1].encode("utf-8") for form in forms]
    rewritten = 0
    for path in sorted(directory / name for name in _log_names(root, directory)):
        try:
            raw = safe_files.read_bytes(root, path, safe_files.NOTE_BYTES)
        except FileRefused as exc:
            safe_files.warn_once(exc)  # no text of it is in this workspace
            continue
        if not any(needle in raw for needle in encoded):
            continue
        lines = []
        for line in raw.split(b"\n"):
            try:
                record = json.loads(line.decode("utf-8")) if line.strip() else None
            except (ValueError, UnicodeDecodeError):
                record = None
            if isinstance(record, dict):
                cleaned = _redacted(record, forms)
                line = json.dumps(cleaned, ensure_ascii=False, separators=(",", ":")).encode()
            else:
                for needle in encoded:  # a torn line: blank the bytes themselves
                    line = line.replace(needle, PURGED.encode())
            lines.append(line)
        atomic_write_bytes(path, b"\n".join(lines), root=root)
        rewritten += 1
    return rewritten
