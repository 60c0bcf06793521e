"""Rebuilding the whole index from files: worker processes tokenize, one thread writes."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import memory_core.recall.index.long_term_lines as long_term_lines
import memory_core.recall.index.summaries as summaries_of_scopes
from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import format_when, parse_when
from memory_core.base.scope import ScopeKey
from memory_core.base.sql import Connection, Db
from memory_core.base.turn_dates import encode_days, mentioned_days
from memory_core.base.workspace import Workspace
from memory_core.recall.index.files import prepare_file, scope_files_seen
from memory_core.recall.index.model import ChunkRow, FileRow, PreparedRows, Progress, SyncStats
from memory_core.recall.index.postings import postings
from memory_core.recall.index.rerank import turn_body
from memory_core.recall.index.summaries import (
    FolderSeen,
    LongTermSeen,
    ReindexSummaries,
    SummaryRow,
)
from memory_core.recall.index.writes import (
    INSERT_CHUNK,
    UPSERT_FILE,
    Counted,
    Tally,
    counted,
    dates_text,
    delete_path,
    pieces,
    stored,
    update_hidden,
)

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext

REBUILD_GROUP = 64
"""Files read, tokenized and written together during a rebuild."""
LONG_TERM = ChunkKind.LONG_TERM.value


def reset(raw: Connection) -> list[int]:
    """Empty the index of everything that comes from files, in one transaction; the
    message chunks stay, with their postings and the scopes' counters. Returns the ids
    of the scopes that still hold chunks (messages)."""
    kept_postings = postings(raw)
    kept_postings.exclude_writers(raw)
    kept_postings.reset(raw)
    long_term_lines.forget_all(raw)
    raw.execute("DELETE FROM files")
    raw.execute("DELETE FROM terms")
    raw.execute("UPDATE scopes SET chunk_count = 0, token_count = 0")
    kept = [int(r[0]) for r in raw.execute("SELECT DISTINCT scope_id FROM chunks").fetchall()]
    for sid in kept:
        raw.execute(
            "UPDATE scopes SET chunk_count = (SELECT COUNT(*) FROM chunks WHERE scope_id = ?),"
            " token_count = (SELECT COALESCE(SUM(length(tokens) - length(replace(tokens,"
            " ' ', '')) + CASE WHEN tokens <> '' THEN 1 ELSE 0 END), 0) FROM chunks"
            " WHERE scope_id = ?) WHERE id = ?",
            (sid, sid, sid),
        )
    return kept


UNRESOLVED = "kind = 'message' AND dates IS NULL AND created_at IS NOT NULL"
"""Message chunks whose days are not resolved yet: stored before the column existed, or
after the resolver changed (a migration forgets them, `CHUNK_DATES_AGAIN`). The index
`chunks_dates_unresolved` holds exactly those (created_at aside), so finding none costs
nothing whatever the scope's size."""


def has_unresolved_dates(raw: Connection) -> bool:
    """Whether any message chunk waits for `fill_message_dates`."""
    return raw.execute(f"SELECT 1 FROM chunks WHERE {UNRESOLVED} LIMIT 1").fetchone() is not None


def fill_message_dates(raw: Connection, zone: tzinfo) -> int:
    """The days each message chunk stored before they were kept, or before the resolver
    last changed, speaks of (its `dates` NULL), resolved now as a new message's are
    (`SearchIndex.message_step`): after an open's sync or a reindex every row is what a
    write today makes. Returns how many were filled."""
    rows = raw.execute(f"SELECT id, text, created_at FROM chunks WHERE {UNRESOLVED}").fetchall()
    filled: list[tuple[str, int]] = []
    for chunk_id, text, created in rows:
        try:
            at = parse_when(str(created))
        except ValueError:
            continue  # not a time this code wrote: the row is left as it is
        body = turn_body(ChunkKind.MESSAGE, str(text))
        filled.append((encode_days(mentioned_days(body, at, zone)), int(chunk_id)))
    raw.executemany("UPDATE chunks SET dates = ? WHERE id = ? AND dates IS NULL", filled)
    return len(filled)


