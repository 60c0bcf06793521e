"""Bringing a stored index to the running tokenizer (`text.TOKENIZER_VERSION`).

The index stores terms (`chunks.tokens`, the FTS5 rows, `terms.df`, the scopes' token
counts), so a query tokenized by a newer rule than its documents would miss what they
hold. The version that made them is kept in `index_meta` (migration m011 on SQLite,
m015 on PostgreSQL); `SearchIndex` compares it once per process, at its first use of
the database, and on a mismatch every chunk is tokenized again here, in place, from its
stored text (what the write path tokenized: a turn without its speaker, see
`index_text`), in one transaction: the index is never half old, half new. Files are not
read again, and vectors are kept (they are made from the text, which does not change).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory_core.base.chunks import ChunkKind
from memory_core.base.sql import Connection
from memory_core.base.text import TOKENIZER_VERSION, tokenize
from memory_core.recall.index.postings import postings
from memory_core.recall.index.rerank import turn_body
from memory_core.recall.index.writes import Tally

TOKENIZER_KEY = "tokenizer"
PAGE = 2_000
"""Chunks read, tokenized and written at a time (the transaction is one all the same)."""
_ARCHIVED_TURN = re.compile(r"^(\d{2}):(\d{2}):(\d{2}) ([^:\n]{1,64}): ")
"""`chunking._TURN`: the prefix an archived turn is tokenized without."""


def stored_version(conn: Connection) -> int | None:
    """The tokenizer version the index's terms were made by; None for an index made
    before versions were kept (version 1) or a new one."""
    row = conn.execute("SELECT value FROM index_meta WHERE key = ?", (TOKENIZER_KEY,)).fetchone()
    return int(row[0]) if row is not None else None


def index_text(kind: str, text: str, label: str | None) -> str:
    """What the write path tokenized of a stored chunk: a session message without its
    'label: ' (`label` is its speaker or role, None when its history row is gone), an
    archived turn without its 'HH:MM:SS who: ', any other chunk whole."""
    if kind == ChunkKind.MESSAGE.value:
        if label is not None and text.startswith(label + ": "):
            return text[len(label) + 2 :]
        return turn_body(ChunkKind.MESSAGE, text)
    if kind == ChunkKind.ARCHIVE_RAW.value and (m := _ARCHIVED_TURN.match(text)):
        return text[m.end() :]
    return text


def _labels(conn: Connection, refs: Sequence[str]) -> dict[str, str]:
    """Message id (as the chunk's ref) -> the label its chunk was written with."""
    ids = sorted({int(ref) for ref in refs if ref.isdigit()})
    labels: dict[str, str] = {}
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        for message_id, speaker, role in conn.execute(
            f"SELECT id, speaker, role FROM messages WHERE id IN ({','.join('?' * len(part))})",
            part,
        ):
            labels[str(message_id)] = str(speaker or role)
    return labels


def retokenize(conn: Connection, version: int = TOKENIZER_VERSION) -> int | None:
    """Every chunk's terms made again by the running tokenizer, with the postings, the
    document frequencies and the scopes' token counts, and `version` recorded; inside
    the caller's write transaction. None when the index holds `version` already
    (another process got there first), else how many chunks changed terms."""
    kept = postings(conn)
    kept.exclude_writers(conn)  # PostgreSQL: writers of chunks wait, and so does a twin
    if stored_version(conn) == version:
        return None
    tally = Tally()
    changed = 0
    after = 0
    while True:
        page = conn.execute(
            "SELECT id, scope_id, kind, text, tokens, ref FROM chunks WHERE id > ?"
            " ORDER BY id LIMIT ?",
            (after, PAGE),
        ).fetchall()
        if not page:
            break
        after = int(page[-1][0])
        refs = [str(r[5]) for r in page if r[2] == ChunkKind.MESSAGE.value and r[5] is not None]
        labels = _labels(conn, refs) if refs else {}
        rows: dict[int, list[tuple[int, str, str]]] = {}  # scope -> (id, old, new)
        for chunk_id, sid, kind, text, old, ref in page:
            label = labels.get(str(ref)) if ref is not None else None
            new = " ".join(tokenize(index_text(str(kind), str(text), label)))
            if new != old:
                rows.setdefault(int(sid), []).append((int(chunk_id), str(old), new))
        for sid, moved in rows.items():
            changed += len(moved)
            kept.removed(conn, sid, [(chunk_id, old) for chunk_id, old, _ in moved])
            conn.executemany(
                "UPDATE chunks SET tokens = ? WHERE id = ?",
                [(new, chunk_id) for chunk_id, _, new in moved],
            )
            kept.added(conn, [(chunk_id, sid, new) for chunk_id, _, new in moved])
            tally.removed(sid, [old for _, old, _ in moved])
            tally.added(sid, [new for _, _, new in moved])
    tally.apply(conn)
    conn.execute(
        "INSERT INTO index_meta (key, value) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (TOKENIZER_KEY, str(version)),
    )
    return changed
