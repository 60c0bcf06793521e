"""What both halves of bench/pg_scale_bench.py share: the bench's sizes and seed, and the
rows written straight into PostgreSQL (scopes, chunks by COPY, their finishing)."""

from __future__ import annotations

import io
import time
from collections.abc import Sequence
from pathlib import Path

import psycopg

from memory_core.base import text as mtext

SEED = 20261124
BENCH_CHUNKS = 100_000
FIRST_OTHERS = 1_000_000
FIRST_SCOPES = 1_000
POOL = 200_000
"""Distinct generated sentences the other scopes' chunks are drawn from."""
QUERIES = 200
PASSES = 3
COPY_BATCH = 200_000
SMALL_SCOPES = (1_000, 10_000)
"""Sizes of the extra scopes whose hybrid recall is timed beside the bench scope's."""
HYBRID_WARM_UP = 10
DENSE_K = 80
"""Neighbours of the dense search timed alone (recall_bench's DENSE_K)."""
PROBE = Path(__file__).resolve().parent / "pg_hybrid_probe.py"


def log(message: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", flush=True)


def tokens_of(texts: Sequence[str]) -> list[str]:
    return [" ".join(mtext.tokenize(t)) for t in texts]


def copy_rows(
    conn: psycopg.Connection[object],
    sid: int,
    first_id: int,
    texts: Sequence[str],
    tokens: Sequence[str],
    path: str,
) -> int:
    """COPY one scope's chunks; returns the next free id."""
    buffer = io.StringIO()
    for offset, (text, tok) in enumerate(zip(texts, tokens, strict=True)):
        line = offset + 1
        safe_text = text.replace("\\", "\\\\").replace("\t", " ").replace("\n", " ")
        buffer.write(
            f"{first_id + offset}\t{sid}\t{path}\t{line}\t{line}\tdaily\t"
            f"2026-03-01T12:00:00Z\t\\N\t{safe_text}\t{tok}\n"
        )
    buffer.seek(0)
    with (
        conn.cursor() as cursor,
        cursor.copy(
            "COPY chunks (id, scope_id, path, line_from, line_to, kind, created_at, ref, text,"
            " tokens) FROM STDIN"
        ) as copy,
    ):
        while chunk := buffer.read(1 << 20):
            copy.write(chunk)
    return first_id + len(texts)


def new_scope(conn: psycopg.Connection[object], key: str) -> int:
    row = conn.execute(
        "INSERT INTO scopes (key) VALUES (%s) ON CONFLICT (key) DO UPDATE SET key = excluded.key"
        " RETURNING id",
        (key,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def finish(conn: psycopg.Connection[object], sids: Sequence[int]) -> None:
    """Document frequencies and counters of freshly copied scopes, by SQL."""
    conn.execute(
        "INSERT INTO terms (scope_id, term, df) SELECT scope_id, t, COUNT(*) FROM"
        " (SELECT DISTINCT c.id, c.scope_id, t FROM chunks AS c,"
        " unnest(string_to_array(c.tokens, ' ')) AS t WHERE c.scope_id = ANY(%s)"
        " AND t <> '') AS occurrences GROUP BY scope_id, t",
        (list(sids),),
    )
    conn.execute(
        "UPDATE scopes AS s SET chunk_count = x.n, token_count = x.tokens FROM"
        " (SELECT scope_id, COUNT(*) AS n, SUM(cardinality(string_to_array(tokens, ' ')))"
        " AS tokens FROM chunks WHERE scope_id = ANY(%s) GROUP BY scope_id) AS x"
        " WHERE s.id = x.scope_id",
        (list(sids),),
    )
