"""`chatmem export`: every record of the chosen scopes, read through the core's parts.

Long-term entries (all their metadata) and quarantined blocks from the long-term file,
the forgotten entries `restore` can still bring back, daily notes from the scope's
`YYYY-MM-DD.md` files, its archive files and summaries, sessions and their messages from
the history, the audit rows, and the snapshot's text; one scope after another, a record
at a time. No vectors: an import makes its chunks and the next backfill their vectors.

Each scope is written under the key every path reaches it by today (`today_key`): an
older workspace may hold a key that `ScopeKey.parse` now refuses (a control or invisible
character), which no import could take. A scope no path can reach, or two that are one
key today, refuse the export in one line naming them (`chatmem scopes --merge` first).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from memory_core.base import safe_files
from memory_core.base.scope import ScopeKey, printable_key, today_key
from memory_core.base.workspace import Workspace
from memory_core.notes.daily import parse_notes
from memory_core.portable.files import file_records
from memory_core.portable.forgotten import forgotten_records
from memory_core.portable.records import DAILY_FILE, ExportRefused, Record, entry_data

if TYPE_CHECKING:
    from memory_core.longterm.long_term import LongTermMemory
    from memory_core.notes.daily_notes import DailyNotes
    from memory_core.recall.guard import IndexGuard
    from memory_core.snapshot.snapshots import Snapshots
    from memory_core.storage.audit import AuditLog
    from memory_core.storage.history import HistoryStore

ALL_ROWS = 2**62
"""A limit no scope's history or audit reaches: every row."""


class PortableCore(Protocol):
    """What export and import use of `MemoryCore` (it passes itself)."""

    workspace: Workspace

    @property
    def memories(self) -> LongTermMemory: ...
    @property
    def notes(self) -> DailyNotes: ...
    @property
    def snapshots(self) -> Snapshots: ...
    @property
    def audit(self) -> AuditLog: ...
    @property
    def history(self) -> HistoryStore: ...
    @property
    def guard(self) -> IndexGuard: ...
    @property
    def has_database(self) -> bool: ...
    async def known_scopes(self) -> list[ScopeKey]: ...
    async def long_term_text(self, scope: ScopeKey) -> str: ...


def note_days(workspace: Workspace, scope: ScopeKey) -> list[date]:
    """The days the scope has a daily-notes file for, oldest first (blocking)."""
    days: list[date] = []
    for item in safe_files.entries(workspace.root, workspace.memory_dir(scope)):
        match = DAILY_FILE.match(item.name)
        if match and item.is_file(follow_symlinks=False):
            try:
                days.append(date.fromisoformat(match.group(1)))
            except ValueError:
                continue
    return sorted(days)


def _notes(workspace: Workspace, scope: ScopeKey) -> list[Record]:
    records: list[Record] = []
    for day in note_days(workspace, scope):
        path = workspace.daily_path(scope, day)
        text = safe_files.read_text(workspace.root, path, safe_files.NOTE_BYTES, "replace")
        for note in parse_notes(text, day):
            data = {"date": day.isoformat(), "time": note.time, "text": note.text}
            records.append(Record("note", scope, data))
    return records


async def scope_records(core: PortableCore, scope: ScopeKey) -> AsyncIterator[Record]:
    """One scope's records: entries, quarantined blocks, forgotten entries, notes,
    archive files and summaries, history, audit, snapshot."""
    parsed = await core.memories.load(scope)
    for entry in parsed.entries:
        yield Record("entry", scope, {"entry": entry_data(entry)})
    for block in parsed.quarantined:
        yield Record("quarantined", scope, {"text": block.text, "reason": block.reason})
    del parsed
    for record in await forgotten_records(core.memories, scope):
        yield record
    for record in await asyncio.to_thread(_notes, core.workspace, scope):
        yield record
    for record in await asyncio.to_thread(file_records, core.workspace, scope):
        yield record
    async for record in _history(core, scope):
        yield record
    for row in reversed(await core.audit.recent(scope, limit=ALL_ROWS)):
        yield Record(
            "audit",
            scope,
            {
                "at": row.at.isoformat(),
                "entry_id": row.entry_id,
                "action": row.action,
                "old_score": row.old_score,
                "new_score": row.new_score,
                "source": row.source,
                "category": row.category,
                "content": row.content,
                "detail": row.detail,
            },
        )
    snapshot = await core.snapshots.text(scope)
    if snapshot:
        yield Record("snapshot", scope, {"text": snapshot})


