"""Test-only access to what the product keeps inside the core: its database (raw SQL to
check or damage what the index and history hold) and index rows made without a history
row. The product's front ends reach none of this."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from filelock import FileLock

from adapters.cli import main
from adapters.settings import AppConfig
from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import format_when
from memory_core.base.entries import MemoryEntry
from memory_core.base.merge_values import MergeResult, Proposal
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.sql import Connection, Db
from memory_core.base.text import tokenize
from memory_core.config import env_bindings
from memory_core.engine import MemoryCore
from memory_core.longterm import entities, fact_keys, matching
from memory_core.longterm.matching import EntryView
from memory_core.longterm.merge import apply_candidates
from memory_core.recall.index import K1, B, CorpusStats, SearchIndex, idf
from memory_core.recall.index.files import prepare_file
from memory_core.recall.index.long_term_lines import LINE_FROM, LINE_TO
from memory_core.recall.index.rerank import Candidate
from memory_core.storage.history_rows import MESSAGE_COLUMNS, message_from_row
from memory_core.storage.sessions import StoredMessage
from memory_core.storage.shared_fts import scoped


def clean_cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ./chatmem.toml and no CHATMEM_* / token variables reach the commands: an empty
    working directory, every bound variable unset."""
    for name, _ in env_bindings(AppConfig):
        monkeypatch.delenv(name, raising=False)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)


def unbound_environ() -> dict[str, str]:
    """This process's environment without any variable chatmem reads (`env_bindings`):
    for a child process that must see only what the test gives it."""
    names = {name for name, _ in env_bindings(AppConfig)}
    return {k: v for k, v in os.environ.items() if k not in names}


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`chatmem ARGV` in this process: its exit code, stdout and stderr."""
    try:
        code: Any = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return int(code or 0), out, err


def database(core: MemoryCore) -> Db:
    db = core.database
    assert db is not None, core.degraded_reason
    return db


def index_of(core: MemoryCore) -> SearchIndex:
    index = core.guard.index
    assert index is not None, core.degraded_reason
    return index


async def sql(core: MemoryCore, query: str, *params: Any) -> list[Any]:
    """Rows of one statement on the core's own connection (outside any transaction)."""
    return await database(core).read(lambda conn: conn.execute(query, params).fetchall())


async def long_term_chunks_and_file(
    core: MemoryCore,
) -> tuple[list[tuple[str, int, int, int, str]], list[tuple[str, int, int, str]]]:
    """The main scope's long-term chunks as the index holds them (ref, lines, piece, text),
    in line order, and what chunking the file afresh gives (ref, lines, text)."""
    rows = await sql(
        core,
        f"SELECT c.ref, {LINE_FROM} AS line, {LINE_TO}, c.piece, c.text FROM chunks AS c"
        " WHERE c.kind = 'long_term' ORDER BY line",
    )
    item = prepare_file(core.workspace, core.workspace.long_term_path(MAIN), UTC)
    assert item is not None
    held = [(str(r[0]), int(r[1]), int(r[2]), int(r[3]), str(r[4])) for r in rows]
    return held, [(str(c.ref), c.line_from, c.line_to, c.text) for c, _ in item.chunks]


DOUBLED = (
    "SELECT COUNT(*) FROM (SELECT scope_id, path, CASE WHEN kind = 'long_term' THEN ref"
    " ELSE CAST(line_from AS TEXT) END AS spot, piece FROM chunks"
    " GROUP BY scope_id, path, spot, piece HAVING COUNT(*) > 1) AS d"
)
"""Chunks stored twice: two rows of one key (a long-term chunk's entry, another's line,
and the piece)."""

