"""The one part of the index that differs by backend: how a scope's term postings are
kept and how they choose BM25 candidates.

SQLite keeps a per-scope FTS5 table (`fts_<scope id>`) over the pre-tokenized text and
lets FTS5's `rank` (bm25) pick candidates. PostgreSQL has no FTS5 and no jieba in the
server, so its `chunks_postings` GIN index (memory_core/storage/pg/migrations.py) maps each
(scope, term) to its chunks, and the candidates are ranked in SQL by the very formula
FTS5's bm25() uses (k1 1.2, b 0.75, idf `log((N - n + 0.5) / (n + 0.5))` floored at
1e-6), over the same per-scope statistics (`scopes`, `terms`). Both then hand the
candidates to the same pure ranking (`pipeline.rank`), so a query scores the same on
both. Everything else of the index (chunks, terms, files, counters) is shared SQL.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

from memory_core.base.sql import Connection
from memory_core.recall.index.ranking import CorpusStats, fts_query

FTS5_K1 = 1.2
FTS5_B = 0.75
"""The parameters of FTS5's bm25() as the `rank` column uses it (its defaults)."""
CANDIDATE_COLUMNS = (
    "c.id, c.path, c.line_from, c.line_to, c.tokens, c.text, c.kind, c.created_at, c.ref, c.dates"
)
"""What a candidate query returns of each chunk, in this order."""


class Postings(Protocol):
    def scope_created(self, conn: Connection, sid: int) -> None:
        """A new scope: whatever its postings need."""

    def new_ids(self, conn: Connection, count: int) -> list[int]:
        """Ids for `count` new chunks, inside the caller's write transaction."""
        ...

    def added(self, conn: Connection, rows: Sequence[tuple[int, int, str]]) -> None:
        """(chunk id, scope id, tokens) just inserted into `chunks`."""

    def removed(self, conn: Connection, sid: int, rows: Sequence[tuple[int, str]]) -> None:
        """(chunk id, tokens) about to be deleted from `chunks`."""

    def candidates(
        self,
        conn: Connection,
        sid: int,
        terms: Sequence[str],
        stats: CorpusStats,
        filters: list[str],
        params: list[object],
        wanted: int,
    ) -> list[Any]:
        """The scope's visible chunks holding any of `terms`, best `wanted` by bm25."""
        ...

    def reset(self, conn: Connection) -> None:
        """Every file-derived chunk gone (rebuild); message chunks, their postings and
        the scopes' counters kept right."""

    def count_terms(self, conn: Connection, sid: int) -> None:
        """The scope's document frequencies (`terms`) made again from its chunks."""

    def hold_files(self, conn: Connection, paths: Sequence[str]) -> None:
        """Before a transaction replaces the chunks of `paths`: it waits for every other
        one replacing any of them, each taking the files in one order. Two replacements
        of a file that see different rows of it (one committed between their reads)
        could otherwise each hold rows the other must delete or insert over."""

    def exclude_writers(self, conn: Connection) -> None:
        """A rebuild's step that rewrites a whole table (its reset, a scope's term
        counts) waits for the writers of chunks in progress and keeps new ones out
        until it commits: it takes its locks in their order, never deadlocks them."""