def write_rows(raw: Connection, rows: PreparedRows) -> None:
    """Store a group of prepared files (rebuild only): ids are assigned here, inside the
    write transaction, and the chunk rows (and FTS rows) are bound by `executemany`.
    Whatever chunks a file has by now (another process's reindex, a writer's sync since
    the reset) are replaced, and a chunk another writer stores at once is not doubled
    (`INSERT_CHUNK`); counters, document frequencies too, follow the rows really
    written, so they stay exact beside another reindex (whose reset and term counts may
    come before or after this group). `finish_scope` counts the terms again.

    When every row was inserted and none replaced, as after a reset nearly always, the
    counts are made from the rows in hand (`group_counts`); otherwise the rows really
    written are read back and counted. (Made here rather than in the workers: they are
    the busier side of a rebuild, and this thread waits for them.)"""
    files, chunks = rows
    kept = postings(raw)
    kept.hold_files(raw, [path for path, *_ in files])
    tally = Tally()
    deleted = 0
    for path, sid, *_stamp in files:
        deleted += delete_path(raw, sid, path, tally)
    ids = kept.new_ids(raw, len(chunks))
    # A long-term chunk's lines go to `long_term_lines`, its own are 0.
    placed = [
        (chunk_id, *chunk[:4])
        for chunk_id, chunk in zip(ids, chunks, strict=True)
        if chunk[5] == LONG_TERM
    ]
    inserted = raw.executemany(
        INSERT_CHUNK,
        [
            (chunk_id, chunk[0], chunk[1], 0, 0, *chunk[4:])
            if chunk[5] == LONG_TERM
            else (chunk_id, *chunk)
            for chunk_id, chunk in zip(ids, chunks, strict=True)
        ],
    ).rowcount
    if not deleted and inserted == len(chunks):
        long_term_lines.place(raw, placed)
        kept.added(
            raw,
            [(chunk_id, chunk[0], chunk[9]) for chunk_id, chunk in zip(ids, chunks, strict=True)],
        )
        for sid, scope_counts in group_counts(chunks).items():
            tally.counted(sid, scope_counts)
    else:
        scope_of = {chunk_id: chunk[0] for chunk_id, chunk in zip(ids, chunks, strict=True)}
        added = stored(raw, ids)
        really = {chunk_id for chunk_id, _ in added}
        long_term_lines.place(raw, [row for row in placed if row[0] in really])
        kept.added(raw, [(chunk_id, scope_of[chunk_id], tokens) for chunk_id, tokens in added])
        for chunk_id, tokens in added:
            tally.added(scope_of[chunk_id], (tokens,))
    tally.apply(raw)
    raw.executemany(UPSERT_FILE, files)


def group_counts(chunks: Sequence[ChunkRow]) -> dict[int, Counted]:
    """Each scope's counts of a group's chunk rows (`writes.counted`)."""
    by_scope: dict[int, list[str]] = {}
    for chunk in chunks:
        by_scope.setdefault(chunk[0], []).append(chunk[9])
    return {sid: counted(tokens) for sid, tokens in by_scope.items()}


def finish_scope(raw: Connection, sid: int) -> None:
    """Document frequencies of a rebuilt scope, counted by the database rather than row
    by row in Python, and the summaries its monthly summaries hide."""
    postings(raw).exclude_writers(raw)
    postings(raw).count_terms(raw, sid)
    update_hidden(raw, sid)


def finish_scopes(
    raw: Connection, sids: Sequence[int], summaries: list[SummaryRow] | None = None
) -> None:
    """`finish_scope` for several scopes in one transaction (a group of small scopes),
    and their scope summaries."""
    for sid in sids:
        finish_scope(raw, sid)
    summaries_of_scopes.write(raw, summaries or [])


