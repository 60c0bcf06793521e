"""`chatmem erase`: everything about one person gone, for good (the right to erasure).

Two kinds of target:

- a whole scope (`--scope K`, or each direct-chat scope of `--person CHANNEL:ID`,
  `people.direct_scopes`): its long-term file and backup (archived entries and
  quarantined blocks with them), forgotten entries, daily notes, event logs, archives,
  summaries, snapshot and consolidation state, its parse cache, key copies and what a
  merge set aside of it; its rows of every table that carries a scope (history,
  sessions, extractions, activations, events), its chunks and vectors in the index,
  its capture-journal rows and its records in dead processes' spools. Its audit rows
  stay with their text emptied;
- the person's lines in their channel's group scopes (`--person`): found by the
  sender id their messages kept, and by name only where a line kept no id
  (`people.Traces`, `people.group_speakers`): their messages and the replies to them, the
  entries they said or that name them (live, archived, forgotten, quarantined), the
  notes, archive lines, summary lines and event-log records that name them or hold
  their words. The snapshot is built again.

Then, as `purge` does (`MemoryCore.forget_erased_text`): the index is rebuilt (FTS5
keeps a deleted chunk's words in its segments), the vectors no chunk vouches for go,
and the databases are vacuumed (SQLite keeps deleted text in free pages and its WAL;
PostgreSQL keeps old row versions until `VACUUM FULL`). One content-free audit row per
kind erased records what went, when and by whom. Run with the bots stopped: a running
bot holding the conversation in memory could write it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Protocol

from memory_core.base.clock import format_when
from memory_core.base.entries import MemoryEntry
from memory_core.base.errors import ScopeError
from memory_core.base.scope import ScopeKey, printable_key
from memory_core.base.sql import Connection
from memory_core.base.workspace import Workspace
from memory_core.erasure import files, rows
from memory_core.erasure.people import (
    Person,
    Traces,
    direct_scopes,
    erased_messages,
    group_scopes,
    group_speakers,
)

if TYPE_CHECKING:
    from memory_core.base.sql import Db
    from memory_core.longterm.long_term import LongTermMemory
    from memory_core.longterm.memory_md_parser import ParsedMemory
    from memory_core.snapshot.snapshots import Snapshots

__all__ = ["ErasureReport", "Person", "ScopeErasure", "erase"]


class ErasingCore(Protocol):
    """What an erasure uses of `MemoryCore` (`MemoryCore.erase` passes itself)."""

    workspace: Workspace

    @property
    def memories(self) -> LongTermMemory: ...
    @property
    def database(self) -> Db: ...
    @property
    def journal_db(self) -> Db | None: ...
    @property
    def snapshots(self) -> Snapshots: ...
    def now(self) -> datetime: ...
    async def known_scopes(self) -> list[ScopeKey]: ...
    async def forget_erased_text(self, tables: Sequence[str]) -> bool: ...


VACUUMED = (
    "audit",
    "messages",
    "sessions",
    "events",
    "archive_runs",
    "extractions",
    "activations",
    "chunks",
    "terms",
    "files",
    "chunk_vectors",
    "embeddings",
    "captures",
    "deliveries",
)
"""The tables an erasure writes (PostgreSQL's `VACUUM FULL` after it)."""


@dataclass
class ScopeErasure:
    scope: ScopeKey
    whole: bool
    """The whole scope, or only the person's lines (a group)."""
    counts: dict[str, int] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not any(self.counts.values()) and not self.files

    def as_json(self) -> dict[str, object]:
        return {
            "scope": self.scope.value,
            "what": "scope" if self.whole else "lines",
            "counts": self.counts,
            "files": self.files,
        }


@dataclass
class ErasureReport:
    dry_run: bool
    names: list[str] = field(default_factory=list)
    shared_names: list[str] = field(default_factory=list)
    """Names another member's id also spoke under in a group: no line went by them."""
    scopes: list[ScopeErasure] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    wal_kept: bool = False
    """Another process's open read kept SQLite's WAL from being emptied."""

    def as_json(self) -> dict[str, object]:
        return {
            "dry_run": self.dry_run,
            "names": self.names,
            "shared_names": self.shared_names,
            "by_id": sum(s.counts.get("messages_by_id", 0) for s in self.scopes),
            "by_name": sum(s.counts.get("messages_by_name", 0) for s in self.scopes),
            "scopes": [s.as_json() for s in self.scopes],
            "refused": self.refused,
        }


async def erase(
    core: ErasingCore,
    *,
    scope: ScopeKey | None = None,
    person: Person | None = None,
    names: Sequence[str] = (),
    by: str,
    dry_run: bool,
) -> ErasureReport:
    """Erase a scope, or a person's scopes and their lines in groups (module docstring);
    with `dry_run`, only say what would go."""
    db = core.database  # the history and the audit log: refused without the database
    await core.memories.flush()  # staged captures into the files, which are erased next
    known = await core.known_scopes()
    report = ErasureReport(dry_run)
    wholes: list[ScopeKey] = []
    groups: list[ScopeKey] = []
    if scope is not None:
        if scope.is_main:
            raise ScopeError(
                "the main scope is every direct chat's under dm_scope = main: not erased"
            )
        if scope not in known:
            raise ScopeError(
                f"no scope {printable_key(scope)} to erase (`chatmem scopes` lists the scopes)"
            )
        wholes = [scope]
    if person is not None:
        wholes += [k for k in direct_scopes(person, known) if k not in wholes]
        spoken = await db.read(partial(_speakers, scopes=[k.value for k in wholes]))
        report.names = sorted({n.strip() for n in (*names, *spoken) if n.strip()})
        prefix = f"group:{person.channel}:"
        by_id = set(
            await db.read(partial(rows.scopes_spoken_in, speaker_id=person.id, prefix=prefix))
        )
        groups = [
            k for k in group_scopes(person.channel, known) if report.names or k.value in by_id
        ]
    elif names:
        raise ScopeError("--name needs --person (whose lines in the groups to erase)")
    if not wholes and not groups:
        raise ScopeError(f"nothing is kept of {person} (`chatmem scopes` lists the scopes)")
    at = format_when(core.now())
    for key in wholes:
        report.scopes.append(await _whole(core, db, key, by, at, dry_run, report.refused))
    traces = Traces(frozenset(report.names), id=None if person is None else person.id)
    shared: set[str] = set()
    for key in groups:
        found = await _lines(core, db, key, traces, by, at, dry_run, report.refused, shared)
        if not found.empty:
            report.scopes.append(found)
    report.shared_names = sorted(shared)
    if person is not None and not dry_run:
        await db.write(partial(_deliveries, person=person))
    if not dry_run:
        report.wal_kept = not await core.forget_erased_text(VACUUMED)
    return report


async def _whole(
    core: ErasingCore,
    db: Db,
    scope: ScopeKey,
    by: str,
    at: str,
    dry_run: bool,
    refused: list[str],
) -> ScopeErasure:
    memories = core.memories
    workspace = core.workspace
    parsed = await memories.load(scope)
    kept = await asyncio.to_thread(memories.kept.file.read, scope)
    listed = await asyncio.to_thread(files.scope_files, workspace, scope)
    table_counts = await db.read(partial(rows.scope_counts, scope=scope.value))
    journal = core.journal_db
    erasure = ScopeErasure(
        scope,
        True,
        {
            "memories": len(parsed.entries),
            "quarantined": len(parsed.quarantined) + len(kept.quarantined),
            "forgotten": len(kept.entries),
            "messages": table_counts["messages"],
            "sessions": table_counts["sessions"],
            "audit_rows": table_counts["audit"],
            "index_chunks": table_counts["chunks"],
            "files": len(listed),
        },
        [workspace.relative(p) for p in listed],
    )
    if dry_run:
        return erasure
    if journal is not None:
        erasure.counts["journal_rows"] = await journal.write(
            partial(rows.drop_captures, scope=scope.value)
        )
    kinds = {k: v for k, v in erasure.counts.items() if k != "audit_rows"}
    await db.write(partial(_erase_scope_rows, scope=scope.value, at=at, by=by, kinds=kinds))
    async with _holding(core, scope, ("archive", "memory", "daily", "forgotten")):
        removed = await asyncio.to_thread(files.remove_scope_files, workspace, scope)
    erasure.files = removed.files
    refused += removed.refused
    erasure.counts["spooled"] = await asyncio.to_thread(
        partial(files.scrub_spools, workspace.state_dir / "spool", scope, None, root=workspace.root)
    )
    return erasure


def _erase_scope_rows(
    conn: Connection, scope: str, at: str, by: str, kinds: dict[str, int]
) -> None:
    rows.erase_scope(conn, scope)
    rows.record(conn, scope, at, by, kinds)


async def _lines(
    core: ErasingCore,
    db: Db,
    scope: ScopeKey,
    traces: Traces,
    by: str,
    at: str,
    dry_run: bool,
    refused: list[str],
    shared: set[str],
) -> ScopeErasure:
    memories = core.memories
    workspace = core.workspace
    messages = await db.read(partial(rows.group_messages, scope=scope.value))
    parsed = await memories.load(scope)
    kept = await asyncio.to_thread(memories.kept.file.read, scope)
    every = (*parsed.entries, *kept.entries)
    speakers = group_speakers(messages, traces, [(e.speaker, e.speaker_id) for e in every])
    # Old rows (no id) by every name of theirs; everything else never by a name another
    # member's id spoke under here.
    ids = erased_messages(messages, traces.with_names(speakers.own))
    clash = speakers.shared & (traces.names | speakers.own)
    shared |= clash
    traces = traces.with_names(speakers.own).without_names(speakers.shared)
    chosen = set(ids)
    traces = traces.with_texts(m[5] for m in messages if m[0] in chosen)

    def theirs(entry: MemoryEntry) -> bool:
        return (
            traces.spoke(entry.speaker, entry.speaker_id)
            or traces.found_in(entry.content)
            or (entry.speaker_id is None and traces.said(entry.content))
        )

    entries = [e for e in every if theirs(e)]
    # Entries an extraction kept under a name alone, a name two members share: whose
    # they are cannot be told, so they stay, and the listing says how many.
    unsure = sum(
        1
        for e in every
        if e.speaker_id is None and (e.speaker or "").strip() in clash and not theirs(e)
    )
    traces = traces.with_texts(e.content for e in entries)
    # Others' messages that repeat their words or name them (a reply quoting them).
    ids += [m[0] for m in messages if m[0] not in chosen and traces.found_in(m[5])]
    quarantined = [b for b in parsed.quarantined if traces.found_in(b.text)]
    async with _holding(core, scope, () if dry_run else ("archive", "daily")):
        scrubbed = await asyncio.to_thread(
            partial(files.scrub_group_files, workspace, scope, traces, write=not dry_run)
        )
    refused += scrubbed.refused
    erasure = ScopeErasure(
        scope,
        False,
        {
            "memories": sum(1 for e in parsed.entries if theirs(e)),
            "forgotten": sum(1 for e in kept.entries if theirs(e)),
            "quarantined": len(quarantined),
            "messages": len(ids),
            "messages_by_id": speakers.by_id,
            "messages_by_name": speakers.by_name,
            "kept_unsure_shared_name": unsure,
            "file_parts": scrubbed.parts,
        },
        scrubbed.files,
    )
    if dry_run or erasure.empty:
        return erasure
    gone = {e.id for e in entries}
    if erasure.counts["memories"] or quarantined:

        def without(parsed_now: ParsedMemory) -> tuple[list[MemoryEntry], None]:
            # The store writes back the blocks the parse quarantined: theirs go too.
            held = parsed_now.quarantined
            held[:] = [b for b in held if not traces.found_in(b.text)]
            return [e for e in parsed_now.entries if not theirs(e)], None

        await memories.store.update(scope, without, core.now())
        # Written once more unchanged: the backup is then this version, not the old one.
        await memories.store.update(scope, lambda p: (p.entries, None), core.now())
        erasure.files.append(workspace.relative(memories.path(scope)))
    if erasure.counts["forgotten"]:
        await memories.kept.take(scope, {e.id for e in kept.entries if theirs(e)})
    journal = core.journal_db
    if journal is not None:
        erasure.counts["journal_rows"] = await journal.write(
            partial(_drop_their_captures, scope=scope.value, traces=traces)
        )
    kinds = {
        k: v for k, v in erasure.counts.items() if not k.startswith(("messages_by_", "kept_unsure"))
    }

    def step(conn: Connection) -> None:
        rows.erase_lines(conn, scope.value, ids, sorted(gone))
        rows.record(conn, scope.value, at, by, kinds)

    await db.write(step)
    erasure.counts["spooled"] = await asyncio.to_thread(
        partial(
            files.scrub_spools, workspace.state_dir / "spool", scope, traces, root=workspace.root
        )
    )
    if await core.snapshots.text(scope):
        await core.snapshots.rebuild(scope)
    return erasure


@asynccontextmanager
async def _holding(core: ErasingCore, scope: ScopeKey, what: Sequence[str]) -> AsyncIterator[None]:
    """The scope's locks of `what` (its writers' own: archive, long-term file, notes,
    forgotten entries), taken in that order, so no writer of this or another process
    writes a file of the scope while it is rewritten or removed."""
    async with AsyncExitStack() as stack:
        locks = core.memories.store.locks
        for name in what:
            await stack.enter_async_context(locks.hold(core.workspace.lock_name(scope, name)))
        yield


def _drop_their_captures(conn: Connection, scope: str, traces: Traces) -> int:
    held = conn.execute("SELECT seq, payload FROM captures WHERE scope = ?", (scope,)).fetchall()
    theirs = [(int(r[0]),) for r in held if traces.found_in(str(r[1]))]
    conn.executemany("DELETE FROM captures WHERE seq = ?", theirs)
    return len(theirs)


def _speakers(conn: Connection, scopes: list[str]) -> list[str]:
    """The names the person spoke under in their own chats."""
    found: list[str] = []
    for key in scopes:
        found += [
            str(r[0])
            for r in conn.execute(
                "SELECT DISTINCT speaker FROM messages WHERE scope = ? AND role = 'user'", (key,)
            ).fetchall()
        ]
    return found


def _deliveries(conn: Connection, person: Person) -> None:
    """The person's direct chats' delivery claims (ids only, kept a few days anyway)."""
    conn.execute(
        "DELETE FROM deliveries WHERE channel LIKE ? AND chat_id = ?",
        (f"{person.channel}:%", person.id),
    )
