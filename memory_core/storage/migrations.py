"""Numbered, append-only schema migrations for `.chatmem/index.sqlite3`, and, apart
(`JOURNAL_MIGRATIONS`, at the end), for the capture journal's `.chatmem/journal.sqlite3`.

Each migration runs once, inside the transaction that records it, so two processes opening
a new workspace at the same time cannot both apply it. Never edit a released migration:
add the next number. A migration is SQL, or a function of the connection for what SQL
cannot do (converting stored vectors, `m010`); either runs inside that transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from memory_core.base.sql import Connection
from memory_core.storage.scope_summaries import SCOPE_SUMMARIES
from memory_core.storage.shared_fts import one_table

Step: TypeAlias = str | Callable[[Connection], None]
"""What a migration runs: SQL statements, or a function given the connection."""
Migration: TypeAlias = tuple[str, Step]

MIGRATIONS: list[Migration] = []


def migration(name: str, step: Step) -> None:
    MIGRATIONS.append((name, step))


migration(
    "m001_audit",
    """
    CREATE TABLE audit (
        id INTEGER PRIMARY KEY,
        at TEXT NOT NULL,
        scope TEXT NOT NULL,
        entry_id TEXT NOT NULL,
        action TEXT NOT NULL,
        old_score REAL,
        new_score REAL,
        source TEXT NOT NULL,
        category TEXT,
        content TEXT,
        detail TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX audit_scope_at ON audit (scope, at);
    CREATE INDEX audit_scope_entry ON audit (scope, entry_id);
    CREATE TABLE extractions (
        scope TEXT NOT NULL,
        session_id TEXT NOT NULL,
        at TEXT NOT NULL,
        stats TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (scope, session_id)
    );
    CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        at TEXT NOT NULL,
        scope TEXT NOT NULL,
        kind TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX events_scope_kind ON events (scope, kind, at);
    """,
)


migration(
    "m002_index",
    """
    CREATE TABLE scopes (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,
        chunk_count INTEGER NOT NULL DEFAULT 0,
        token_count INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE files (
        path TEXT PRIMARY KEY,
        scope_id INTEGER NOT NULL REFERENCES scopes (id),
        mtime_ns INTEGER NOT NULL,
        size INTEGER NOT NULL,
        hash TEXT NOT NULL,
        kind TEXT NOT NULL
    );
    CREATE INDEX files_scope ON files (scope_id);
    CREATE TABLE chunks (
        id INTEGER PRIMARY KEY,
        scope_id INTEGER NOT NULL REFERENCES scopes (id),
        path TEXT NOT NULL,
        line_from INTEGER NOT NULL,
        line_to INTEGER NOT NULL,
        kind TEXT NOT NULL,
        created_at TEXT,
        ref TEXT,
        hidden INTEGER NOT NULL DEFAULT 0,
        text TEXT NOT NULL,
        tokens TEXT NOT NULL
    );
    CREATE INDEX chunks_scope_path ON chunks (scope_id, path);
    CREATE TABLE activations (
        scope TEXT NOT NULL,
        entry_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        at TEXT NOT NULL,
        PRIMARY KEY (scope, entry_id, session_id)
    );
    CREATE TABLE terms (
        scope_id INTEGER NOT NULL,
        term TEXT NOT NULL,
        df INTEGER NOT NULL,
        PRIMARY KEY (scope_id, term)
    ) WITHOUT ROWID;
    """,
)


migration(
    "m003_sessions",
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        scope TEXT NOT NULL,
        started_at TEXT NOT NULL,
        last_at TEXT NOT NULL,
        closed_at TEXT,
        status TEXT NOT NULL DEFAULT 'open'
            CHECK (status IN ('open', 'closed', 'extracted', 'extract_failed')),
        extract_attempts INTEGER NOT NULL DEFAULT 0,
        next_extract_at TEXT,
        flushed_at TEXT,
        stats TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX sessions_scope_status ON sessions (scope, status);
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        scope TEXT NOT NULL,
        session_id TEXT NOT NULL,
        role TEXT NOT NULL,
        speaker TEXT NOT NULL DEFAULT '',
        content TEXT NOT NULL,
        created_at TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        archived TEXT NOT NULL DEFAULT 'false' CHECK (archived IN ('false', 'pending', 'true')),
        archive_attempts INTEGER NOT NULL DEFAULT 0,
        archive_failed_at TEXT,
        archive_next_at TEXT,
        compacted INTEGER NOT NULL DEFAULT 0,
        meta TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX messages_scope ON messages (scope, id);
    CREATE INDEX messages_session ON messages (session_id, id);
    CREATE INDEX messages_archive ON messages (scope, archived, created_at);
    CREATE TABLE archive_runs (
        id INTEGER PRIMARY KEY,
        scope TEXT NOT NULL,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        moved INTEGER NOT NULL DEFAULT 0,
        summarized INTEGER NOT NULL DEFAULT 0,
        failed INTEGER NOT NULL DEFAULT 0,
        detail TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX archive_runs_scope ON archive_runs (scope, id);
    CREATE TABLE schedule_state (
        name TEXT PRIMARY KEY,
        last_run TEXT NOT NULL
    );
    """,
)

migration(
    "m004_turn_fields",
    # Archived turns are now tokenized without their 'HH:MM:SS who:' prefix and carry their
    # own time: every file is read again at the next sync (a forgotten stamp never matches).
    # A turn's neighbours are read by (scope, path, line) for the context window and for
    # the text its vector is made from.
    """
    UPDATE files SET mtime_ns = 0, size = -1, hash = '';
    CREATE INDEX chunks_scope_path_line ON chunks (scope_id, path, line_from);
    """,
)


migration(
    "m005_vectors",
    # Vectors of chunks for recall by meaning (memory_core/storage/vectors/rows.py). The scope
    # index orders a scope's vectors by chunk id (pages of a load read the table in
    # order) and covers the text hash, so a survey of what needs embedding never reads
    # the vector blobs. `vector_scopes.version` moves with every change to a scope's
    # vectors: a process holding them in memory reloads when another process moved it.
    """
    CREATE TABLE chunk_vectors (
        chunk_id INTEGER PRIMARY KEY,
        scope_id INTEGER NOT NULL,
        model TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        vec BLOB NOT NULL
    );
    CREATE INDEX chunk_vectors_scope ON chunk_vectors (scope_id, model, chunk_id, text_hash);
    CREATE TABLE embedding_cache (
        key TEXT PRIMARY KEY,
        vec BLOB NOT NULL
    );
    CREATE TABLE vector_scopes (
        scope_id INTEGER PRIMARY KEY,
        version INTEGER NOT NULL DEFAULT 0
    );
    """,
)


DELIVERIES = """
    CREATE TABLE deliveries (
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        at TEXT NOT NULL,
        PRIMARY KEY (channel, chat_id, message_id)
    );
    CREATE INDEX deliveries_at ON deliveries (at);
"""
"""The same on both backends (memory_core/storage/pg/migrations.py takes it from here)."""

migration(
    "m006_deliveries",
    # Inbound messages some process already took (memory_core/storage/deliveries.py): a message
    # delivered twice, to one process or to two, is answered once.
    DELIVERIES,
)


DELIVERY_OWNERS = """
    ALTER TABLE deliveries ADD COLUMN owner TEXT NOT NULL DEFAULT '';
    ALTER TABLE deliveries ADD COLUMN done INTEGER NOT NULL DEFAULT 1;
"""
"""The same on both backends."""

migration(
    "m007_delivery_owners",
    # Who took a delivery and whether it is answered: a message whose taker died before
    # answering is taken over by the next delivery (memory_core/storage/deliveries.py).
    DELIVERY_OWNERS,
)


PIECES = """
    UPDATE chunks SET piece = (
        SELECT COUNT(*) FROM chunks AS d WHERE d.scope_id = chunks.scope_id
        AND d.path = chunks.path AND d.line_from = chunks.line_from AND d.id < chunks.id
    ) WHERE EXISTS (
        SELECT 1 FROM chunks AS d WHERE d.scope_id = chunks.scope_id
        AND d.path = chunks.path AND d.line_from = chunks.line_from AND d.id <> chunks.id
    );
    UPDATE files SET mtime_ns = 0, size = -1, hash = ''
        WHERE path IN (SELECT path FROM chunks WHERE piece > 0);
    CREATE UNIQUE INDEX chunks_one_per_line ON chunks (scope_id, path, line_from, piece);
    UPDATE scopes SET
        chunk_count = (SELECT COUNT(*) FROM chunks WHERE scope_id = scopes.id),
        token_count = (
            SELECT COALESCE(SUM(length(tokens) - length(replace(tokens, ' ', ''))
                + CASE WHEN tokens <> '' THEN 1 ELSE 0 END), 0)
            FROM chunks WHERE scope_id = scopes.id
        );
"""
"""One chunk per (scope, path, line, piece), the same on both backends: chunks starting on
one line (pieces of a long paragraph, or rows doubled by two reindexes at once) are
numbered, the files holding them read again at the next sync (which replaces their
chunks, doubles gone), and the scopes' counters counted again."""

migration(
    "m008_one_chunk_per_line",
    # A piece number tells apart the chunks a long paragraph is cut into; with it, the
    # schema holds every other chunk to one row per line (memory_core/recall/index/writes.py).
    "ALTER TABLE chunks ADD COLUMN piece INTEGER NOT NULL DEFAULT 0;" + PIECES,
)


CHUNK_DATES = """
    ALTER TABLE chunks ADD COLUMN dates TEXT;
    CREATE INDEX chunks_scope_dates ON chunks (scope_id, substr(dates, 1, 10))
        WHERE dates <> '';
    UPDATE files SET mtime_ns = 0, size = -1, hash = '' WHERE kind IN ('daily', 'archive_raw');
"""
"""The days a chunk's text speaks of (memory_core/base/turn_dates.py), the same on both
backends: '' when it names none, NULL when its kind is not resolved so or it was stored
before this column. The daily notes and archive files are read again at the next sync,
which fills it; messages stored before get theirs at the next reindex
(`rebuild.fill_message_dates`). The index finds the chunks that name a day up to a
question's window (the encoding's first ten characters are its earliest day)."""

migration(
    "m009_chunk_dates",
    # A turn that says "last Friday" is found by a question about that Friday.
    CHUNK_DATES,
)


EMBEDDINGS = """
    CREATE TABLE embeddings (
        model TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        vec {blob} NOT NULL,
        PRIMARY KEY (model, text_hash)
    );
"""
"""Each vector once, by the model that made it and the hash of its text (float16 bytes,
memory_core/storage/vectors/codec.py); `{blob}` is each backend's bytes type."""

CONVERT_PAGE = 1_000
"""Chunk vectors read and converted per statement by `vectors_once`."""


def vectors_once(conn: Connection, blob: str) -> None:
    """Every chunk vector's float32 bytes moved into `embeddings` as float16, one row per
    (model, text hash) however many chunks share it; `chunk_vectors.vec` and
    `embedding_cache` are then dropped by the caller. A vector whose bytes are no float32
    vector loses its chunk vector (its chunk is embedded again). The cache's other rows,
    vectors of texts no chunk holds now, go: their key (a hash of model and text) says
    nothing of the text hash they would be found by."""
    from memory_core.storage.vectors.codec import MEMORY_BYTES, to_stored

    conn.execute(EMBEDDINGS.format(blob=blob))
    after = 0
    while True:
        page = conn.execute(
            "SELECT chunk_id, model, text_hash, vec FROM chunk_vectors WHERE chunk_id > ?"
            " ORDER BY chunk_id LIMIT ?",
            (after, CONVERT_PAGE),
        ).fetchall()
        if not page:
            return
        good = [r for r in page if len(r[3]) and len(r[3]) % MEMORY_BYTES == 0]
        conn.executemany(
            "INSERT INTO embeddings (model, text_hash, vec) VALUES (?, ?, ?)"
            " ON CONFLICT (model, text_hash) DO NOTHING",
            [(str(r[1]), str(r[2]), to_stored(bytes(r[3]))) for r in good],
        )
        if len(good) < len(page):
            kept = {int(r[0]) for r in good}
            conn.executemany(
                "DELETE FROM chunk_vectors WHERE chunk_id = ?",
                [(int(r[0]),) for r in page if int(r[0]) not in kept],
            )
        after = int(page[-1][0])


VECTOR_SCOPES_MOVED = "UPDATE vector_scopes SET version = version + 1"
"""After `vectors_once`: a process holding matrices loads them again."""


def _vectors_once_sqlite(conn: Connection) -> None:
    vectors_once(conn, "BLOB")
    # SQLite drops a column by rewriting the table anyway: build it without `vec`.
    for statement in (
        "CREATE TABLE chunk_vectors_once (chunk_id INTEGER PRIMARY KEY,"
        " scope_id INTEGER NOT NULL, model TEXT NOT NULL, text_hash TEXT NOT NULL)",
        "INSERT INTO chunk_vectors_once (chunk_id, scope_id, model, text_hash)"
        " SELECT chunk_id, scope_id, model, text_hash FROM chunk_vectors",
        "DROP TABLE chunk_vectors",
        "ALTER TABLE chunk_vectors_once RENAME TO chunk_vectors",
        "CREATE INDEX chunk_vectors_scope ON chunk_vectors (scope_id, model, chunk_id, text_hash)",
        "DROP TABLE embedding_cache",
        VECTOR_SCOPES_MOVED,
    ):
        conn.execute(statement)


migration(
    "m010_vectors_once",
    # Each vector stored once and in half the bytes (memory_core/storage/vectors/rows.py):
    # it was a float32 row of its chunk plus the same bytes again in `embedding_cache`,
    # 8.3 KB a 512-d vector on disk (each row over half a page). Crash-safe as every
    # migration: it runs in the transaction that records it. The freed pages are reused
    # by later writes; `VACUUM` gives them back to the disk.
    _vectors_once_sqlite,
)


INDEX_META = """
    CREATE TABLE index_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
"""
"""Facts about how the index was made, the same on both backends: `tokenizer`, the
version of the tokenizer its terms come from (memory_core/recall/index/retokenize.py)."""

migration(
    "m011_index_meta",
    # An index made by another tokenizer is tokenized again at its next open.
    INDEX_META,
)


CHUNK_DATES_AGAIN = """
    UPDATE chunks SET dates = NULL WHERE kind = 'message';
    CREATE INDEX chunks_dates_unresolved ON chunks (id) WHERE kind = 'message' AND dates IS NULL;
    UPDATE files SET mtime_ns = 0, size = -1, hash = '' WHERE kind IN ('daily', 'archive_raw');
"""
"""The days of every turn resolved again, after a change of what `base/turn_dates.py`
reads (this one: the starts durations point at, "two years now", "三年前"): message chunks
forget theirs, and the next open fills them (`rebuild.fill_message_dates`, from
`SearchIndex.sync_opened`; the partial index finds them at once, and none at all once
filled); daily notes and archive files are read again by each scope's next sync. A later change
of the resolver is a further step of this kind, the same on both backends."""

migration(
    "m012_chunk_dates_starts",
    # "I've had them for 3 years now" is a turn about 2019 too.
    CHUNK_DATES_AGAIN,
)

SPEAKER_IDS = "ALTER TABLE messages ADD COLUMN speaker_id TEXT;"
"""Who said a message by the platform's id of the sender (normalised as scope keys'
ids are), beside the name the platform showed: `chatmem erase --person` then finds a
member's group lines by id, whatever name they used. NULL on every older row (and on
messages no person sent), which an erasure finds by name as before. The same on both
backends."""

migration("m013_message_speaker_ids", SPEAKER_IDS)

migration(
    "m014_one_fts_table",
    # Every scope's postings in one FTS5 table (memory_core/storage/shared_fts.py): the
    # schema no longer grows with the scopes, nor a reindex with their square.
    one_table,
)

migration(
    "m015_scope_summaries",
    # What `chatmem scopes` and `stats` show of each scope, kept with its files' stamp:
    # a listing of 10 000 scopes reads only the files that changed.
    SCOPE_SUMMARIES,
)

FEWER_CHUNK_INDEXES = "DROP INDEX IF EXISTS chunks_scope_path_line;"
"""A prefix of `chunks_one_per_line` (scope, path, line, piece), which answers every
lookup it did: one more b-tree to change at every insert, delete and line move (a write
of a 100 000-entry file moves tens of thousands of chunks). `chunks_scope_path` stays:
its rows are in (path, id) order, which a vector pass pages by."""

migration(
    "m016_fewer_chunk_indexes",
    # An index the unique one already covers, no longer kept up at every line move.
    FEWER_CHUNK_INDEXES,
)


LONG_TERM_BY_ENTRY = """
    DROP INDEX chunks_one_per_line;
    UPDATE chunks SET piece = (
        SELECT COUNT(*) FROM chunks AS d WHERE d.scope_id = chunks.scope_id
        AND d.path = chunks.path AND d.ref = chunks.ref AND d.kind = 'long_term'
        AND d.id < chunks.id
    ) WHERE kind = 'long_term' AND (scope_id, path, ref) IN (
        SELECT scope_id, path, ref FROM chunks WHERE kind = 'long_term'
        GROUP BY scope_id, path, ref HAVING COUNT(*) > 1
    );
    UPDATE files SET mtime_ns = 0, size = -1, hash = ''
        WHERE path IN (SELECT path FROM chunks WHERE kind = 'long_term' AND piece > 0);
    CREATE UNIQUE INDEX chunks_one_per_line ON chunks (scope_id, path, line_from, piece)
        WHERE kind <> 'long_term';
    CREATE UNIQUE INDEX chunks_one_per_entry ON chunks (scope_id, path, ref, piece)
        WHERE kind = 'long_term';
"""
"""A long-term chunk is one per entry (its ref), not one per line: a write of a 100 000-entry
file moves tens of thousands of chunks to new lines, and a line in a unique index made
each move two row writes and four index changes (parked off the line, then placed); now
it is one row write, no index. Chunks of other files stay one per (line, piece). Doubled
entries (none should be) are numbered apart and their files read again at the next sync,
which replaces their chunks."""

migration(
    "m017_long_term_by_entry",
    # Long-term chunks keyed by their entry; their lines move without touching an index.
    LONG_TERM_BY_ENTRY,
)


LONG_TERM_LINES = """
    CREATE TABLE long_term_lines (
        chunk_id INTEGER PRIMARY KEY,
        scope_id INTEGER NOT NULL,
        path TEXT NOT NULL,
        line_from INTEGER NOT NULL,
        line_to INTEGER NOT NULL
    );
    CREATE INDEX long_term_lines_file ON long_term_lines (scope_id, path);
    INSERT INTO long_term_lines (chunk_id, scope_id, path, line_from, line_to)
        SELECT id, scope_id, path, line_from, line_to FROM chunks WHERE kind = 'long_term';
    UPDATE chunks SET line_from = 0, line_to = 0 WHERE kind = 'long_term';
"""
"""A long-term chunk's lines in a narrow table of their own
(memory_core/recall/index/long_term_lines.py): a re-sort of a 100 000-entry file moves
nearly every entry, and each move rewrote a whole chunk row (text and tokens) through the
write-ahead log; now it rewrites five small values. The chunk's own columns are 0."""

migration(
    "m018_long_term_lines",
    # Long-term chunks' lines apart from their text: a move writes a narrow row.
    LONG_TERM_LINES,
)


JOURNAL_MIGRATIONS: list[Migration] = [
    (
        "m001_captures",
        # Captures acknowledged before MEMORY.md is rewritten (memory_core/storage/journal.py).
        # AUTOINCREMENT: a sequence number is never handed out twice, even after the rows
        # before it were deleted. IF NOT EXISTS, in this first step alone: a journal made
        # before this list existed holds this very table (the journal created it itself
        # at every open) and no `_migrations`; it is adopted as it is, rows and all.
        """
        CREATE TABLE IF NOT EXISTS captures (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            owner TEXT NOT NULL,
            scope TEXT NOT NULL,
            payload TEXT NOT NULL
        );
        """,
    ),
]
"""Numbered migrations of the capture journal's own file, `.chatmem/journal.sqlite3`,
recorded in that file's `_migrations`. A file of its own on purpose (journal.py): it runs
with `synchronous = FULL`, so an acknowledged capture survives a power cut, at the cost
of one fsync per capture that the index database should not pay for its every write, and
a capture's commit never waits behind a long index transaction (a reindex, a purge). On
PostgreSQL the same table is a migration of the shared database (`m004_captures`)."""
