"""The one part of the index that differs by backend: how a scope's term postings are
kept and how they choose the BM25 candidates.

Both return the exact top N of the query's BM25 (`topk.Scoring`: its terms' weights ×
idf, k1 and b as the ranking uses them; ties by chunk id), every term counted. SQLite
keeps one FTS5 table for every scope (`fts_scoped`) over the pre-tokenized text, each
term prefixed by its scope's id (`12xtea`), as PostgreSQL keys its postings by (scope,
term): a scope's postings are its own, and the schema does not grow with the scopes.
Each term's postings (chunk, term frequency, chunk length) are read from FTS5's own index
(`fts5vocab` instances and the table's `docsize`), kept for the connection's next
searches (`postings_cache.py`), and pruned by MaxScore (`topk.py`), so the long postings
of common words are read only when they can change the top N.
PostgreSQL has no FTS5 and no jieba in the server, so its `chunks_postings` GIN index
(memory_core/storage/pg/migrations.py) maps each (scope, term) to its chunks, and every
chunk holding a term is scored in SQL by the same expression (`Scoring.part`). Both then
hand the candidates to the same pure ranking (`pipeline.rank`), so a query scores the
same on both. Everything else of the index (chunks, terms, files, counters) is shared SQL.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from memory_core.base.sql import Connection, FullText
from memory_core.recall.index.long_term_lines import LINE_FROM, LINE_TO
from memory_core.recall.index.postings_cache import Arrays, cache_of, known_cache
from memory_core.recall.index.topk import Scoring, exact_top
from memory_core.storage.shared_fts import FTS_DDL, FTS_TABLE, fill_shared, scope_range, scoped

CANDIDATE_COLUMNS = (
    f"c.id, c.path, {LINE_FROM}, {LINE_TO}, c.tokens, c.text, c.kind, c.created_at, c.ref, c.dates"
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
        scoring: Scoring,
        filters: list[str],
        params: list[object],
        wanted: int,
    ) -> list[Any]:
        """The scope's visible chunks (and `filters`') holding any of the query's terms
        but its boosts (`Scoring.finders`): the exact best `wanted` by `scoring` (ties:
        lower id first), best first."""
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
    """SQLite: one contentless FTS5 table (`FTS_TABLE`) for every scope, its terms
    prefixed by their scope (`scoped`), so the schema holds a fixed number of objects
    whatever the number of scopes."""

    def scope_created(self, conn: Connection, sid: int) -> None:
        del sid
        if (cache := known_cache(conn)) is not None:
            cache.clear()  # rare: a scope's id is never read before it exists

    def new_ids(self, conn: Connection, count: int) -> list[int]:
        # The write transaction holds SQLite's only write lock: nobody else allocates.
        first = int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM chunks").fetchone()[0]) + 1
        return list(range(first, first + count))

    def added(self, conn: Connection, rows: Sequence[tuple[int, int, str]]) -> None:
        conn.executemany(
            f"INSERT INTO {FTS_TABLE} (rowid, tokens) VALUES (?, ?)",
            [(chunk_id, scoped(sid, tokens)) for chunk_id, sid, tokens in rows],
        )
        if (cache := known_cache(conn)) is not None:
            by_scope: dict[int, list[tuple[int, str]]] = {}
            for chunk_id, sid, tokens in rows:
                by_scope.setdefault(sid, []).append((chunk_id, tokens))
            for sid, fts_rows in by_scope.items():
                cache.added(sid, fts_rows)

    def removed(self, conn: Connection, sid: int, rows: Sequence[tuple[int, str]]) -> None:
        if (cache := known_cache(conn)) is not None:
            cache.removed(sid, (tokens for _, tokens in rows))
        conn.executemany(
            f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}, rowid, tokens) VALUES ('delete', ?, ?)",
            [(chunk_id, scoped(sid, tokens)) for chunk_id, tokens in rows],
        )

    def candidates(
        self,
        conn: Connection,
        sid: int,
        scoring: Scoring,
        filters: list[str],
        params: list[object],
        wanted: int,
    ) -> list[Any]:
        """Postings from FTS5's index, pruned by MaxScore (`topk.exact_top`): only the
        scope's own scoped terms are read, and the rows read back by id through the
        scope (`c.scope_id` again), so no other scope's chunk can be a candidate."""
        vocab = "temp.chatmem_instances"
        # One per connection; FTS5 looks its table up at each query.
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {vocab} USING fts5vocab(main, {FTS_TABLE},"
            " instance)"
        )
        # Each occurrence (in chunk order, so a chunk's are adjacent: its term frequency)
        # with the chunk's length from FTS5's own `docsize`, a one-byte varint below 128
        # tokens; a longer chunk's is given as 0, which only loosens its bound. As two
        # strings: one value a row made into Python objects cost as much as the read.
        read = (
            "SELECT group_concat(v.doc), group_concat(CASE WHEN length(d.sz) = 1"
            f" THEN COALESCE(unicode(d.sz), 0) ELSE 0 END) FROM {vocab} AS v"
            f" JOIN {FTS_TABLE}_docsize AS d ON d.id = v.doc WHERE v.term = ?"
        )
        prefix = f"{int(sid)}x"

        cache = cache_of(conn)

        import numpy as np

        def read_term(term: str) -> Arrays:
            docs, lengths = conn.execute(read, (prefix + term,)).fetchone()
            if not docs:
                empty = np.zeros(0, dtype=np.int64)
                return (empty, empty, empty)
            every = np.fromstring(str(docs), dtype=np.int64, sep=",")
            # Adjacent per chunk (instances come in chunk order): runs are frequencies.
            starts = np.flatnonzero(np.r_[True, every[1:] != every[:-1]])
            tf = np.diff(np.r_[starts, len(every)])
            return (every[starts], tf, np.fromstring(str(lengths), dtype=np.int64, sep=",")[starts])

        def postings(term: str) -> Arrays:
            return cache.get(sid, term, read_term)

        # `+`: look the ids up by rowid, not through the scope's index (see `by_ids`).
        where = " AND ".join(["+c.scope_id = ?", "+c.hidden = 0", *filters])

        def fetch(ids: list[int]) -> list[Any]:
            sql = (
                f"SELECT {CANDIDATE_COLUMNS} FROM chunks AS c"
                f" WHERE c.id IN ({','.join('?' * len(ids))}) AND {where}"
            )
            return conn.execute(sql, [*ids, sid, *params]).fetchall()

        def admit(ids: list[int]) -> set[int]:
            sql = (
                "SELECT c.id FROM chunks AS c WHERE c.id IN (SELECT value FROM json_each(?))"
                f" AND {where}"
            )
            return {int(r[0]) for r in conn.execute(sql, [json.dumps(ids), sid, *params])}

        return exact_top(scoring, wanted, postings, fetch, admit)

    def reset(self, conn: Connection) -> None:
        """The shared table emptied at once (page-level work) and the kept
        message chunks put straight back: work in the size of what is kept, whatever the
        number of scopes."""
        # Deleting row by row costs more than emptying the table, which is page-level
        # work (SQLite's truncate optimization): the messages are put aside and back,
        # same ids.
        if (cache := known_cache(conn)) is not None:
            cache.clear()
        conn.execute(
            "CREATE TEMP TABLE kept_messages AS SELECT * FROM chunks WHERE kind = 'message'"
        )
        _empty_chunks(conn)
        conn.execute("INSERT INTO chunks SELECT * FROM temp.kept_messages")
        conn.execute("DROP TABLE temp.kept_messages")
        # Dropped and made again rather than `delete-all`: as fast, and a damaged table
        # is repaired by the reindex.
        conn.execute(f"DROP TABLE IF EXISTS {FTS_TABLE}")
        conn.execute(FTS_DDL)
        fill_shared(conn)

    def count_terms(self, conn: Connection, sid: int) -> None:
        """From FTS5's own vocabulary (the scope's range of it) rather than counted row
        by row in Python."""
        conn.execute("DELETE FROM terms WHERE scope_id = ?", (sid,))
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.chatmem_rows USING fts5vocab(main,"
            f" {FTS_TABLE}, row)"
        )
        low, high = scope_range(sid)
        conn.execute(
            "INSERT INTO terms (scope_id, term, df) SELECT ?, substr(term, ?), doc"
            " FROM temp.chatmem_rows WHERE term >= ? AND term < ?",
            (sid, len(low) + 1, low, high),
        )

    def hold_files(self, conn: Connection, paths: Sequence[str]) -> None:
        del conn, paths  # the write transaction holds SQLite's only write lock already

    def exclude_writers(self, conn: Connection) -> None:
        del conn  # the write transaction holds SQLite's only write lock already


