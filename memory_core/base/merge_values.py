"""What a merge takes and gives back: the candidate in; each change, the result and what
became of the last candidate out.

Apart from the merge itself because far more modules speak of these values than run a
merge: the audit log, the storage interfaces and the spools record `Change`s, front ends
show `ChangeKind`s and `Outcome`s, extraction builds `Proposal`s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from memory_core.base.entries import Granularity, Importance, MemoryClass, MemoryEntry


class ChangeKind(StrEnum):
    ADDED = "add"
    REINFORCED = "reinforce"
    CONTRADICTED = "contradict"
    DECAYED = "decay"
    ARCHIVED = "archive"
    RESTORED = "restore"
    FORGOTTEN = "forget"
    EDITED = "edit"
    PINNED = "pin"
    UNPINNED = "unpin"


@dataclass(frozen=True, slots=True)
class Proposal:
    """A memory proposed by extraction; `matches` names an existing entry it restates."""

    content: str
    category: str = "fact"
    importance: Importance = Importance.MEDIUM
    matches: str | None = None
    contradicts: tuple[str, ...] = ()
    expires_at: datetime | None = None
    confidence: float | None = None
    memory_class: MemoryClass | None = None
    granularity: Granularity | None = None
    new_id: str | None = None
    """Id for the entry if the candidate is added: a staged capture fixes it up front so
    replaying the capture (after a crash, or onto a file edited meanwhile) keeps it."""
    speaker: str | None = None
    """The group member who said it; None outside group scopes (see longterm/claims.py)."""
    claim_on: str | None = None
    """Set by the claim rule: the member's self-fact this candidate disputes."""
    speaker_id: str | None = None
    """The speaker's platform id, when the front end gave one (a group scope only)."""


@dataclass(frozen=True, slots=True)
class Change:
    kind: ChangeKind
    entry_id: str
    old_score: float | None
    new_score: float | None
    content: str
    category: str
    detail: str = ""


class _ChangeSlots:
    """`Change`'s memory layout without its frozen `__setattr__`: see `build_change`."""

    __slots__ = Change.__slots__
    kind: ChangeKind
    entry_id: str
    old_score: float | None
    new_score: float | None
    content: str
    category: str
    detail: str


_new_object = object.__new__
_set_attribute = object.__setattr__


def build_change(
    kind: ChangeKind,
    entry_id: str,
    old_score: float | None,
    new_score: float | None,
    content: str,
    category: str,
    detail: str = "",
) -> Change:
    """`Change(...)`, about four times faster: a merge over 10 000 entries records one
    DECAYED change per decayed entry, and a frozen dataclass's `__init__` pays a slow
    `object.__setattr__` per field. Same trick as `memory_core.base.entries.build_entry`: fill
    a plain slots object, then make it a `Change` by assigning `__class__`; the result is
    an ordinary frozen `Change`."""
    change = _new_object(_ChangeSlots)
    change.kind = kind
    change.entry_id = entry_id
    change.old_score = old_score
    change.new_score = new_score
    change.content = content
    change.category = category
    change.detail = detail
    _set_attribute(change, "__class__", Change)
    return change  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class MergeResult:
    entries: list[MemoryEntry]
    changes: list[Change] = field(default_factory=list)
    skipped: bool = False
    """True when the session had already been merged: nothing was changed."""

    def count(self, kind: ChangeKind) -> int:
        return sum(1 for c in self.changes if c.kind is kind)

    @property
    def stats(self) -> dict[str, int]:
        return {kind.value: self.count(kind) for kind in ChangeKind if self.count(kind)}

    @property
    def outcome(self) -> Outcome | None:
        """What became of the merge's last candidate (a capture's only one): saved as a
        new entry, an update of an entry, or a reinforcement; None when nothing was kept."""
        for change in reversed(self.changes):
            if change.kind is ChangeKind.REINFORCED:
                return Outcome(Kept.REINFORCED, change.entry_id)
            if change.kind is ChangeKind.ADDED:
                if change.detail.startswith(UPDATES_DETAIL):
                    replaced = change.detail.removeprefix(UPDATES_DETAIL)
                    return Outcome(Kept.UPDATED, change.entry_id, replaced)
                return Outcome(Kept.SAVED, change.entry_id)
        return None


UPDATES_DETAIL = "updates "
"""How the ADDED change of an update names the entry it replaces (`updates <id>`; that
entry's CONTRADICTED change says `updated by <new id>`): the audit log shows both."""


class Kept(StrEnum):
    SAVED = "saved"
    """A new entry."""
    UPDATED = "updated"
    """A new entry replacing an alike one that differs in a number, date or negation; the
    old one is contradicted (its score halved) and stays readable."""
    REINFORCED = "reinforced"
    """The same fact said again: the old entry's score rises, its text stays."""


@dataclass(frozen=True, slots=True)
class Outcome:
    kept: Kept
    entry_id: str
    """The entry that holds the text now (a new one unless reinforced)."""
    replaced: str | None = None
    """The entry an update replaced."""

    def describe(self) -> str:
        """One line for people: `saved new [id]`, `updated [old] -> [new]`,
        `reinforced [id]`."""
        if self.kept is Kept.UPDATED:
            return f"updated [{self.replaced}] -> [{self.entry_id}]"
        if self.kept is Kept.SAVED:
            return f"saved new [{self.entry_id}]"
        return f"reinforced [{self.entry_id}]"

    def as_json(self) -> dict[str, str]:
        """For tools and `--json`: `{"action": ..., "id": ..., "replaced": ...}`."""
        answer = {"action": self.kept.value, "id": self.entry_id}
        if self.replaced is not None:
            answer["replaced"] = self.replaced
        return answer
