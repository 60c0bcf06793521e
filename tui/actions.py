"""What the TUI may change, each through the core's own method (which takes the scope's
locks, writes atomically and audits). Every action is confirmed in a modal first."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from memory_core.base.merge_values import ChangeKind
from memory_core.base.scope import ScopeKey
from memory_core.engine import MemoryCore
from tui.format import one_line

SOURCE = "tui"
"""The audit log's `source` for changes made here."""


class Kind(StrEnum):
    PIN = "pin"
    UNPIN = "unpin"
    ARCHIVE = "archive"
    RESTORE = "restore"
    FORGET = "forget"
    EDIT = "edit"
    CONSOLIDATE = "consolidate"


@dataclass(frozen=True, slots=True)
class Action:
    kind: Kind
    scope: ScopeKey
    entry_id: str | None = None
    content: str = ""
    new_content: str | None = None

    @property
    def danger(self) -> bool:
        return self.kind in (Kind.FORGET, Kind.CONSOLIDATE)

    def question(self) -> str:
        target = f"[{self.entry_id}]" if self.entry_id else ""
        return {
            Kind.PIN: f"Pin {target}? A pinned entry never decays.",
            Kind.UNPIN: f"Unpin {target}? It decays again from its current score.",
            Kind.ARCHIVE: f"Archive {target}? It leaves the prompt but stays searchable.",
            Kind.RESTORE: f"Restore {target} to Active?",
            Kind.FORGET: f"Forget {target}? It leaves the file; u (undo) or `chatmem restore` "
            "brings it back within long_term.forgotten_keep_days (then `chatmem purge` "
            "erases it).",
            Kind.EDIT: f"Save the new content of {target}?",
            Kind.CONSOLIDATE: f"Run consolidation of scope {self.scope} now "
            "(decay, archive and forget, written to the file)?",
        }[self.kind]

    def detail(self) -> str:
        if self.kind is Kind.EDIT and self.new_content is not None:
            return (
                f"before: {one_line(self.content, 200)}\nafter:  {one_line(self.new_content, 200)}"
            )
        return one_line(self.content, 200)


async def perform(core: MemoryCore, action: Action) -> str:
    """Run the action; returns one line saying what happened."""
    scope, entry_id = action.scope, action.entry_id or ""
    kind = action.kind
    if kind is Kind.CONSOLIDATE:
        result = await core.memories.consolidate(scope)
        parts = [
            f"{result.count(k)} {k.value}"
            for k in (ChangeKind.DECAYED, ChangeKind.ARCHIVED, ChangeKind.FORGOTTEN)
            if result.count(k)
        ]
        return f"consolidated {scope}: " + (", ".join(parts) or "no changes")
    if kind in (Kind.PIN, Kind.UNPIN):
        entry = await core.memories.set_pinned(scope, entry_id, kind is Kind.PIN, source=SOURCE)
    elif kind is Kind.ARCHIVE:
        entry = await core.memories.archive(scope, entry_id, source=SOURCE)
    elif kind is Kind.RESTORE:
        entry = await core.memories.restore(scope, entry_id, source=SOURCE)
    elif kind is Kind.FORGET:
        entry = await core.memories.forget(scope, entry_id, source=SOURCE)
    else:
        entry = await core.memories.edit(scope, entry_id, action.new_content or "", source=SOURCE)
    past = {"pin": "pinned", "unpin": "unpinned", "forget": "forgot", "edit": "edited"}
    return f"{past.get(kind.value, kind.value + 'd')} [{entry.id}] {one_line(entry.content, 60)}"
