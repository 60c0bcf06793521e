"""A psycopg connection as the table owners' `Connection`: `?` placeholders, tuple rows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import psycopg

from memory_core.base.sql import Dialect
from memory_core.storage.dialects import POSTGRES


class PgConnection:
    """Wraps one pooled psycopg connection for the length of one database function."""

    dialect: Dialect = POSTGRES

    def __init__(self, raw: psycopg.Connection[Any], writer: str) -> None:
        self.raw = raw
        self.writer = writer
        """This process's row in `writers` (see `PgDatabase.data_version`)."""

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> psycopg.Cursor[Any]:
        return self.raw.execute(pyformat(sql), nul_free(parameters))

    def executemany(
        self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /
    ) -> psycopg.Cursor[Any]:
        cursor = self.raw.cursor()
        rows = [nul_free(row) for row in seq_of_parameters]
        if rows:  # psycopg refuses an empty batch; sqlite3 runs it as nothing
            cursor.executemany(pyformat(sql), rows)
        return cursor


NUL_STAND_IN = "\ufffd"
"""What a NUL character of a text becomes: PostgreSQL's text type cannot hold NUL, and
a chat message that carries one (pasted binary, a client's bug) must still be stored."""


def nul_free(parameters: Sequence[Any]) -> Sequence[Any]:
    """`parameters` with every NUL of a string replaced by U+FFFD (the same sequence when
    there is none, which is nearly always)."""
    if not any(isinstance(p, str) and "\x00" in p for p in parameters):
        return parameters
    return [p.replace("\x00", NUL_STAND_IN) if isinstance(p, str) else p for p in parameters]


@lru_cache(maxsize=1024)
def pyformat(sql: str) -> str:
    """The statement in psycopg's placeholder style: each `?` outside a quoted literal or
    identifier becomes `%s`, and a literal `%` becomes `%%`.

    Numbered placeholders (`?1`) are refused: psycopg has no positional reuse, and a
    statement that used them would bind the wrong values here.
    """
    out: list[str] = []
    quote = ""
    i = 0
    while i < len(sql):
        ch = sql[i]
        if quote:
            out.append("%%" if ch == "%" else ch)
            if ch == quote:
                quote = ""
        elif ch in ("'", '"'):
            quote = ch
            out.append(ch)
        elif ch == "?":
            if i + 1 < len(sql) and sql[i + 1].isdigit():
                raise ValueError(f"numbered placeholder in a shared statement: {sql[:80]!r}")
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
        i += 1
    return "".join(out)
