"""The listing of `chatmem scopes` and `stats`: every scope with a directory (main first,
then by key, as `Workspace.scopes` lists them) and, for the asked page, its figures.

The scopes directory is scanned once; a directory whose name is a scope the index knows
is that scope (no key file read), any other is resolved as `Workspace.scopes` resolves
it. A page's summaries are read in one query; a scope whose files' stamp differs from
its summary's (a capture, an edit by another program while nothing ran, a daily note
added) or that has none is read from its files again, and its summary replaced.

A reindex and a sync that reads a long-term file make the same summaries from their own
reads (`recall/index/summaries.py`, by `storage/summary_format.py`'s rules, as here), so
the first listing after a reindex reads no file; this fallback stays for the rest.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path

import memory_core.recall.index.writes as index_writes
from memory_core.base import safe_files
from memory_core.base.clock import epoch_ns
from memory_core.base.errors import ChatmemError, FileRefused
from memory_core.base.scope import MAIN, ScopeKey, scope_slug
from memory_core.base.sql import Connection, Db
from memory_core.base.workspace import SCOPED_LONG_TERM, Workspace
from memory_core.longterm.long_term import LongTermMemory
from memory_core.longterm.store_versions import is_racy_mtime
from memory_core.scope_listing.figures import ScopeFigures, figures
from memory_core.storage import scope_summaries
from memory_core.storage.summary_format import (
    daily_count,
    encode,
    joined,
    kept_stamp,
    readable,
    stamp_part,
)

log = logging.getLogger(__name__)

WRITE_GROUP = 256
"""Summaries written per transaction when many are made at once (a first listing)."""


@dataclass(frozen=True, slots=True)
class Listing:
    scopes: list[ScopeKey]
    """Every scope with a directory, main first, then by key."""
    page: list[Row]
    """The asked part of `scopes`, each with its figures as of the listing's instant."""


@dataclass(frozen=True, slots=True)
class Row:
    scope: ScopeKey
    path: str
    """Its long-term file, relative to the workspace (as `Workspace.relative` shows it)."""
    figures: ScopeFigures


async def scope_figures(
    memories: LongTermMemory,
    db: Db | None,
    when: datetime,
    offset: int = 0,
    limit: int | None = None,
) -> Listing:
    """The scopes and the figures of `offset`/`limit`'s page of them, as of `when`."""
    ws = memories.workspace
    await memories.flush()  # a scope's first capture creates its directory
    stored: dict[str, tuple[int, str, str]] = {}
    if db is not None:
        try:
            stored = await db.read(scope_summaries.read_all)
        except ChatmemError as exc:  # the server away, a damaged index: read the files
            log.debug("scope summaries unreadable: %s", exc)
            db = None
    keys = await asyncio.to_thread(_listed, ws, stored)
    chosen = keys[offset:] if limit is None else keys[offset : offset + limit]
    files = [_files(ws, key) for key in chosen]
    read_at = epoch_ns()  # before the stats: a write after them makes a stamp racy
    stamps = await asyncio.to_thread(lambda: [_stamp(*pair) for pair in files])
    payloads: list[str] = []
    fresh: list[tuple[str, str, str]] = []
    for key, stamp in zip(chosen, stamps, strict=True):
        held = stored.get(key.value)
        if held is not None and held[1] == stamp[0] and readable(held[2]):
            payloads.append(held[2])
            continue
        payload = await _summary(memories, key)
        payloads.append(payload)
        # A file written within RACY_NS of the read may be written again under the same
        # stamp (the kernel's clock ticks coarsely): kept as one no stamp equals, so the
        # next listing reads it again, until it has settled (as the store's rule).
        racy = is_racy_mtime(stamp[1], read_at)
        fresh.append((key.value, kept_stamp(stamp[0], racy), payload))
    if db is not None and fresh:
        await _store(db, fresh)
    policy = memories.policy
    skip = len(str(ws.root)) + 1
    return Listing(
        keys,
        [
            Row(key, pair[0][skip:], figures(p, when, policy))
            for key, pair, p in zip(chosen, files, payloads, strict=True)
        ],
    )


def _listed(ws: Workspace, stored: dict[str, tuple[int, str, str]]) -> list[ScopeKey]:
    """`Workspace.scopes`, without reading the key file of a directory the index knows."""
    known = {scope_slug(ScopeKey(key)): key for key in stored if key != MAIN.value}
    found: list[ScopeKey] = []
    for entry in safe_files.entries(ws.root, ws.scopes_dir):
        key = known.get(entry.name)
        if key is not None and entry.is_dir(follow_symlinks=False):
            found.append(ScopeKey(key))
            continue
        resolved = ws.scope_of_dir(Path(entry.path))
        if resolved is not None:
            found.append(resolved)
    return [MAIN, *sorted(found, key=lambda k: k.value)]


def _files(ws: Workspace, scope: ScopeKey) -> tuple[str, str]:
    """(long-term file, scope folder) of `scope` as `Workspace` lays them out, made as
    strings: 10 000 scopes' `Path`s cost a listing ~0.3 s."""
    if scope.is_main:
        return str(ws.long_term_path(scope)), str(ws.memory_dir(scope))
    folder = f"{ws.scopes_dir}/{scope_slug(scope)}"
    return f"{folder}/{SCOPED_LONG_TERM}", folder


def _stamp(long_term: str, folder: str) -> tuple[str, int]:
    """The long-term file's (mtime_ns, size) and the scope folder's mtime_ns (a daily
    note added or removed moves it): what the summary was read from; and the newer
    mtime of the two (`summary_format.stamp_part`, as the index stamps its own)."""
    (lt_part, lt_mtime), (dir_part, dir_mtime) = stamp_part(long_term), stamp_part(folder)
    return joined((lt_part, dir_part)), max(lt_mtime, dir_mtime)


async def _summary(memories: LongTermMemory, scope: ScopeKey) -> str:
    """The scope's summary, read from its files as `LongTermViews.status` reads them."""
    parsed = await memories.store.load(scope)
    ws = memories.workspace
    daily = await asyncio.to_thread(_count_daily, ws.root, ws.memory_dir(scope))
    return encode(parsed.entries, len(parsed.quarantined), daily)


def _count_daily(root: Path, directory: Path) -> int:
    """Daily files of the folder; 0 when it is missing or leads outside the workspace
    (the rule of `LongTermViews.status`)."""
    try:
        with safe_files.scan_dir(root, directory) as listing:
            return daily_count(e.name for e in listing)
    except (OSError, FileRefused):
        return 0


async def _store(db: Db, rows: list[tuple[str, str, str]]) -> None:
    """The summaries made, a group per transaction; a workspace that refuses writes
    (read-only) keeps none, and the next listing reads those files again."""

    def write(conn: Connection, group: list[tuple[str, str, str]]) -> None:
        for key, stamp, payload in group:
            sid = index_writes.ensure_scope(conn, key)
            scope_summaries.write(conn, sid, key, stamp, payload)

    try:
        for start in range(0, len(rows), WRITE_GROUP):
            await db.write(partial(write, group=rows[start : start + WRITE_GROUP]))
    except ChatmemError as exc:
        log.debug("scope summaries not kept: %s", exc)
