"""`chatmem scopes --merge A B`: one person's look-alike scope folded into the other.

Scope keys made before ids were normalised (`base.scope.normalise_id`) may hold one
person under several spellings (`peer:Ann`, `peer:Ａｎｎ`, `peer:An\\u200bn`); `validate`
lists them (`lookalike_groups`) and this moves everything scope A owns into scope B,
losing nothing:

- long-term entries: added to B's file (an id B already uses for another text gets a
  new one; an entry B holds already, same id and text, is not added twice), each with
  an `add` audit row whose detail names A; forgotten entries: into B's forgotten file;
- daily notes, event logs, summaries, archives: `scope_merge.files`;
- the database's rows of A (sessions, messages, archive runs, audit, events,
  extractions, activations) re-addressed to B in one transaction, with the index's
  message chunks and their vectors;
- then the index of both scopes synced with the files, B's snapshot rebuilt when it has
  one, an event `scope_merged` in B, and what is left of A's directory set aside under
  `.chatmem/merged/` (never deleted).

Run with the workspace's bots stopped, as `migrate` is. Run again after an interruption,
it finishes the move (entries already in B are not added twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from memory_core.base import safe_files
from memory_core.base.entries import MemoryEntry, new_entry_id
from memory_core.base.errors import ScopeError
from memory_core.base.merge_values import Change, ChangeKind
from memory_core.base.scope import (
    ScopeKey,
    is_hashed_slug,
    printable_key,
    scope_slug,
    today_key,
)
from memory_core.base.sql import Connection
from memory_core.base.workspace import Workspace
from memory_core.longterm import parse_cache
from memory_core.recall.index.postings import postings
from memory_core.recall.index.writes import Tally, ensure_scope
from memory_core.scope_merge.files import FilesMerged, merge_directory, set_aside

if TYPE_CHECKING:
    from memory_core.base.sql import Db
    from memory_core.longterm.long_term import LongTermMemory
    from memory_core.recall.guard import IndexGuard
    from memory_core.snapshot.snapshots import Snapshots
    from memory_core.storage.audit import AuditLog


class MergingCore(Protocol):
    """What a merge uses of `MemoryCore` (`MemoryCore.merge_scopes` passes itself)."""

    workspace: Workspace

    @property
    def memories(self) -> LongTermMemory: ...
    @property
    def database(self) -> Db: ...
    @property
    def guard(self) -> IndexGuard: ...
    @property
    def snapshots(self) -> Snapshots: ...
    @property
    def audit(self) -> AuditLog: ...
    def now(self) -> datetime: ...
    async def known_scopes(self) -> list[ScopeKey]: ...


MERGED_DIR = "merged"
"""Under `.chatmem/`: what is left of each merged scope's directory."""

RE_ADDRESSED = ("sessions", "messages", "archive_runs", "audit", "events")
"""Tables whose rows of A simply become B's (their keys do not hold the scope)."""

KEYED_BY_SCOPE = {
    "extractions": ("session_id",),
    "activations": ("entry_id", "session_id"),
}
"""Tables whose key holds the scope: a row B has already is kept, A's copy dropped."""


@dataclass
class MergeReport:
    source: ScopeKey
    target: ScopeKey
    entries: int = 0
    renamed: dict[str, str] = field(default_factory=dict)
    """A's entry id → its new id in B (B used the id for another text)."""
    forgotten: int = 0
    unreadable: int = 0
    """Blocks of A's long-term file no entry could be read from: kept, verbatim, in the
    copy of the file set aside (`set_aside`), for a person to mend and capture again."""
    rows: dict[str, int] = field(default_factory=dict)
    message_chunks: int = 0
    files: FilesMerged = field(default_factory=FilesMerged)
    set_aside: str | None = None
    """Where what is left of A's directory went (workspace-relative)."""

    def as_json(self) -> dict[str, object]:
        return {
            "from": self.source.value,
            "into": self.target.value,
            "entries": self.entries,
            "renamed": self.renamed,
            "forgotten": self.forgotten,
            "unreadable_blocks": self.unreadable,
            "rows": self.rows,
            "message_chunks": self.message_chunks,
            "files_moved": self.files.moved + self.files.renamed,
            "files_appended": self.files.appended,
            "set_aside": self.set_aside,
        }


