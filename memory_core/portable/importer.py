"""`chatmem import`: records written into the workspace through the core's own parts.

Entries and quarantined blocks go through `LongTermMemory.rewrite` (one locked write per
scope, audited and indexed like any other), forgotten entries through the forgotten
file's keeper (`forgotten.py`), notes through `DailyNotes.append` (indexed as written),
archive files and summaries through `files.py` (indexed as written), conversations
through `MemoryCore.record_session` and the history (with each message's metadata and
compaction mark), audit rows through the audit log. Each record lands in the scope it
names and nowhere else. A source gives its records a scope at a time (`ImportSource`), so an
export file is never held whole.

Idempotent: an entry whose text the scope holds already, a note the day's file holds
already (as many times), a file it holds with that text, a message its session holds,
an audit row the log holds, is counted as present and not written again; a second
import adds nothing.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any, Protocol

from memory_core.base import safe_files
from memory_core.base.clock import format_when, parse_when
from memory_core.base.entries import MemoryEntry
from memory_core.base.merge_values import Change, ChangeKind
from memory_core.base.records import RecordedMessage
from memory_core.base.requests import searchable
from memory_core.base.scope import ScopeKey
from memory_core.longterm.memory_md import QuarantinedBlock
from memory_core.notes.daily import parse_notes
from memory_core.portable.export import ALL_ROWS, PortableCore
from memory_core.portable.files import place
from memory_core.portable.foreign import place as place_entries
from memory_core.portable.forgotten import import_forgotten
from memory_core.portable.records import ImportRefused, Record, entry_from
from memory_core.storage.sessions import ArchiveState, NewMessage

SOURCE = "import"
"""The audit source of what an import writes."""


class ImportingCore(PortableCore, Protocol):
    async def record_session(
        self,
        scope: ScopeKey,
        session_id: str,
        started_at: datetime,
        messages: Sequence[RecordedMessage],
        *,
        status: str = "closed",
    ) -> None: ...


@dataclass
class ImportReport:
    """What an import did, by kind: added, already present; and what it set aside."""

    added: Counter[str] = field(default_factory=Counter)
    present: Counter[str] = field(default_factory=Counter)
    quarantined: int = 0
    """Blocks no entry could be read from, kept verbatim in the scope's quarantine."""
    refused: int = 0
    """Records that would have mixed scopes (a session id another scope holds)."""
    expired: int = 0
    """Forgotten entries past `long_term.forgotten_keep_days` by now: not kept."""
    scopes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "scopes": self.scopes,
            "added": dict(sorted((+self.added).items())),
            "present": dict(sorted((+self.present).items())),
            "quarantined": self.quarantined,
            "refused": self.refused,
            "expired": self.expired,
        }


class ImportSource(Protocol):
    """What an import reads, checked whole already: its scopes in order, the kinds of
    record it holds, and one scope's records when the import comes to that scope."""

    scopes: list[ScopeKey]
    kinds: frozenset[str]

    async def records(self, scope: ScopeKey) -> list[Record]: ...


class InMemorySource:
    """A source held in memory (a folder's or a mem0 file's records: small)."""

    def __init__(self, records: Iterable[Record]) -> None:
        self._by_scope: dict[ScopeKey, list[Record]] = defaultdict(list)
        for record in records:
            self._by_scope[record.scope].append(record)
        self.scopes = list(self._by_scope)
        self.kinds = frozenset(r.kind for rs in self._by_scope.values() for r in rs)

    async def records(self, scope: ScopeKey) -> list[Record]:
        return self._by_scope.get(scope, [])


async def import_source(core: ImportingCore, source: ImportSource) -> ImportReport:
    """Write a checked source into its scopes, one scope's records at a time."""
    kept = source.kinds & {"session", "message", "audit"}
    if kept and not core.has_database:
        raise ImportRefused(
            f"the database is not open and the source holds {', '.join(sorted(kept))} "
            "records, which go there: nothing was imported (`chatmem status` says why)"
        )
    report = ImportReport(scopes=[s.value for s in source.scopes])
    for scope in source.scopes:
        kinds: dict[str, list[Record]] = defaultdict(list)
        for record in await source.records(scope):
            kinds[record.kind].append(record)
        changed = await _entries(core, scope, kinds["entry"], kinds["quarantined"], report)
        await _forgotten(core, scope, kinds["forgotten"], report)
        changed = await _notes(core, scope, kinds["note"], report) or changed
        changed = await _files(core, scope, kinds["archive"] + kinds["summary"], report) or changed
        await _history(core, scope, kinds["session"], kinds["message"], report)
        await _audit(core, scope, kinds["audit"], report)
        await _snapshot(core, scope, kinds["snapshot"], changed)
        del kinds  # the next scope's records replace these
    await core.memories.flush()
    report.added, report.present = +report.added, +report.present  # no zero counts
    return report