class Fts5Postings:
    """SQLite: an FTS5 table per scope, with `chunks` as its external content."""

    def scope_created(self, conn: Connection, sid: int) -> None:
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS fts_{int(sid)} USING fts5(tokens,"
            " content='chunks', content_rowid='id', tokenize='unicode61 remove_diacritics 0')"
        )

    def new_ids(self, conn: Connection, count: int) -> list[int]:
        # The write transaction holds SQLite's only write lock: nobody else allocates.
        first = int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM chunks").fetchone()[0]) + 1
        return list(range(first, first + count))

    def added(self, conn: Connection, rows: Sequence[tuple[int, int, str]]) -> None:
        by_scope: dict[int, list[tuple[int, str]]] = {}
        for chunk_id, sid, tokens in rows:
            by_scope.setdefault(sid, []).append((chunk_id, tokens))
        for sid, fts_rows in by_scope.items():
            conn.executemany(f"INSERT INTO fts_{int(sid)} (rowid, tokens) VALUES (?, ?)", fts_rows)

    def removed(self, conn: Connection, sid: int, rows: Sequence[tuple[int, str]]) -> None:
        table = f"fts_{int(sid)}"
        conn.executemany(
            f"INSERT INTO {table} ({table}, rowid, tokens) VALUES ('delete', ?, ?)", rows
        )

    def candidates(
        self,
        conn: Connection,
        sid: int,
        terms: Sequence[str],
        stats: CorpusStats,
        filters: list[str],
        params: list[object],
        wanted: int,
    ) -> list[Any]:
        """The scope is the FTS table itself (and `c.scope_id` again in the join), so no
        other scope's chunk can be a candidate. With no filter beyond the scope, FTS5
        takes its top-N before the join."""
        del stats  # FTS5 keeps its own
        match = fts_query(terms)
        table = f"fts_{int(sid)}"
        where = " AND ".join(["c.scope_id = ?", "c.hidden = 0", *filters])
        if not filters:
            sql = (
                f"SELECT {CANDIDATE_COLUMNS} FROM (SELECT rowid, rank FROM {table} WHERE {table}"
                f" MATCH ? ORDER BY rank LIMIT ?) AS f JOIN chunks AS c ON c.id = f.rowid"
                f" WHERE {where} ORDER BY f.rank"
            )
            return conn.execute(sql, [match, wanted, sid, *params]).fetchall()
        sql = (
            f"SELECT {CANDIDATE_COLUMNS} FROM {table} AS f JOIN chunks AS c ON c.id = f.rowid"
            f" WHERE {table} MATCH ? AND {where} ORDER BY f.rank LIMIT ?"
        )
        return conn.execute(sql, [match, sid, *params, wanted]).fetchall()

    def reset(self, conn: Connection) -> None:
        """Every scope's FTS table is dropped and made again (far faster than deleting its
        postings one by one), and the kept message chunks go straight back into it."""
        # Deleting row by row costs more than emptying the table, which is page-level
        # work (SQLite's truncate optimization): the messages are put aside and back,
        # same ids.
        conn.execute(
            "CREATE TEMP TABLE kept_messages AS SELECT * FROM chunks WHERE kind = 'message'"
        )
        conn.execute("DELETE FROM chunks")
        conn.execute("INSERT INTO chunks SELECT * FROM temp.kept_messages")
        conn.execute("DROP TABLE temp.kept_messages")
        for (sid,) in conn.execute("SELECT id FROM scopes").fetchall():
            conn.execute(f"DROP TABLE IF EXISTS fts_{int(sid)}")
            self.scope_created(conn, int(sid))
        kept = [int(r[0]) for r in conn.execute("SELECT DISTINCT scope_id FROM chunks")]
        for sid in kept:
            conn.execute(
                f"INSERT INTO fts_{sid} (rowid, tokens) SELECT id, tokens FROM chunks"
                " WHERE scope_id = ? ORDER BY id",
                (sid,),
            )

    def count_terms(self, conn: Connection, sid: int) -> None:
        """From FTS5's own vocabulary rather than counted row by row in Python."""
        conn.execute("DELETE FROM terms WHERE scope_id = ?", (sid,))
        conn.execute(f"CREATE VIRTUAL TABLE temp.vocab_{sid} USING fts5vocab(main, fts_{sid}, row)")
        conn.execute(
            f"INSERT INTO terms (scope_id, term, df) SELECT ?, term, doc FROM temp.vocab_{sid}",
            (sid,),
        )
        conn.execute(f"DROP TABLE temp.vocab_{sid}")

    def hold_files(self, conn: Connection, paths: Sequence[str]) -> None:
        del conn, paths  # the write transaction holds SQLite's only write lock already

    def exclude_writers(self, conn: Connection) -> None:
        del conn  # the write transaction holds SQLite's only write lock already