def placed(
    incoming: Sequence[MemoryEntry], held: Sequence[MemoryEntry], taken: Collection[str] = ()
) -> tuple[list[MemoryEntry], dict[str, str]]:
    """Pure: the entries of `incoming` to add beside `held`, each under an id no entry of
    `held` or `taken` has (a new one where A used an id B uses for another text), and
    those new ids by old. An entry `held` has already (same id, same text: a merge run
    again) is not added twice."""
    by_id = {entry.id: entry for entry in held}
    used: set[str] = set(by_id) | set(taken)
    added: list[MemoryEntry] = []
    renamed: dict[str, str] = {}
    for entry in incoming:
        same = by_id.get(entry.id)
        if same is not None and same.content == entry.content:
            continue
        moved = entry
        if entry.id in used:
            moved = entry.with_(id=new_entry_id(used))
            renamed[entry.id] = moved.id
        used.add(moved.id)
        added.append(moved)
    return added, renamed


def merged_entries(
    source: Sequence[MemoryEntry],
    target: Sequence[MemoryEntry],
    scope: ScopeKey,
    taken: Collection[str] = (),
) -> tuple[list[MemoryEntry], list[Change], dict[str, str]]:
    """Pure: B's entries with A's added (`placed`; `taken`: the ids of B's forgotten
    entries, which a restore brings back), the changes to audit, and the new ids."""
    added, renamed = placed(source, target, taken)
    old_ids = {new: old for old, new in renamed.items()}
    changes = [
        Change(
            ChangeKind.ADDED,
            entry.id,
            None,
            entry.score,
            entry.content,
            entry.category,
            detail=f"merged from scope {printable_key(scope)}"
            + (f" (was [{old_ids[entry.id]}])" if entry.id in old_ids else ""),
        )
        for entry in added
    ]
    return [*target, *added], changes, renamed


async def check_merge(core: MergingCore, source: ScopeKey, target: ScopeKey) -> bool:
    """One clear line for a merge that cannot be made; whether `target` is to be made
    (it need not exist when it is `source`'s key as made today, `today_key`: a workspace
    with only old spellings of a person is folded into the key every path uses)."""
    if source == target:
        raise ScopeError(f"cannot merge scope {printable_key(source)} into itself")
    if source.is_main:
        raise ScopeError("the main scope cannot be merged away; merge the other scope into main")
    known = await core.known_scopes()
    creates = target not in known and target == today_key(source)
    for key, role in ((source, "to merge"), (target, "to merge into")):
        if key not in known and not (creates and key == target):
            raise ScopeError(
                f"no scope {printable_key(key)} {role} (`chatmem scopes` lists the scopes)"
            )
    return creates


async def merge_scopes(core: MergingCore, source: ScopeKey, target: ScopeKey) -> MergeReport:
    """Everything scope `source` owns into scope `target` (module docstring)."""
    if await check_merge(core, source, target):
        await asyncio.to_thread(core.workspace.ensure_scope, target)
    db = core.database  # the audit log and the history: refused without the database
    report = MergeReport(source, target)
    memories = core.memories
    await memories.flush()  # staged captures into the files first
    parsed = await memories.load(source)
    source_entries = parsed.entries
    report.unreadable = len(parsed.quarantined)
    kept = memories.kept
    kept_before = (await asyncio.to_thread(kept.file.read, target)).entries
    renamed: dict[str, str] = {}

    def plan(entries: list[MemoryEntry], when: datetime) -> tuple[list[MemoryEntry], list[Change]]:
        merged, changes, given = merged_entries(
            source_entries, entries, source, {e.id for e in kept_before}
        )
        renamed.update(given)
        return merged, changes

    changes = await memories.rewrite(target, plan, source="merge")
    report.entries = len(changes)
    forgotten = (await asyncio.to_thread(kept.file.read, source)).entries
    if forgotten:
        live = {e.id for e in await memories.entries(target)}
        taken = await kept.take(source, {e.id for e in forgotten})
        moved, given = placed(taken, kept_before, live | set(renamed.values()))
        renamed.update(given)
        await kept.keep(target, moved)
        report.forgotten = len(moved)
    report.renamed = renamed
    report.rows, report.message_chunks = await db.write(
        lambda conn: move_rows(conn, source.value, target.value, renamed)
    )
    workspace = core.workspace
    source_dir, target_dir = workspace.memory_dir(source), workspace.memory_dir(target)
    if await asyncio.to_thread(source_dir.is_dir):
        report.files = await asyncio.to_thread(
            partial(merge_directory, source_dir, target_dir, root=workspace.root)
        )
    aside = await asyncio.to_thread(
        partial(
            set_aside,
            source_dir,
            workspace.state_dir / MERGED_DIR,
            scope_slug(source),
            root=workspace.root,
        )
    )
    report.set_aside = workspace.relative(aside) if aside is not None else None
    await asyncio.to_thread(_forget_key_files, core, source, aside)
    index = core.guard.index
    if index is not None:
        await index.sync_scope(source, force=True)
        await index.sync_scope(target, force=True)
    if await core.snapshots.text(target):
        await core.snapshots.rebuild(target)
    await core.audit.add_event(
        target, "scope_merged", core.now(), {"from": source.value, **report.as_json()}
    )
    return report