async def _forgotten(
    core: PortableCore, scope: ScopeKey, records: Sequence[Record], report: ImportReport
) -> None:
    memories = core.memories
    placement = await import_forgotten(memories, scope, records, memories.now())
    report.added["forgotten"] += len(placement.added)
    report.present["forgotten"] += placement.present
    report.expired += placement.expired


async def _files(
    core: PortableCore, scope: ScopeKey, records: Sequence[Record], report: ImportReport
) -> bool:
    """Archive files and summaries, each indexed once written."""
    added = False
    for record in records:
        name, text = str(record.data["name"]), str(record.data["text"])
        placed = await asyncio.to_thread(place, core.workspace, scope, record.kind, name, text)
        if placed.written is None:
            report.present[record.kind] += 1
            continue
        await core.guard.file_written(scope, placed.written)
        report.added[record.kind] += 1
        added = True
    return added


async def _entries(
    core: PortableCore,
    scope: ScopeKey,
    entries: Sequence[Record],
    blocks: Sequence[Record],
    report: ImportReport,
) -> bool:
    incoming = [entry_from(r.data["entry"]) for r in entries]
    quarantine = [
        QuarantinedBlock(str(r.data["text"]), 0, str(r.data.get("reason") or "imported"))
        for r in blocks
    ]
    if not incoming and not quarantine:
        return False
    held = {b.text for b in (await core.memories.load(scope)).quarantined}
    counted: list[int] = []

    def plan(current: list[MemoryEntry], when: datetime) -> tuple[list[MemoryEntry], list[Change]]:
        placement = place_entries(current, incoming)
        added = placement.added
        counted[:] = [len(added), placement.present]
        changes = [
            Change(ChangeKind.ADDED, e.id, None, e.score, e.content, e.category, "imported")
            for e in added
        ]
        return [*current, *added], changes

    await core.memories.rewrite(scope, plan, source=SOURCE, quarantine=quarantine)
    added, present = counted or [0, len(incoming)]
    report.added["entry"] += added
    report.present["entry"] += present
    new_blocks = {b.text for b in quarantine} - held
    report.quarantined += len(new_blocks)
    report.present["quarantined"] += len(quarantine) - len(new_blocks)
    return bool(added or new_blocks)


async def _snapshot(
    core: PortableCore, scope: ScopeKey, snapshots: Sequence[Record], changed: bool
) -> None:
    """A scope imported with its snapshot gets one, built from what it holds now with
    the sections a person wrote into the exported one (a scope's own snapshot keeps its
    own); rebuilt only when the import changed the scope or it has none."""
    if not snapshots:
        return
    if not await core.snapshots.text(scope):
        await core.snapshots.rebuild(scope, kept_from=str(snapshots[-1].data["text"]))
    elif changed:
        await core.snapshots.rebuild(scope)


def _note_key(note_time: str, text: str) -> tuple[str, str]:
    full = note_time if len(note_time) == 8 else (note_time + ":00" if note_time else "00:00:00")
    return full, text.strip()


def _held_notes(core: PortableCore, scope: ScopeKey, day: date) -> Counter[tuple[str, str]]:
    path = core.workspace.daily_path(scope, day)
    try:
        text = safe_files.read_text(core.workspace.root, path, safe_files.NOTE_BYTES, "replace")
    except (FileNotFoundError, NotADirectoryError):
        return Counter()
    return Counter(_note_key(n.time, n.text) for n in parse_notes(text, day))


async def _notes(
    core: PortableCore, scope: ScopeKey, notes: Sequence[Record], report: ImportReport
) -> bool:
    by_day: dict[date, list[tuple[str, str]]] = defaultdict(list)
    for record in notes:
        day = date.fromisoformat(str(record.data["date"]))
        by_day[day].append(_note_key(str(record.data["time"]), str(record.data["text"])))
    zone = core.notes.zone
    added = 0
    for day, keys in sorted(by_day.items()):
        held = await asyncio.to_thread(_held_notes, core, scope, day)
        for key in keys:
            if held[key] > 0:
                held[key] -= 1
                report.present["note"] += 1
                continue
            at = datetime.combine(day, time.fromisoformat(key[0]), tzinfo=zone)
            await core.notes.append(scope, key[1], now=at)
            added += 1
    report.added["note"] += added
    return added > 0


