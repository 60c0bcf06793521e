"""Reading a spool file (`storage/spool.py`) without trusting it: a record the replay
cannot use (no JSON object, no `kind`, a field missing or of the wrong type: a file
edited by hand, or written by another version) is never replayed, never crashes the
replay, and is never dropped: it is moved, byte for byte, to
`.chatmem/spool/quarantine/<file>.jsonl` for a person to look at, with one warning.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_core.base import safe_files
from memory_core.base.atomic import atomic_write_bytes
from memory_core.base.clock import parse_when
from memory_core.base.errors import FileRefused

log = logging.getLogger("memory_core.storage.spool")

QUARANTINE_DIR = "quarantine"
"""Under the spool folder: the records no replay could use, kept as they were."""

Check = Callable[[Any], bool]
"""Whether a parsed line is a record this spool's replay can use."""


def history_record(record: Any) -> bool:
    """A session or message record of `SpoolingHistory`, with every field it needs."""
    if not isinstance(record, dict) or not _when(record.get("at")):
        return False
    if record.get("kind") == "session":
        return _texts(record, "id", "scope")
    if record.get("kind") == "message":
        return isinstance(record.get("seq"), int) and _texts(
            record, "scope", "session_id", "role", "content"
        )
    return False


def audit_record(record: Any) -> bool:
    """A change of `SpoolingAudit`: its sequence number and its audit rows."""
    if not isinstance(record, dict) or not isinstance(record.get("seq"), int):
        return False
    rows = record.get("rows")
    return (
        isinstance(rows, list)
        and bool(rows)
        and all(isinstance(r, list) and len(r) == len(rows[0]) for r in rows)
        and _when(rows[0][0] if rows[0] else None)
    )


def read_records(path: Path, check: Check) -> tuple[list[dict[str, Any]], list[bytes]]:
    """The spool's usable records, and its malformed lines (as they are in the file).
    A last line without its newline is neither: an append may be writing it (and one
    a crash tore was never acknowledged)."""
    try:
        # The spool folder is checked when the workspace opens; a file in it that is a
        # link or a FIFO is no spool of ours.
        raw = safe_files.read_bytes(path.parent, path, safe_files.NOTE_BYTES)
    except FileNotFoundError:
        return [], []
    except FileRefused as exc:
        safe_files.warn_once(exc)
        return [], []
    records: list[dict[str, Any]] = []
    malformed: list[bytes] = []
    lines = raw.split(b"\n")
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if check(record):
            records.append(record)
        elif index < len(lines) - 1:
            malformed.append(line)
    return records, malformed


def remove_written(path: Path, count: int, drop_lock: bool, check: Check) -> None:
    """Drop the first `count` records (all written) and set the malformed lines aside
    (`quarantine`); the file goes when nothing is left, and with it a dead writer's lock
    file (`drop_lock`)."""
    records, malformed = read_records(path, check)
    if malformed:
        quarantine(path, malformed)
    rest = records[count:]
    if rest:
        text = "".join(
            json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rest
        )
        atomic_write_bytes(path, text.encode("utf-8"), root=path.parent)
        return
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    if drop_lock:
        with contextlib.suppress(FileNotFoundError):
            path.with_suffix(".lock").unlink()


def quarantine(path: Path, lines: list[bytes]) -> Path:
    """Append `lines` to the spool's quarantine file (fsynced), with one warning."""
    directory = safe_files.make_dirs(path.parent, path.parent / QUARANTINE_DIR)
    target = directory / path.name
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    fd = safe_files.open_fd(directory, target, flags, 0o600)
    try:
        os.write(fd, b"".join(line + b"\n" for line in lines))
        os.fsync(fd)
    finally:
        os.close(fd)
    log.warning(
        "spool %s: %d record(s) no replay can use were not written; kept as they were in %s",
        path,
        len(lines),
        target,
    )
    return target


def _texts(record: dict[str, Any], *names: str) -> bool:
    return all(isinstance(record.get(name), str) for name in names)


def _when(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return isinstance(parse_when(value), datetime)
    except ValueError:
        return False
