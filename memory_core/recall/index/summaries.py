"""Scope summaries made where the index reads a scope's files: a reindex, and a scope's
sync when it reads the long-term file. The listing of `chatmem scopes` and `stats`
(`scope_listing/listing.py`) then finds them current and reads no file: each is exactly
what the listing would make of the same files (`storage/summary_format.py`'s rules: the
stamp of the long-term file and of the scope folder, each taken before it is read, and
the racy rule of `store_versions.is_racy_mtime`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from memory_core.base.sql import Connection
from memory_core.longterm.memory_md_parser import ParsedMemory
from memory_core.longterm.store_versions import is_racy_mtime
from memory_core.storage import scope_summaries
from memory_core.storage.summary_format import (
    daily_count,
    entries_text,
    joined,
    kept_stamp,
    payload,
)

SummaryRow = tuple[int, str, str, str]
"""(scope id, key, stamp, payload) of a `scope_summaries` row."""


@dataclass(frozen=True, slots=True)
class FolderSeen:
    """A scope folder as a summary sees it: its stamp part (taken before it was
    listed), whether that part is racy, and the daily files the listing held."""

    part: str
    racy: bool
    daily: int

    @staticmethod
    def of(part: str, mtime_ns: int, read_at_ns: int, names: Iterable[str]) -> FolderSeen:
        return FolderSeen(part, is_racy_mtime(mtime_ns, read_at_ns), daily_count(names))


@dataclass(frozen=True, slots=True)
class LongTermSeen:
    """A long-term file as a summary sees it: its stamp part (taken before it was read),
    whether that part is racy, its entries' scoring fields (JSON) and its quarantined
    blocks counted. Plain values: a reindex's worker sends it back with its rows."""

    part: str
    racy: bool
    entries: str
    """`summary_format.entries_text` of the parse."""
    quarantined: int

    @staticmethod
    def of(part: str, mtime_ns: int, read_at_ns: int, parsed: ParsedMemory) -> LongTermSeen:
        return LongTermSeen(
            part,
            is_racy_mtime(mtime_ns, read_at_ns),
            entries_text(parsed.entries),
            len(parsed.quarantined),
        )


NO_LONG_TERM = LongTermSeen("-", False, entries_text([]), 0)
"""A scope without a long-term file: the listing reads it as no entry."""


def summary(folder: FolderSeen, long_term: LongTermSeen) -> tuple[str, str]:
    """(stamp, payload) as stored, of what was seen of a scope's files."""
    stamp = kept_stamp(joined((long_term.part, folder.part)), folder.racy or long_term.racy)
    return stamp, payload(long_term.entries, long_term.quarantined, folder.daily)


@dataclass(slots=True)
class ReindexSummaries:
    """What a reindex needs to make each listed scope's summary: per scope id, its key,
    its folder as the reindex listed it and whether it has a long-term file; and the
    long-term files the workers read, as they come back."""

    archive_below: float
    """The long-term store's: an entry's archived flag depends on it."""
    scopes: dict[int, tuple[str, FolderSeen, bool]]
    read: dict[int, LongTermSeen] = field(default_factory=dict)

    def rows(self, sids: Iterable[int]) -> list[SummaryRow]:
        """The summaries of the finished scopes `sids`; none for a scope whose long-term
        file was not read as the store reads it (not UTF-8, gone since it was listed):
        the listing reads that one itself."""
        out: list[SummaryRow] = []
        for sid in sids:
            known = self.scopes.get(sid)
            if known is None:
                continue  # a scope only messages hold: no folder, not listed
            key, folder, has_long_term = known
            long_term = self.read.pop(sid, None)
            if long_term is None:
                if has_long_term:
                    continue
                long_term = NO_LONG_TERM
            out.append((sid, key, *summary(folder, long_term)))
        return out


def write(conn: Connection, rows: list[SummaryRow]) -> None:
    if rows:
        scope_summaries.write_many(conn, rows)