def _message_key(role: str, speaker: str, content: str, at: datetime) -> tuple[str, ...]:
    return (role, speaker, content, format_when(at))


async def _history(
    core: ImportingCore,
    scope: ScopeKey,
    sessions: Sequence[Record],
    messages: Sequence[Record],
    report: ImportReport,
) -> None:
    if not sessions and not messages:
        return
    history = core.history
    declared = {str(r.data["id"]): r.data for r in sessions}
    grouped: dict[str, list[RecordedMessage]] = defaultdict(list)
    for record in messages:
        data = record.data
        grouped[str(data["session"])].append(
            RecordedMessage(
                role=str(data["role"]),
                speaker=str(data.get("speaker") or ""),
                content=str(data["content"]),
                at=parse_when(str(data["at"])),
                archived=ArchiveState(str(data.get("archived") or "false")).value,
                speaker_id=str(data["speaker_id"]) if data.get("speaker_id") else None,
                meta=dict(data.get("meta") or {}) or None,
                compacted=bool(data.get("compacted")),
            )
        )
    for session_id in dict.fromkeys([*declared, *grouped]):
        said = grouped.get(session_id, [])
        existing = await history.get_session(session_id)
        if existing is not None and existing.scope != scope.value:
            report.refused += len(said) + (session_id in declared)
            continue  # another scope's session: never written into
        if existing is None:
            info = declared.get(session_id, {})
            started = parse_when(str(info["started_at"])) if info else said[0].at
            await core.record_session(
                scope, session_id, started, said, status=str(info.get("status") or "closed")
            )
            report.added["session"] += 1
            report.added["message"] += len(said)
            continue
        report.present["session"] += 1
        stored = await history.session_messages(session_id, include_compacted=True)
        held = Counter(_message_key(m.role, m.speaker, m.content, m.created_at) for m in stored)
        talk = [m for m in said if m.role in ("user", "assistant")]
        indexed = dict(
            zip(
                map(id, talk),
                searchable((m.role == "assistant", m.content) for m in talk),
                strict=True,
            )
        )
        for message in said:
            key = _message_key(message.role, message.speaker, message.content, message.at)
            if held[key] > 0:
                held[key] -= 1
                report.present["message"] += 1
                continue
            written = await history.add_message(
                NewMessage.recorded(
                    scope, session_id, message, indexed=indexed.get(id(message), False)
                )
            )
            if message.compacted:
                await history.mark_compacted([written.id])
            report.added["message"] += 1


def _audit_key(data: Any) -> tuple[Any, ...]:
    return (
        format_when(parse_when(str(data["at"]))),
        data["entry_id"],
        data["action"],
        data["source"],
        data.get("content") or None,
        data.get("detail") or "",
    )


async def _audit(
    core: PortableCore, scope: ScopeKey, rows: Sequence[Record], report: ImportReport
) -> None:
    if not rows:
        return
    audit = core.audit
    existing = await audit.recent(scope, limit=ALL_ROWS)
    held = Counter(
        _audit_key(
            {
                "at": r.at.isoformat(),
                "entry_id": r.entry_id,
                "action": r.action,
                "source": r.source,
                "content": r.content,
                "detail": r.detail,
            }
        )
        for r in existing
    )
    for record in rows:
        data = record.data
        key = _audit_key(data)
        if held[key] > 0:
            held[key] -= 1
            report.present["audit"] += 1
            continue
        at = parse_when(str(data["at"]))
        action = str(data["action"])
        if action == "purge":
            await audit.purge(scope, [str(data["entry_id"])], str(data["source"]), at)
        elif action in ChangeKind.__members__.values():
            change = Change(
                ChangeKind(action),
                str(data["entry_id"]),
                data.get("old_score"),
                data.get("new_score"),
                data.get("content"),  # type: ignore[arg-type]  # NULL once purged
                data.get("category"),  # type: ignore[arg-type]  # NULL in a purge row
                str(data.get("detail") or ""),
            )
            await audit.record(scope, [change], str(data["source"]), at)
        else:
            report.refused += 1
            continue
        report.added["audit"] += 1
