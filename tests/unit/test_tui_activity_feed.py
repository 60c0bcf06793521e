"""The activity feed after a poll: what was just read joins what is shown, each record
once, newest first, never more than the feed holds."""

from __future__ import annotations

from datetime import UTC, datetime

from memory_core.base.records import AuditRecord
from tui.widgets.activity import FEED_LIMIT, merged_feed

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def record(id: int) -> AuditRecord:
    return AuditRecord(id, AT, "main", f"e{id}", "add", None, 0.5, "tui", None, "x", "")


def ids(records: list[AuditRecord]) -> list[int]:
    return [r.id for r in records]


def test_newer_records_go_first_and_each_is_kept_once() -> None:
    shown = [record(3), record(2), record(1)]
    assert ids(merged_feed([record(5), record(4), record(3)], shown)) == [5, 4, 3, 2, 1]


def test_the_feed_keeps_only_its_newest_records() -> None:
    shown = [record(n) for n in range(FEED_LIMIT, 0, -1)]
    merged = merged_feed([record(FEED_LIMIT + 1)], shown)
    assert len(merged) == FEED_LIMIT
    assert merged[0].id == FEED_LIMIT + 1 and merged[-1].id == 2


def test_a_first_load_is_the_feed() -> None:
    assert ids(merged_feed([record(2), record(1)], [])) == [2, 1]