def _empty_chunks(conn: Connection) -> None:
    """`DELETE FROM chunks`, by pages: with foreign keys on, SQLite deletes the rows of a
    table holding a foreign key one by one, each index updated (a tenth of a reindex's
    writer thread at 100 000 chunks). The table is dropped and made again from its own
    schema text (`sqlite_master`: its columns and indexes as every migration left them),
    which frees its pages whole; the same rows, ids and schema follow. Where ANALYZE
    statistics exist (the product writes none), they would go with the table: there the
    rows are deleted as before."""
    schema = [
        str(row[0])
        for row in conn.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'chunks' AND sql IS NOT NULL"
            " ORDER BY type = 'index', rowid"
        )
    ]
    analyzed = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE name LIKE 'sqlite_stat%' LIMIT 1"
    ).fetchone()
    if analyzed is not None or not schema or not schema[0].startswith("CREATE TABLE"):
        conn.execute("DELETE FROM chunks")
        return
    conn.execute("DROP TABLE chunks")
    for statement in schema:
        conn.execute(statement)


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
        scoring: Scoring,
        filters: list[str],
        params: list[object],
        wanted: int,
    ) -> list[Any]:
        """The GIN index finds the scope's chunks holding any term (keys hashed with the
        scope id, and `c.scope_id` again in the filter); every one is scored by
        `Scoring.part`'s expression, operation for operation, so the top N is exact and
        the one SQLite's pruned search finds."""
        unique = [t for t in scoring.weights if t]
        finders = scoring.finders
        if not finders:
            return []
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
            f"CASE WHEN x.t{i} > 0 THEN ? * x.t{i} * ? / (x.t{i} + ? * (? + ? * x.n / ?))"
            " ELSE 0 END"
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
            f" AS x WHERE {where} ORDER BY {score} DESC, c.id LIMIT ?"
        )
        k1, b = scoring.k1, scoring.b
        per_term = [
            value
            for t in unique
            for value in (scoring.weights[t], k1 + 1.0, k1, 1.0 - b, b, scoring.avg_len)
        ]
        return conn.execute(
            sql, [*unique, sid, " ".join(finders), sid, *params, *per_term, wanted]
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


_BY_FULL_TEXT: dict[FullText, Postings] = {"fts5": Fts5Postings(), "gin": GinPostings()}


def postings(conn: Connection) -> Postings:
    """The postings of the full-text index `conn`'s schema holds."""
    return _BY_FULL_TEXT[conn.dialect.full_text]