def _forget_key_files(core: MergingCore, source: ScopeKey, aside: Path | None) -> None:
    """A's second key copy and parse cache go (without them A is no longer listed); its
    forgotten file, which can still hold blocks no entry was read from, is set aside."""
    workspace = core.workspace
    slug = scope_slug(source)
    if is_hashed_slug(slug):
        with contextlib.suppress(FileNotFoundError):
            (workspace.scope_keys_dir / slug).unlink()
    parse_cache.forget(parse_cache.files_for(workspace, source))  # a cache, made again
    forgotten = core.memories.kept.file.path(source)
    if forgotten.exists():
        if aside is None:
            aside = set_aside_root(workspace, source)
        os.replace(forgotten, aside / "forgotten.md")


def set_aside_root(workspace: Workspace, source: ScopeKey) -> Path:
    """A directory of its own under `.chatmem/merged/` (A had no directory to move)."""
    path = workspace.state_dir / MERGED_DIR / f"{scope_slug(source)}.files"
    safe_files.make_dirs(workspace.root, path)
    return path


def move_rows(
    conn: Connection, source: str, target: str, renamed: Mapping[str, str] | None = None
) -> tuple[dict[str, int], int]:
    """A's rows re-addressed to B, in the caller's one transaction (an entry given a new
    id takes its audit rows and activations along); returns the rows moved per table and
    the message chunks moved in the index."""
    for old, new in (renamed or {}).items():
        for table in ("audit", "activations"):
            conn.execute(
                f"UPDATE {table} SET entry_id = ? WHERE scope = ? AND entry_id = ?",
                (new, source, old),
            )
    moved: dict[str, int] = {}
    for table in RE_ADDRESSED:
        cursor = conn.execute(f"UPDATE {table} SET scope = ? WHERE scope = ?", (target, source))
        moved[table] = max(cursor.rowcount, 0)
    for table, key in KEYED_BY_SCOPE.items():
        same = " AND ".join(f"o.{column} = {table}.{column}" for column in key)
        cursor = conn.execute(
            f"UPDATE {table} SET scope = ? WHERE scope = ? AND NOT EXISTS"
            f" (SELECT 1 FROM {table} AS o WHERE o.scope = ? AND {same})",
            (target, source, target),
        )
        moved[table] = max(cursor.rowcount, 0)
        conn.execute(f"DELETE FROM {table} WHERE scope = ?", (source,))
    return moved, _move_message_chunks(conn, source, target)


def _move_message_chunks(conn: Connection, source: str, target: str) -> int:
    """The chunks of A's messages (no file holds them) become B's: their postings, the
    scopes' counters and their vectors follow."""
    row = conn.execute("SELECT id FROM scopes WHERE key = ?", (source,)).fetchone()
    if row is None:
        return 0
    sid_a = int(row[0])
    rows = conn.execute(
        "SELECT id, tokens FROM chunks WHERE scope_id = ? AND kind = 'message' ORDER BY id",
        (sid_a,),
    ).fetchall()
    if not rows:
        return 0
    sid_b = ensure_scope(conn, target)
    pairs = [(int(r[0]), str(r[1])) for r in rows]
    kept = postings(conn)
    kept.removed(conn, sid_a, pairs)
    conn.executemany(
        "UPDATE chunks SET scope_id = ? WHERE id = ?", [(sid_b, chunk) for chunk, _ in pairs]
    )
    kept.added(conn, [(chunk, sid_b, tokens) for chunk, tokens in pairs])
    tally = Tally()
    tally.removed(sid_a, (tokens for _, tokens in pairs))
    tally.added(sid_b, (tokens for _, tokens in pairs))
    tally.apply(conn)
    conn.executemany(
        "UPDATE chunk_vectors SET scope_id = ? WHERE scope_id = ? AND chunk_id = ?",
        [(sid_b, sid_a, chunk) for chunk, _ in pairs],
    )
    conn.execute(
        "UPDATE vector_scopes SET version = version + 1 WHERE scope_id IN (?, ?)", (sid_a, sid_b)
    )
    return len(pairs)