class GinPostings:
    """PostgreSQL: the `chunks_postings` expression index; nothing to write besides the
    chunk row itself."""

    def scope_created(self, conn: Connection, sid: int) -> None:
        del conn, sid

    def new_ids(self, conn: Connection, count: int) -> list[int]:
        # Values of the identity's sequence: unique across processes without a lock.
        return [
            int(r[0])
            for r in conn.execute(
                "SELECT nextval(pg_get_serial_sequence('chunks', 'id')) FROM generate_series(1, ?)",
                (count,),
            )
        ]

    def added(self, conn: Connection, rows: Sequence[tuple[int, int, str]]) -> None:
        del conn, rows

    def removed(self, conn: Connection, sid: int, rows: Sequence[tuple[int, str]]) -> None:
        del conn, sid, rows

    def candidates(
        self,
        conn: Connection,
        sid: int,
        terms: Sequence[str],
        stats: CorpusStats,
        filters: list[str],
        params: list[object],
        wanted: int,
    ) -> list[Any]:
        """The GIN index finds the scope's chunks holding any term (keys hashed with the
        scope id, and `c.scope_id` again in the filter); each is ranked by FTS5's bm25
        so the candidates are the ones SQLite's FTS5 would pick."""
        unique = list(dict.fromkeys(t for t in terms if t))
        if not unique:
            return []
        weights = [fts5_idf(stats.docs, stats.doc_freq.get(t, 0)) * (FTS5_K1 + 1.0) for t in unique]
        # norm = k1 * (1 - b + b * dl / avgdl) = flat + per_token * dl
        flat = FTS5_K1 * (1.0 - FTS5_B)
        per_token = FTS5_K1 * FTS5_B / max(stats.avg_len, 1e-9)
        # `c.scope_id + 0`: the postings' keys hold the scope already; on `c.scope_id`
        # the planner ANDed them with the scope's index, 100 000 rows read for nothing
        # (2-3 ms at 100 000 chunks). `OFFSET 0`: each row's tokens are split, and each
        # term counted, once (inlined, the planner repeated both in the filter and the
        # score). One sum over the terms (in their order, as SUM added them) rather
        # than an aggregate over `unnest`: about 3 us a row where the query costs what
        # its rows do (a term in 2 000 of 100 000 chunks: 14 ms before, 6 ms after).
        counts = ", ".join(
            f"cardinality(array_positions(d.doc, ?::text))::float8 AS t{i}"
            for i in range(len(unique))
        )
        score = " + ".join(
            f"CASE WHEN x.t{i} > 0 THEN ? * x.t{i} / (x.t{i} + ? + ? * x.n) ELSE 0 END"
            for i in range(len(unique))
        )
        where = " AND ".join(
            [
                "chatmem_postings(c.scope_id, c.tokens) && chatmem_postings(?, ?)",
                "c.scope_id + 0 = ?",
                "c.hidden = 0",
                *filters,
            ]
        )
        sql = (
            f"SELECT {CANDIDATE_COLUMNS} FROM chunks AS c"
            " CROSS JOIN LATERAL (SELECT string_to_array(c.tokens, ' ') AS doc OFFSET 0) AS d"
            f" CROSS JOIN LATERAL (SELECT {counts}, cardinality(d.doc)::float8 AS n OFFSET 0)"
            f" AS x WHERE {where} ORDER BY NULLIF({score}, 0) DESC NULLS LAST, c.id LIMIT ?"
        )
        per_term = [value for w in weights for value in (w, flat, per_token)]
        return conn.execute(
            sql, [*unique, sid, " ".join(unique), sid, *params, *per_term, wanted]
        ).fetchall()

    def reset(self, conn: Connection) -> None:
        conn.execute("DELETE FROM chunks WHERE kind <> 'message'")

    def hold_files(self, conn: Connection, paths: Sequence[str]) -> None:
        # Transaction-level advisory locks, one per path (hashed within the schema), taken
        # in the order of their keys before any row lock: a cycle cannot form.
        if paths:
            conn.execute(
                "SELECT pg_advisory_xact_lock(k) FROM (SELECT DISTINCT hashtextextended("
                "current_schema() || ':index file:' || p, 0) AS k FROM unnest(?::text[]) AS p"
                " ORDER BY k) AS keys",
                (list(paths),),
            ).fetchall()

    def exclude_writers(self, conn: Connection) -> None:
        # Every writer touches `chunks` first among the index's tables: waiting here,
        # before any row lock, orders this transaction after them (and two rebuilds).
        conn.execute("LOCK TABLE chunks IN SHARE ROW EXCLUSIVE MODE")

    def count_terms(self, conn: Connection, sid: int) -> None:
        conn.execute("DELETE FROM terms WHERE scope_id = ?", (sid,))
        conn.execute(
            "INSERT INTO terms (scope_id, term, df) SELECT ?, t, COUNT(*) FROM"
            " (SELECT DISTINCT c.id, t FROM chunks AS c,"
            " unnest(string_to_array(c.tokens, ' ')) AS t WHERE c.scope_id = ? AND t <> '')"
            " AS occurrences GROUP BY t"
            # A writer may add a term of the scope meanwhile: its row is counted over.
            " ON CONFLICT (scope_id, term) DO UPDATE SET df = excluded.df",
            (sid, sid),
        )


def fts5_idf(docs: int, containing: int) -> float:
    """FTS5's bm25 idf: the classic form, floored at 1e-6 for a term in half the rows.

    Defined for any counts: the statistics are kept by concurrent writers and may lag
    the rows for a moment (a term counted in more rows than the scope holds, a negative
    count), and a query must rank on regardless, never fail on a logarithm."""
    docs = max(docs, 0)
    containing = min(max(containing, 0), docs)
    ratio = (docs - containing + 0.5) / (containing + 0.5)
    value = math.log(ratio) if ratio > 0 else 0.0
    return value if value > 0 else 1e-6


_BY_BACKEND: dict[str, Postings] = {"sqlite": Fts5Postings(), "postgres": GinPostings()}


def postings(conn: Connection) -> Postings:
    """The postings of `conn`'s backend."""
    return _BY_BACKEND[conn.backend]