LINES_ASTRAY = (
    "SELECT (SELECT COUNT(*) FROM chunks AS c LEFT JOIN long_term_lines AS l"
    " ON l.chunk_id = c.id WHERE (c.kind = 'long_term') <> (l.chunk_id IS NOT NULL)"
    " OR l.scope_id <> c.scope_id OR l.path <> c.path"
    " OR (c.kind = 'long_term' AND (c.line_from <> 0 OR c.line_to <> 0))),"
    " (SELECT COUNT(*) FROM long_term_lines AS l LEFT JOIN chunks AS c ON c.id = l.chunk_id"
    " WHERE c.id IS NULL OR c.kind <> 'long_term')"
)
"""Chunks whose line row is missing, doubled in meaning or not their file's, and line rows
of no long-term chunk (`memory_core/recall/index/long_term_lines.py`)."""


LINES_BACK_IN_CHUNKS: list[tuple[str, tuple[object, ...]]] = [
    (
        "UPDATE chunks SET line_from = (SELECT line_from FROM long_term_lines"
        " WHERE chunk_id = chunks.id), line_to = (SELECT line_to FROM long_term_lines"
        " WHERE chunk_id = chunks.id) WHERE kind = 'long_term'",
        (),
    ),
    ("DROP TABLE long_term_lines", ()),
    ("DELETE FROM _migrations WHERE name LIKE '%long_term_lines'", ()),
]
"""An index from before long-term lines had a table of their own (m018)."""


async def assert_lines_placed(core: MemoryCore) -> None:
    """Every long-term chunk has its line row and no other chunk has one."""
    assert [tuple(int(n) for n in row) for row in await sql(core, LINES_ASTRAY)] == [(0, 0)]


async def journal_sql(core: MemoryCore, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of one statement on the capture journal's own database (its SQLite file, or
    the shared PostgreSQL database)."""
    staging = core.memories.staging
    assert staging is not None
    db = staging.journal.db

    def run(conn: Connection) -> list[Any]:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if getattr(cursor, "description", None) else []

    return [tuple(r) for r in await db.read(run)]


@contextlib.asynccontextmanager
async def another_process_holds(core: MemoryCore, name: str) -> AsyncIterator[None]:
    """Hold the workspace's process-level lock `name` as another process would: its lock
    file, or on PostgreSQL its advisory lock (on a connection of its own)."""
    if core.config.storage.backend == "sqlite":
        other = FileLock(core.workspace.locks_dir / f"{name}.lock", thread_local=False)
        await asyncio.to_thread(other.acquire)
        try:
            yield
        finally:
            await asyncio.to_thread(other.release)
        return
    conn = await psycopg.AsyncConnection.connect(core.config.storage.postgres_dsn, autocommit=True)
    key = "hashtextextended(current_schema() || ':' || %s, 0)"
    try:
        await conn.execute(f"SELECT pg_advisory_lock({key})", (name,))
        yield
        await conn.execute(f"SELECT pg_advisory_unlock({key})", (name,))
    finally:
        await conn.close()


async def posting_ids(core: MemoryCore, sid: int, term: str) -> set[int]:
    """Ids of the scope's chunks whose postings hold `term`, asked of the backend's own
    term index (FTS5's table, or PostgreSQL's GIN expression)."""
    if database(core).dialect.name == "sqlite":
        query = "SELECT rowid FROM fts_scoped WHERE fts_scoped MATCH ?"
        rows = await sql(core, query, '"' + scoped(sid, term).replace('"', '""') + '"')
    else:
        query = (
            "SELECT id FROM chunks WHERE scope_id = ?"
            " AND chatmem_postings(scope_id, tokens) && chatmem_postings(?, ?)"
        )
        rows = await sql(core, query, sid, sid, term)
    return {int(r[0]) for r in rows}


async def sql_write(core: MemoryCore, *statements: tuple[str, Sequence[Any]]) -> None:
    """Statements in one transaction on the core's own connection."""

    def write(conn: Connection) -> None:
        for statement, params in statements:
            conn.execute(statement, params)

    await database(core).write(write)


async def index_message(
    core: MemoryCore,
    scope: ScopeKey,
    session_id: str,
    message_id: int,
    speaker: str,
    text: str,
    created_at: datetime,
) -> None:
    """A `message` chunk of `sessions/<session_id>` without a history row."""
    step = await index_of(core).message_step(scope, session_id, speaker, text, created_at)
    await database(core).write(lambda conn: step(conn, message_id))


