"""The pure edits of one long-term entry (`longterm/long_term_changes.py`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory_core.base.entries import ArchiveReason, MemoryEntry
from memory_core.base.merge_values import ChangeKind
from memory_core.base.policy import ScoringPolicy
from memory_core.longterm.long_term_changes import (
    archive_edit,
    content_edit,
    edited,
    forget_edit,
    pin_edit,
    restore_edit,
)

NOW = datetime(2025, 3, 1, 12, tzinfo=UTC)
POLICY = ScoringPolicy()


def entry(entry_id: str, score: float = 0.8, **fields: object) -> MemoryEntry:
    return MemoryEntry(entry_id, f"memory {entry_id}", "fact", score, NOW, NOW, NOW).with_(**fields)


def test_an_edit_replaces_the_entry_and_says_what_changed() -> None:
    entries = [entry("a"), entry("b")]
    done = edited(entries, "b", content_edit("new text"), NOW, POLICY)
    assert done is not None and done.change is not None
    assert [e.content for e in done.entries] == ["memory a", "new text"]
    assert done.entry.content == "new text"
    assert (done.change.kind, done.change.entry_id) == (ChangeKind.EDITED, "b")
    assert [e.content for e in entries] == ["memory a", "memory b"]  # the input is left alone


def test_forgetting_removes_the_entry_and_returns_it_as_it_was() -> None:
    done = edited([entry("a"), entry("b")], "a", forget_edit, NOW, POLICY)
    assert done is not None and done.change is not None
    assert [e.id for e in done.entries] == ["b"]
    assert done.entry.content == "memory a"
    assert done.change.kind is ChangeKind.FORGOTTEN and done.change.new_score is None


def test_an_edit_with_nothing_to_do_has_no_change() -> None:
    pinned = entry("a", pinned=True)
    done = edited([pinned], "a", pin_edit(True, POLICY), NOW, POLICY)
    assert done is not None and done.change is None and done.entry is pinned
    archived = entry("b", archived=ArchiveReason.MANUAL)
    done = edited([archived], "b", archive_edit(POLICY), NOW, POLICY)
    assert done is not None and done.change is None


def test_an_unknown_id_is_none() -> None:
    assert edited([entry("a")], "zz", forget_edit, NOW, POLICY) is None


def test_restoring_a_decayed_entry_lifts_it_above_the_archive_line() -> None:
    later = NOW + timedelta(days=3650)
    faded = entry("a", score=0.3, archived=ArchiveReason.EXPIRED)
    done = edited([faded], "a", restore_edit(POLICY), later, POLICY)
    assert done is not None and done.change is not None
    assert done.entry.archived is None
    assert done.entry.score >= POLICY.archive_below
    assert done.entry.last_activated == later
