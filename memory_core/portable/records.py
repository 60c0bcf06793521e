"""Pure: the records of chatmem's export format (JSON lines) and their checks.

One JSON object a line. The first is the header (`kind: "header"`, the format's name and
version, the chatmem version that wrote it); every other line has a `kind` and the
`scope` key it belongs to. A record is checked whole when the file is read, before
anything is written: a line that is not one, an unknown kind, a missing field or a
scope key the core refuses is one `ImportRefused` line naming the line number.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from memory_core.base.clock import parse_when
from memory_core.base.entries import (
    ArchiveReason,
    Granularity,
    Importance,
    MemoryClass,
    MemoryEntry,
    is_valid_entry_id,
)
from memory_core.base.errors import ChatmemError, ScopeError
from memory_core.base.scope import ScopeKey, printable_key

FORMAT = "chatmem-export"
FORMAT_VERSION = 2
"""Raised when a record's meaning changes or kinds are added; a reader refuses a newer
version (2 added `forgotten`, `archive`, `summary`: a version-1 file still reads)."""

KINDS = (
    "entry",
    "quarantined",
    "forgotten",
    "note",
    "archive",
    "summary",
    "session",
    "message",
    "audit",
    "snapshot",
)
"""Every kind of record after the header. `snapshot` is for reading: an import rebuilds
the snapshot from what it imported."""

ARCHIVE_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})-[A-Za-z0-9][A-Za-z0-9_-]{0,63}\.md$")
"""An archive file of raw history: `YYYY-MM-DD-{slug}.md` in the scope's folder."""
SUMMARY_NAME = re.compile(r"^(\d{4}-\d{2}(?:-\d{2})?)\.md$")
"""A daily or monthly summary: `summary/YYYY-MM-DD.md` or `summary/YYYY-MM.md`."""

DAILY_FILE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.md$")
"""A daily note's file name: its date."""


class ImportRefused(ChatmemError):
    """The source cannot be imported as it is; nothing was written."""


class ExportRefused(ChatmemError):
    """The export cannot be made whole; nothing was written."""


@dataclass(frozen=True, slots=True)
class Record:
    kind: str
    scope: ScopeKey
    data: Mapping[str, Any] = field(default_factory=dict)


def header(version: str, scopes: Iterable[ScopeKey], at: datetime) -> dict[str, Any]:
    return {
        "kind": "header",
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "chatmem_version": version,
        "exported_at": at.isoformat(),
        "scopes": [s.value for s in scopes],
    }


def line(record: Record, key: str | None = None) -> str:
    """One record's line; `key`: the scope key written for it (default its own)."""
    scope = record.scope.value if key is None else key
    return json.dumps({"kind": record.kind, "scope": scope, **record.data}, ensure_ascii=False)


def _when(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def entry_data(entry: MemoryEntry) -> dict[str, Any]:
    """Every field of an entry as JSON values (times in ISO-8601, enums as their value)."""
    return {
        "id": entry.id,
        "content": entry.content,
        "category": entry.category,
        "score": entry.score,
        "created_at": _when(entry.created_at),
        "last_activated": _when(entry.last_activated),
        "scored_at": _when(entry.scored_at),
        "hits": entry.hits,
        "source_session": entry.source_session,
        "confidence": entry.confidence,
        "expires_at": _when(entry.expires_at),
        "pinned": entry.pinned,
        "archived": entry.archived,
        "sessions": list(entry.sessions),
        "memory_class": entry.memory_class,
        "granularity": entry.granularity,
        "importance": entry.importance,
        "speaker": entry.speaker,
        "claim_on": entry.claim_on,
        **({"speaker_id": entry.speaker_id} if entry.speaker_id else {}),
    }


def entry_from(data: Mapping[str, Any]) -> MemoryEntry:
    """The entry `entry_data` wrote; ValueError/TypeError/KeyError for anything else."""
    entry_id = _text(data, "id")
    if not is_valid_entry_id(entry_id):
        raise ValueError(f"entry id {entry_id!r} is not 1 to 32 letters, digits, - or _")

    def maybe(key: str, kind: Any) -> Any:
        value = data.get(key)
        return None if value is None else kind(value)

    created = parse_when(_text(data, "created_at"))
    return MemoryEntry(
        id=entry_id,
        content=_text(data, "content"),
        category=_text(data, "category"),
        score=float(data["score"]),
        created_at=created,
        last_activated=maybe("last_activated", parse_when) or created,
        scored_at=maybe("scored_at", parse_when) or created,
        hits=int(data.get("hits") or 0),
        source_session=maybe("source_session", str),
        confidence=maybe("confidence", float),
        expires_at=maybe("expires_at", parse_when),
        pinned=bool(data.get("pinned", False)),
        archived=maybe("archived", ArchiveReason),
        sessions=tuple(str(s) for s in data.get("sessions") or ()),
        memory_class=maybe("memory_class", MemoryClass),
        granularity=maybe("granularity", Granularity),
        importance=maybe("importance", Importance),
        speaker=maybe("speaker", str),
        claim_on=maybe("claim_on", str),
        speaker_id=maybe("speaker_id", str),
    )


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} is not a string")
    return value


