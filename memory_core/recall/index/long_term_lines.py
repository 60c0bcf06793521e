"""Where each long-term chunk's lines are now, in a table of their own.

A write that re-sorts a large MEMORY.md (decay rescores a few hundred entries of 100 000
each hour, and each one rescored moves the entries between its old and new place) gives
nearly every entry new lines. Kept in `chunks`, each move rewrote a whole chunk row (its
text and tokens, ~250 bytes) and sent its pages through the write-ahead log at commit;
kept in `long_term_lines`, a move rewrites a row of five small values, in no index
(PostgreSQL: a HOT update).

The one rule: `chunks.line_from` and `line_to` of a long-term chunk are 0, and every
query that returns a chunk's lines reads them through `LINE_FROM` and `LINE_TO`. A chunk
row and its line row are written and deleted in the same transaction (`place`, `forget`);
a long-term chunk without its line row reads as NULL lines, never as another's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memory_core.base.sql import Connection
from memory_core.recall.index.line_moves import RANGED_RUNS, Run

LINE_FROM = (
    "CASE WHEN c.kind = 'long_term' THEN (SELECT l.line_from FROM long_term_lines AS l"
    " WHERE l.chunk_id = c.id) ELSE c.line_from END"
)
"""A chunk's first line, for a query whose chunks are `chunks AS c`."""
LINE_TO = (
    "CASE WHEN c.kind = 'long_term' THEN (SELECT l.line_to FROM long_term_lines AS l"
    " WHERE l.chunk_id = c.id) ELSE c.line_to END"
)
"""A chunk's last line, as `LINE_FROM`."""

LineRow = tuple[int, int, str, int, int]
"""(chunk id, scope id, path, line_from, line_to) of a long-term chunk."""


def place(conn: Connection, rows: Sequence[LineRow]) -> None:
    """The lines of long-term chunks just stored (only those really stored: a chunk
    another writer stored first keeps its own)."""
    if rows:
        conn.executemany(
            "INSERT INTO long_term_lines (chunk_id, scope_id, path, line_from, line_to)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (chunk_id) DO UPDATE SET"
            " scope_id = excluded.scope_id, path = excluded.path,"
            " line_from = excluded.line_from, line_to = excluded.line_to",
            rows,
        )


def forget(conn: Connection, chunk_ids: Sequence[int]) -> None:
    """The line rows of chunks deleted (of any kind: the others have none)."""
    for start in range(0, len(chunk_ids), 500):
        part = list(chunk_ids[start : start + 500])
        conn.execute(
            f"DELETE FROM long_term_lines WHERE chunk_id IN ({','.join('?' * len(part))})", part
        )


def forget_all(conn: Connection) -> None:
    """Every line row, with every long-term chunk (a reset)."""
    conn.execute("DELETE FROM long_term_lines")


def file_lines(conn: Connection, sid: int, path: str) -> list[tuple[int, str, int, int]]:
    """(chunk id, ref, line_from, line_to) of each chunk of a long-term file, as the index
    holds them."""
    return [
        (int(chunk_id), str(ref), int(line_from), int(line_to))
        for chunk_id, ref, line_from, line_to in conn.execute(
            "SELECT l.chunk_id, c.ref, l.line_from, l.line_to FROM long_term_lines AS l"
            " JOIN chunks AS c ON c.id = l.chunk_id WHERE l.scope_id = ? AND l.path = ?",
            (sid, path),
        )
    ]


_LINES_BY_ID = {"id": "BIGINT", "line_from": "BIGINT", "line_to": "BIGINT"}
_RUNS = {"run_first": "BIGINT", "run_last": "BIGINT", "by_from": "BIGINT", "by_to": "BIGINT"}
RUNS_TABLE = (
    "CREATE TEMP TABLE IF NOT EXISTS line_runs (run_first INTEGER PRIMARY KEY,"
    " run_last INTEGER NOT NULL, by_from INTEGER NOT NULL, by_to INTEGER NOT NULL)"
)
"""A write's runs, for `move_kept` to find each row's run by its old first line (a seek on
the key: SQLite's rowid). The connection's own, emptied before each use."""


def move_kept(
    conn: Connection,
    sid: int,
    path: str,
    runs: Sequence[Run] | None,
    lines: Mapping[str, tuple[int, int]],
) -> None:
    """The long-term chunks a write keeps, moved to their new `lines` before any new
    chunk is stored (each row moves once, from its old lines), by the `runs` of alike
    shifts the caller found (`line_moves.segment_runs`, `shift_runs`), or by each row's
    `lines` when they are None (the rows are read here). A few runs (an entry added above the rest) by their ranges in
    the statement itself; many (a re-sort by score: 97 277 rows in 7 518 runs) through a
    table of the runs, where each row finds its run by one seek. Either way the rows move
    in one statement, which the database runs without holding the interpreter (a write's
    other work goes on in another thread meanwhile); no row is built in Python."""
    if runs is None:
        moves = [
            (chunk_id, *lines[ref])
            for chunk_id, ref, line_from, line_to in file_lines(conn, sid, path)
            if ref in lines and lines[ref] != (line_from, line_to)
        ]
        if moves:
            moved, params = conn.dialect.rows_as("moved", _LINES_BY_ID, moves)
            conn.execute(
                f"{moved} UPDATE long_term_lines SET line_from = moved.line_from,"
                " line_to = moved.line_to FROM moved WHERE long_term_lines.chunk_id = moved.id",
                params,
            )
        return
    if not runs:
        return
    if len(runs) <= RANGED_RUNS:
        cases = " ".join(["WHEN line_from BETWEEN ? AND ? THEN ?"] * len(runs))
        within = " OR ".join(["line_from BETWEEN ? AND ?"] * len(runs))
        conn.execute(
            f"UPDATE long_term_lines SET line_from = line_from + CASE {cases} END,"
            f" line_to = line_to + CASE {cases} END"
            f" WHERE scope_id = ? AND path = ? AND ({within})",
            [
                *(v for r in runs for v in (r.first, r.last, r.by_from)),
                *(v for r in runs for v in (r.first, r.last, r.by_to)),
                sid,
                path,
                *(v for r in runs for v in (r.first, r.last)),
            ],
        )
        return
    conn.execute(RUNS_TABLE)
    conn.execute("DELETE FROM line_runs")
    listed, params = conn.dialect.rows_as("runs", _RUNS, runs)
    conn.execute(
        f"{listed} INSERT INTO line_runs (run_first, run_last, by_from, by_to)"
        " SELECT run_first, run_last, by_from, by_to FROM runs",
        params,
    )
    conn.execute(
        "UPDATE long_term_lines SET line_from = line_from + r.by_from,"
        " line_to = line_to + r.by_to FROM line_runs AS r"
        " WHERE long_term_lines.scope_id = ? AND long_term_lines.path = ?"
        " AND r.run_first = (SELECT s.run_first FROM line_runs AS s"
        " WHERE s.run_first <= long_term_lines.line_from ORDER BY s.run_first DESC LIMIT 1)"
        " AND long_term_lines.line_from <= r.run_last",
        (sid, path),
    )
