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
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from memory_core.clock import format_when, parse_when
from memory_core.scope import ScopeKey

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


def append_blocking(path: Path, events: Sequence[Event]) -> None:
    """Append `events` in one write and fsync. Blocking: run it off the event loop."""
    if not events:
        return
    payload = "".join(event.to_line() for event in events).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
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


def read_blocking(path: Path) -> DayLog:
    """A day's events in order; a missing file is an empty day."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
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

    def __init__(
        self, memory_dir: Callable[[ScopeKey], Path], today: Callable[[datetime], date]
    ) -> None:
        self._memory_dir = memory_dir
        self._today = today

    def path(self, scope: ScopeKey, day: date) -> Path:
        return log_path(self._memory_dir(scope), day)

    async def record(self, scope: ScopeKey, *events: Event) -> None:
        """Append events of one moment (a turn's message, a tool call and its result) to
        the day of the first one, fsynced when this returns."""
        if events:
            path = self.path(scope, self._today(events[0].at))
            await asyncio.to_thread(append_blocking, path, events)

    async def read(self, scope: ScopeKey, day: date) -> DayLog:
        return await asyncio.to_thread(read_blocking, self.path(scope, day))

    async def days(self, scope: ScopeKey) -> list[date]:
        """Days with a log, oldest first."""

        def listing() -> list[date]:
            found = []
            for path in self._memory_dir(scope).glob("*.jsonl"):
                with contextlib.suppress(ValueError):
                    found.append(date.fromisoformat(path.stem))
            return sorted(found)

        return await asyncio.to_thread(listing)


def message_events(
    role: str,
    content: str,
    at: datetime,
    session: str | None,
    speaker: str = "",
    meta: Mapping[str, Any] | None = None,
) -> list[Event]:
    """The events of one stored chat message: a person's message is an input, a reply an
    output (after the error that made it a canned one), a tool message the call (action)
    and what it returned (result). Other roles (summaries) are derived, not events."""
    meta = meta or {}
    if role == "user":
        data = {"speaker": speaker, "text": content} if speaker else {"text": content}
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
