"""SQLite's online backup: a consistent copy of a database other processes go on writing."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

BUSY_MS = 60_000


def copy_database(source: Path, target: Path) -> bool:
    """Copy the database at `source` to `target` in one step of the backup API (one read
    transaction: a single consistent version, however busy the writers). False when
    there is no database to copy. Blocking: run it on a worker thread."""
    if not source.is_file():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(source, timeout=BUSY_MS / 1000)) as reader:
        reader.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
        with contextlib.closing(sqlite3.connect(target)) as writer:
            reader.backup(writer)
            # The copy is one file: no -wal beside it to lose on the way to the backup.
            writer.execute("PRAGMA journal_mode = DELETE")
    return True