def ignore_interrupts() -> None:
    """In a tokenizing worker: Ctrl-C reaches the whole process group, and the command
    that started the workers answers it (and ends them); a worker's own traceback would
    only bury that one line."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def worker_start() -> BaseContext:
    """How the tokenizing workers start: from a fork server (or a fresh interpreter),
    never by forking this process, whose other threads may hold locks a fork copies
    held (a vector backfill's BLAS threads: the fork would wait for them forever). The
    fork server is single-threaded and holds the workers' code and dictionary already
    (`PRELOAD`)."""
    # Imported here, with the pool below: only a rebuild of many files starts workers,
    # and multiprocessing's modules cost every command's start ~4 ms.
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    if preload_is_this_code():
        # Read when the process's one fork server starts (its first rebuild): it loads
        # the workers' code and dictionary once, and every worker of every rebuild forks
        # ready.
        context.set_forkserver_preload(["__main__", PRELOAD])
    return context


PRELOAD = "memory_core.recall.index.rebuild_preload"
"""The module the fork server imports before it forks a worker (see its docstring)."""


def preload_is_this_code() -> bool:
    """Whether the fork server would preload this very code. Python 3.11's fork server
    imports its preloads with an interpreter's own path (the working directory,
    PYTHONPATH, site-packages), not this process's `sys.path`: a process that put
    another checkout first (a bench, a script) would give its workers that other
    `memory_core`. A worker that imports its code itself gets this process's path
    first, so where the two could differ (found only by an import hook, such as an
    editable install's; an interpreter run isolated) nothing is preloaded."""
    import importlib.machinery
    import site
    import sys

    if sys.flags.isolated or sys.flags.ignore_environment or sys.flags.safe_path:
        return False
    try:
        cwd = os.getcwd()
    except OSError:  # the working directory is gone: the fork server would find none
        return False
    path = [cwd, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    path += getattr(site, "getsitepackages", list)()
    if site.ENABLE_USER_SITE and not sys.flags.no_user_site:
        path.append(site.getusersitepackages())
    found = importlib.machinery.PathFinder.find_spec("memory_core", path)
    if found is None or found.origin is None:
        return False
    here = Path(__file__).resolve().parents[2]  # memory_core/recall/index/rebuild.py
    return Path(found.origin).resolve().parent == here


Listed = tuple[list[ScopeKey], list[tuple[ScopeKey, Path]], dict[ScopeKey, tuple[FolderSeen, bool]]]
"""Every scope, every file, and each scope's folder as its summary sees it and whether
it has a long-term file."""


def list_workspace(workspace: Workspace) -> Listed:
    """Every scope and every file the index covers (blocking: directory listings), and
    what each scope's summary needs of that listing (the folder's stat before it, its
    daily files counted in it)."""
    scopes = workspace.scopes()
    listed: list[tuple[ScopeKey, Path]] = []
    seen: dict[ScopeKey, tuple[FolderSeen, bool]] = {}
    for scope in scopes:
        files, folder, has_long_term = scope_files_seen(workspace, scope)
        seen[scope] = folder, has_long_term
        listed.extend((scope, path) for path in files)
    return scopes, listed, seen


def when_text(when: datetime) -> str:
    """`format_when`, at a third of its cost for the aware UTC whole-second times that
    chunking produces: a rebuild formats one per chunk."""
    if when.tzinfo is UTC and not when.microsecond:
        # %-formatting: about twice as fast as the f-string equivalent here.
        return "%04d-%02d-%02dT%02d:%02d:%02dZ" % (  # noqa: UP031
            when.year,
            when.month,
            when.day,
            when.hour,
            when.minute,
            when.second,
        )
    return format_when(when)


Prepared = tuple[PreparedRows, list[tuple[int, LongTermSeen]]]
"""What a worker sends back for a group: its rows and the long-term files' summary
parts."""


def prepare_rows(
    workspace: Workspace, group: Sequence[tuple[int, Path]], zone: tzinfo
) -> PreparedRows:
    """`prepare_group`'s rows alone."""
    return prepare_group(workspace, group, zone)[0]


def prepare_group(
    workspace: Workspace,
    group: Sequence[tuple[int, Path]],
    zone: tzinfo,
    archive_below: float | None = None,
) -> Prepared:
    """Worker-process entry point of a rebuild (module level, so it pickles): files read,
    chunked and tokenized into the very tuples the database takes, so the writing process
    only unpickles plain tuples and hands them to `executemany`. With `archive_below`,
    each long-term file read as its store reads it also gives its scope's summary part
    (scope id, what was seen), parsed once for both."""
    files: list[FileRow] = []
    chunks: list[ChunkRow] = []
    seen: list[tuple[int, LongTermSeen]] = []
    for sid, path in group:
        item = prepare_file(workspace, path, zone, archive_below)
        if item is None:
            continue
        if item.summary is not None:
            seen.append((sid, item.summary))
        kind = item.kind.value
        files.append((item.path, sid, item.mtime_ns, item.size, item.hash, kind))
        numbers = pieces(chunk.line_from for chunk, _ in item.chunks)
        chunks.extend(
            (
                sid,
                item.path,
                chunk.line_from,
                chunk.line_to,
                piece,
                kind,
                when_text(chunk.created_at) if chunk.created_at else None,
                chunk.ref,
                chunk.text,
                tokens,
                dates_text(chunk),
            )
            for piece, (chunk, tokens) in zip(numbers, item.chunks, strict=True)
        )
    return (files, chunks), seen


async def rebuild(
    db: Db,
    workspace: Workspace,
    zone: tzinfo,
    paths: Sequence[tuple[int, Path]],
    sids: set[int],
    progress: Progress | None = None,
    summaries: ReindexSummaries | None = None,
) -> SyncStats:
    """Drop every file-derived chunk and index `paths` (scope id, file) again; with
    `summaries`, each listed scope's summary is written as its last group is (the
    workers send each long-term file's part back with its rows: they hold no database
    connection, and a scope's part is a few hundred bytes).

    Files are read, chunked and tokenized in worker processes (tokenizing holds the
    GIL), in groups of `REBUILD_GROUP`, into the plain row tuples the database takes.
    While they work, this process empties the index and then writes each group in
    one transaction and one round trip to the database thread, where `executemany`
    binds chunk and FTS rows in C. Counters are kept per group; document frequencies
    are copied from FTS5's own vocabulary once a scope's last group is written, while
    the workers go on with the next scope.
    """
    total = SyncStats(files_seen=len(paths))
    groups = [paths[i : i + REBUILD_GROUP] for i in range(0, len(paths), REBUILD_GROUP)]
    groups_left = Counter(sid for group in groups for sid in {sid for sid, _ in group})
    loop = asyncio.get_running_loop()
    workers = min(os.cpu_count() or 1, 4) if len(groups) > 2 else 0
    from concurrent.futures import ProcessPoolExecutor  # see worker_start

    pool = (
        ProcessPoolExecutor(
            max_workers=workers, mp_context=worker_start(), initializer=ignore_interrupts
        )
        if workers
        else None
    )
    ahead = max(workers, 1) + 1
    pending: list[asyncio.Future[Prepared]] = []
    below = summaries.archive_below if summaries is not None else None

    def submit(index: int) -> None:
        if index >= len(groups):
            return
        if pool is not None:
            pending.append(
                loop.run_in_executor(pool, prepare_group, workspace, groups[index], zone, below)
            )
        else:
            pending.append(
                asyncio.ensure_future(
                    asyncio.to_thread(prepare_group, workspace, groups[index], zone, below)
                )
            )

    def start_pool() -> list[concurrent.futures.Future[Prepared]]:
        assert pool is not None
        return [
            pool.submit(prepare_group, workspace, groups[index], zone, below)
            for index in range(min(ahead, len(groups)))
        ]

    finished: set[int] = set()
    done = 0
    starting: asyncio.Future[list[concurrent.futures.Future[Prepared]]] | None = None
    try:
        if pool is not None:
            # The first groups, submitted from a thread: the submit that starts the
            # process's fork server waits for its preload (~0.4 s), beside the reset.
            starting = asyncio.ensure_future(asyncio.to_thread(start_pool))
        else:
            for index in range(ahead):
                submit(index)
        # The workers read and tokenize the first groups meanwhile.
        kept = await db.write(reset)
        await db.write(partial(fill_message_dates, zone=zone))
        if starting is not None:
            pending.extend(asyncio.wrap_future(future) for future in await starting)
        for number, group in enumerate(groups):
            rows, seen = await pending.pop(0)
            submit(number + ahead)
            if summaries is not None:
                summaries.read.update(seen)
            await db.write(partial(write_rows, rows=rows))
            total.files_indexed += len(rows[0])
            total.chunks_added += len(rows[1])
            done_now = []
            for sid in sorted({sid for sid, _ in group}):
                groups_left[sid] -= 1
                if not groups_left[sid]:
                    done_now.append(sid)
            if done_now:  # one transaction for the group's scopes: many small scopes
                made = summaries.rows(done_now) if summaries is not None else None
                await db.write(partial(finish_scopes, sids=done_now, summaries=made))
                finished.update(done_now)
            done += len(group)
            if progress:
                progress(done, len(paths))
    finally:
        if starting is not None and not starting.done():
            starting.cancel()  # its futures, once made, are the pool's: cancelled below
        elif starting is not None and not starting.cancelled():
            starting.exception()  # retrieved: a failure before it was awaited is raised
        for future in pending:
            future.cancel()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
    left = sorted((sids | set(kept)) - finished)
    for start in range(0, len(left), REBUILD_GROUP):
        some = left[start : start + REBUILD_GROUP]
        made = summaries.rows(some) if summaries is not None else None
        await db.write(partial(finish_scopes, sids=some, summaries=made))
    return total
