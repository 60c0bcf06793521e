"""Which PostgreSQL servers this workspace has reached: an outage or a mistyped DSN.

A server that cannot be reached at a process's start is one of two things. One this
workspace has used before is down for now: the process opens and works from its files
and spools until it answers (docs/operations.md). One it has never reached is most often
a mistake (a mistyped host, port or name, a server never set up): waiting on it would
only hide the mistake, so the start fails in one line with the cause.

What is recorded is a fingerprint of where the DSN leads (host, port, database, user,
options; never the password, and not the DSN itself), one per line of
`.chatmem/postgres-reached`, written once the server answered and the migrations were
checked. A workspace used with PostgreSQL before this record existed has no such file but
has its spool directory: it counts as having reached the server until its next open
that reaches it records it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

from memory_core.base import safe_files
from memory_core.base.atomic import atomic_write_text
from memory_core.base.errors import FileRefused, MemoryFileError

RECORD_FILE = "postgres-reached"
SPOOL_DIR = "spool"
SECRET_KEYS = frozenset({"password", "passfile", "sslpassword"})
"""Parts of a DSN that say nothing of where it leads, left out of its fingerprint."""


def fingerprint(dsn: str) -> str | None:
    """Where `dsn` leads, hashed (None for a DSN that cannot be parsed)."""
    try:
        parts = conninfo_to_dict(dsn)
    except Exception:  # psycopg's ProgrammingError: the open says so in one line
        return None
    kept = {key: str(value) for key, value in parts.items() if key not in SECRET_KEYS}
    text = json.dumps(kept, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


class ReachedServers:
    """The record in a workspace's state directory (blocking: a small file)."""

    def __init__(self, state_dir: Path) -> None:
        self._state_dir = state_dir  # checked inside the workspace when a core starts
        self.path = state_dir / RECORD_FILE
        self._spool = state_dir / SPOOL_DIR

    def _recorded(self) -> set[str] | None:
        """The fingerprints recorded, None when there is no record at all."""
        try:
            text = safe_files.read_text(self._state_dir, self.path, safe_files.SMALL_BYTES)
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, FileRefused):
            return set()
        return {line.strip() for line in text.splitlines() if line.strip()}

    def recorded(self, dsn: str) -> bool:
        """Whether a start of this workspace reached `dsn`'s server and recorded it."""
        mark = fingerprint(dsn)
        return mark is not None and mark in (self._recorded() or set())

    def known(self, dsn: str) -> bool:
        """Recorded, or a workspace used with PostgreSQL before the record existed."""
        marks = self._recorded()
        if marks is None:
            return self._spool.is_dir()
        mark = fingerprint(dsn)
        return mark is not None and mark in marks

    def record(self, dsn: str) -> None:
        """`dsn`'s server answered: a later start finds it known. A record that cannot
        be written costs only the fast refusal's distinction, never the open."""
        mark = fingerprint(dsn)
        if mark is None:
            return
        marks = self._recorded() or set()
        if mark in marks:
            return
        with contextlib.suppress(OSError, MemoryFileError):
            text = "".join(f"{m}\n" for m in sorted(marks | {mark}))
            atomic_write_text(self.path, text, root=self._state_dir)