async def _history(core: PortableCore, scope: ScopeKey) -> AsyncIterator[Record]:
    history = core.history
    listed = await history.sessions_by_state(scope, limit=ALL_ROWS)
    for item in reversed(listed):  # oldest first
        session = await history.get_session(item.session_id)
        started = session.started_at if session is not None else item.first_at
        status = session.status if session is not None else "closed"
        yield Record(
            "session",
            scope,
            {"id": item.session_id, "started_at": started.isoformat(), "status": status},
        )
        for message in await history.session_messages(item.session_id, include_compacted=True):
            if message.scope != scope.value:
                continue  # a session id another scope also used: each keeps its own rows
            yield Record(
                "message",
                scope,
                {
                    "session": message.session_id,
                    "role": message.role,
                    "speaker": message.speaker,
                    "content": message.content,
                    "at": message.created_at.isoformat(),
                    "archived": message.archived.value,
                    "compacted": message.compacted,
                    "meta": message.meta,
                    **({"speaker_id": message.speaker_id} if message.speaker_id else {}),
                },
            )


async def chosen_scopes(core: PortableCore, wanted: Sequence[ScopeKey]) -> list[ScopeKey]:
    """The scopes to export: those named (each must hold something), else every one."""
    if not core.has_database:
        raise ExportRefused(
            "the database is not open, and the history and audit log are in it: "
            "nothing was exported (`chatmem status` says why)"
        )
    known = await core.known_scopes()
    if not wanted:
        return known
    for scope in wanted:
        if scope not in known and not scope.is_main:
            raise ExportRefused(f"no scope {scope.value!r} to export (`chatmem scopes` lists them)")
    return list(dict.fromkeys(wanted))


def written_keys(scopes: Sequence[ScopeKey]) -> dict[ScopeKey, str]:
    """Pure: the key each scope is exported under (its key today); ExportRefused naming
    a scope no key reaches today, or two scopes that are one key today."""
    written: dict[ScopeKey, str] = {}
    owner: dict[str, ScopeKey] = {}
    for scope in scopes:
        today = today_key(scope)
        if today is None:
            raise ExportRefused(
                f"scope '{printable_key(scope)}' has a key no import can take (empty once "
                "its invisible characters are gone): merge it into another scope first "
                "(`chatmem scopes --merge`) or export the others with --scope; nothing "
                "was written"
            )
        other = owner.setdefault(today.value, scope)
        if other != scope:
            raise ExportRefused(
                f"scopes '{printable_key(other)}' and '{printable_key(scope)}' are one key "
                f"now ({printable_key(today)}): merge them first (`chatmem scopes --merge`) "
                "so the export does not mix them; nothing was written"
            )
        written[scope] = today.value
    return written


def markdown_files(records: Sequence[Record], out: Path) -> dict[Path, str]:
    """Pure: the Markdown tree of an export, laid out as a workspace (`Workspace` paths):
    each scope's long-term file rendered as the core renders it is not known here, so
    the caller adds it; this gives the daily notes, the snapshot, one transcript per
    session and the audit, by path."""
    workspace = Workspace.at(out)
    files: dict[Path, list[str]] = {}
    sessions: dict[tuple[ScopeKey, str], int] = {}
    for record in records:
        scope, data = record.scope, record.data
        folder = workspace.memory_dir(scope)
        if record.kind == "note":
            path = folder / f"{data['date']}.md"
            text = str(data["text"]).replace("\n", "\n  ")
            files.setdefault(path, []).append(f"- {data['time'] or '00:00:00'} {text}\n")
        elif record.kind == "snapshot":
            files[folder / "SNAPSHOT.md"] = [str(data["text"])]
        elif record.kind in ("archive", "summary"):
            where = folder if record.kind == "archive" else folder / "summary"
            files[where / str(data["name"])] = [str(data["text"])]
        elif record.kind == "session":
            number = sessions.setdefault((scope, str(data["id"])), len(sessions) + 1)
            path = folder / "history" / f"session-{number:05d}.md"
            files[path] = [f"# Session {data['id']}\n\nStarted {data['started_at']}\n\n"]
        elif record.kind == "message":
            number = sessions.setdefault((scope, str(data["session"])), len(sessions) + 1)
            path = folder / "history" / f"session-{number:05d}.md"
            who = data.get("speaker") or data["role"]
            files.setdefault(path, []).append(f"- {data['at']} **{who}**: {data['content']}\n")
        elif record.kind == "audit":
            line = (
                f"- {data['at']} {data['action']} [{data['entry_id']}] by {data['source']}"
                f"{': ' + str(data['content']) if data.get('content') else ''}\n"
            )
            files.setdefault(folder / "audit.md", []).append(line)
    return {path: "".join(parts) for path, parts in files.items()}