_NEEDS: dict[str, tuple[str, ...]] = {
    "entry": ("entry",),
    "quarantined": ("text",),
    "forgotten": ("entry",),
    "note": ("date", "time", "text"),
    "archive": ("name", "text"),
    "summary": ("name", "text"),
    "session": ("id", "started_at", "status"),
    "message": ("session", "role", "content", "at"),
    "audit": ("at", "entry_id", "action", "source"),
    "snapshot": ("text",),
}


def checked(raw: Any, number: int) -> Record:
    """One line's record, or ImportRefused naming the line and what is wrong."""
    where = f"line {number}"
    if not isinstance(raw, dict):
        raise ImportRefused(f"{where}: not a JSON object (nothing was imported)")
    kind = raw.get("kind")
    if kind not in _NEEDS:
        raise ImportRefused(f"{where}: unknown kind {kind!r} (nothing was imported)")
    key = raw.get("scope")
    if not isinstance(key, str):
        raise ImportRefused(f"{where}: no scope key (nothing was imported)")
    try:
        scope = ScopeKey.parse(key)
    except ScopeError as exc:
        raise ImportRefused(f"{where}: {exc} (nothing was imported)") from None
    missing = [name for name in _NEEDS[kind] if name not in raw]
    if missing:
        raise ImportRefused(
            f"{where}: a {kind} record of scope {printable_key(scope)} lacks "
            f"{', '.join(missing)} (nothing was imported)"
        )
    data = {k: v for k, v in raw.items() if k not in ("kind", "scope")}
    try:
        _check_values(kind, data)
    except (ValueError, TypeError, KeyError) as exc:
        raise ImportRefused(f"{where}: bad {kind} record: {exc} (nothing was imported)") from None
    return Record(kind, scope, data)


def _check_values(kind: str, data: Mapping[str, Any]) -> None:
    """What the importer reads of a record parses (dates, times, texts)."""
    if kind in ("entry", "forgotten"):
        entry_from(data["entry"])
    elif kind in ("archive", "summary"):
        file_name(kind, data)
        _text(data, "text")
    elif kind == "note":
        date.fromisoformat(_text(data, "date"))
        _text(data, "text")
        if data["time"] and not _is_time(_text(data, "time")):
            raise ValueError(f"time {data['time']!r} is not HH:MM or HH:MM:SS")
    elif kind in ("session", "message", "audit"):
        parse_when(_text(data, "started_at" if kind == "session" else "at"))
        for name in _NEEDS[kind]:
            if name not in ("at", "started_at"):
                _text(data, name)
        if kind == "message" and not isinstance(data.get("meta") or {}, dict):
            raise TypeError("meta is not an object")
    else:
        _text(data, "text")


def file_name(kind: str, data: Mapping[str, Any]) -> str:
    """An archive or summary record's file name, checked: one name of its pattern with a
    real date (never a path); ValueError for anything else."""
    name = _text(data, "name")
    match = (ARCHIVE_NAME if kind == "archive" else SUMMARY_NAME).match(name)
    if match is None:
        raise ValueError(f"{kind} file name {name!r} is not one chatmem writes")
    period = match.group(1)
    date.fromisoformat(period if len(period) == 10 else period + "-01")
    return name


def _is_time(text: str) -> bool:
    parts = text.split(":")
    return (
        len(parts) in (2, 3)
        and all(len(p) == 2 and p.isdigit() for p in parts)
        and int(parts[0]) < 24
        and all(int(p) < 60 for p in parts[1:])
    )


def read_lines(lines: Iterable[str]) -> Iterator[Record]:
    """The records of an export, its header checked first (format and version)."""
    numbered = ((n, text) for n, text in enumerate(lines, start=1) if text.strip())
    first = next(numbered, None)
    if first is None:
        raise ImportRefused("the export is empty (nothing was imported)")
    head = _parsed(*first)
    if not isinstance(head, dict) or head.get("kind") != "header" or head.get("format") != FORMAT:
        raise ImportRefused(f"line {first[0]}: not a chatmem export header (nothing was imported)")
    version = head.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version > FORMAT_VERSION:
        raise ImportRefused(
            f"export format version {version!r} is newer than this chatmem reads "
            f"({FORMAT_VERSION}); upgrade chatmem (nothing was imported)"
        )
    spelled: dict[ScopeKey, str] = {}
    for number, text in numbered:
        raw = _parsed(number, text)
        record = checked(raw, number)
        seen = spelled.setdefault(record.scope, raw["scope"])
        if seen != raw["scope"]:
            raise ImportRefused(
                f"line {number}: scope keys {printable_key(seen)!r} and "
                f"{printable_key(raw['scope'])!r} are one key now ({printable_key(record.scope)}): "
                "importing both would mix them; merge them in the source first "
                "(`chatmem scopes --merge`) (nothing was imported)"
            )
        yield record


def _parsed(number: int, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise ImportRefused(f"line {number}: not JSON (nothing was imported)") from None