async def chunk_counts(core: MemoryCore, scope: ScopeKey) -> dict[str, int]:
    """Chunks of the scope by kind."""
    rows = await sql(
        core,
        "SELECT c.kind, COUNT(*) FROM chunks c JOIN scopes s ON s.id = c.scope_id"
        " WHERE s.key = ? GROUP BY c.kind",
        scope.value,
    )
    return {str(kind): int(n) for kind, n in rows}


async def note_used(
    core: MemoryCore, scope: ScopeKey, entry_ids: Sequence[str], session_id: str
) -> None:
    """What a chat turn records for the entries its reply used."""
    activations = core.memories.activations
    assert activations is not None
    await activations.record(scope, entry_ids, session_id, format_when(core.now()))


async def recent_messages(core: MemoryCore, scope: ScopeKey, limit: int) -> list[StoredMessage]:
    """The scope's newest messages (any session), oldest first."""
    rows = await sql(
        core,
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE scope = ? ORDER BY id DESC LIMIT ?",
        scope.value,
        limit,
    )
    return [message_from_row(r) for r in reversed(rows)]


def is_daily_note_fd(fd: int) -> bool:
    """Whether an open descriptor is a memory file under `memory/` (where fault injection
    into `os.write` aims: the notes, never SQLite's files)."""
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return False
    return target.endswith(".md") and "/memory/" in target


def candidate(
    key: int,
    text: str,
    *,
    kind: ChunkKind = ChunkKind.DAILY,
    lexical: float = 0.0,
    dense: float | None = None,
    created_at: datetime | None = None,
    path: str = "memory/2026-03-01.md",
) -> Candidate:
    """A ranking candidate made by hand, for the pure ranking steps' tests."""
    return Candidate(
        id=key,
        path=path,
        line_from=key,
        line_to=key,
        kind=kind,
        created_at=created_at,
        ref=None,
        text=text,
        tokens=" ".join(tokenize(text)),
        lexical=lexical,
        dense=dense,
    )


FACT_DAY = math.exp(-0.008)
"""What a day past the grace period multiplies a fact's score by (a fact's lambda, 0.008)."""


def believed(ids: list[str], scores: dict[str, float]) -> str:
    """The entry an update replaces: the highest score, the later one on a tie."""
    best = ids[0]
    for entry_id in ids:
        if scores[entry_id] >= scores[best]:
            best = entry_id
    return best


def bm25_score(
    query_terms: Sequence[str],
    doc_terms: Sequence[str],
    stats: CorpusStats,
    k1: float = K1,
    b: float = B,
) -> float:
    """BM25 of one document, written out term by term: the reference the product's one
    scorer (`bm25_scorer`) is checked against."""
    if not doc_terms:
        return 0.0
    counts: dict[str, int] = {}
    for term in doc_terms:
        counts[term] = counts.get(term, 0) + 1
    norm = k1 * (1.0 - b + b * len(doc_terms) / stats.avg_len)
    score = 0.0
    for term in dict.fromkeys(query_terms):
        tf = counts.get(term)
        if tf:
            n = stats.doc_freq.get(term, 1)
            score += idf(stats.docs, n) * tf * (k1 + 1.0) / (tf + norm)
    return score


def add_candidates(
    existing: Sequence[MemoryEntry], candidates: Iterable[Proposal], now: datetime
) -> MergeResult:
    """`apply_candidates` (a capture's fast path) on a copy of `existing`: what a capture
    would leave, without a store."""
    view = EntryView.of(existing)
    changes = apply_candidates(view, candidates, now)
    return MergeResult(entries=view.entries(), changes=changes)


def forget_what_texts_taught() -> None:
    """What a new process remembers of texts: nothing. Clears the per-process memos the
    long-term parse cache seeds (normalized forms, fact skeletons, named entities), so a
    test sees the cold start; the product never needs to, so it has no such reset."""
    matching._NORMS.clear()
    fact_keys._SKELETONS.clear()
    entities._NAMED.clear()
