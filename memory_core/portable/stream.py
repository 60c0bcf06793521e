"""An export file written a record at a time and read a scope at a time (blocking I/O:
callers run these in a worker thread).

Written: into a temp file beside the target, in batches as the records come, then
fsynced and renamed over it, so a failed export leaves no half file and the export is
never held whole in memory. Read: twice. The first pass checks every line (an import
writes nothing unless the whole file is good) and keeps only where each scope's lines
are; the second reads one scope's lines at a time, checked again, from a file that must
not have changed in between. Lines are split at `\\n` alone: a text may hold U+2028 or
U+0085, which JSON leaves as they are and `str.splitlines` would cut at.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from memory_core.base import safe_files
from memory_core.base.atomic import fsync_dir, mode_for, write_error
from memory_core.base.scope import ScopeKey
from memory_core.portable.records import ImportRefused, Record, checked, read_lines

EXPORT_BYTES = 1 << 34
"""The largest export file an import reads (16 GiB)."""


class StagedFile:
    """A file written in pieces and put in place whole (temp file, fsync, rename)."""

    def __init__(self, out: Path) -> None:
        parent = out.parent
        self._root = parent if parent.is_dir() else out
        self._what = f"{out.name} left as it was"
        try:
            self.path = safe_files.writable_target(self._root, out)
            fd, name = tempfile.mkstemp(
                prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent
            )
        except OSError as exc:
            raise write_error(self._what, out, exc) from exc
        self._tmp = Path(name)
        self._handle = os.fdopen(fd, "wb")

    def write(self, data: bytes) -> None:
        try:
            self._handle.write(data)
        except OSError as exc:
            self.abort()
            raise write_error(self._what, self.path, exc) from exc

    def commit(self) -> None:
        try:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            os.chmod(self._tmp, mode_for(self.path))
            os.replace(self._tmp, self.path)
        except OSError as exc:
            self.abort()
            raise write_error(self._what, self.path, exc) from exc
        with contextlib.suppress(OSError):
            fsync_dir(self.path.parent)

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self._handle.close()
        with contextlib.suppress(OSError):
            self._tmp.unlink()


@dataclass
class Plan:
    """What the first pass of an import kept: where each wanted scope's lines are."""

    source: Path
    signature: tuple[int, ...]
    runs: dict[ScopeKey, list[tuple[int, int, int]]] = field(default_factory=dict)
    """Per scope, in file order: (first line number, start byte, end byte) of each run
    of its lines."""
    kinds: set[str] = field(default_factory=set)


def _signature(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _lines(handle: Iterator[bytes], at: list[int]) -> Iterator[str]:
    """The file's lines as text; `at` follows the last one given: its start and end
    byte and its number."""
    offset = 0
    for number, raw in enumerate(handle, start=1):
        at[:] = [offset, offset + len(raw), number]
        offset += len(raw)
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ImportRefused(f"line {number}: not UTF-8 text (nothing was imported)") from None


def scan(source: Path, only: Collection[ScopeKey]) -> Plan:
    """First pass: every line checked (ImportRefused names the first bad one); the runs
    of lines of each scope in `only` (every scope when empty)."""
    fd = safe_files.open_fd(source.parent, source, os.O_RDONLY)
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if st.st_size > EXPORT_BYTES:
            raise ImportRefused(f"{source}: {st.st_size} bytes, over the 16 GiB an import reads")
        plan = Plan(source, _signature(st))
        at = [0, 0, 0]
        last: ScopeKey | None = None
        for record in read_lines(_lines(iter(handle), at)):
            if only and record.scope not in only:
                last = None
                continue
            plan.kinds.add(record.kind)
            runs = plan.runs.setdefault(record.scope, [])
            start, end, number = at
            if last == record.scope and runs:
                runs[-1] = (runs[-1][0], runs[-1][1], end)
            else:
                runs.append((number, start, end))
            last = record.scope
    return plan


def scope_records_of(plan: Plan, scope: ScopeKey) -> list[Record]:
    """Second pass: one scope's records, from the same file as the first pass read."""
    fd = safe_files.open_fd(plan.source.parent, plan.source, os.O_RDONLY)
    try:
        if _signature(os.fstat(fd)) != plan.signature:
            raise ImportRefused(
                f"{plan.source} changed while it was imported: import it again "
                "(what was imported so far stays; importing again adds the rest)"
            )
        records: list[Record] = []
        for number, start, end in plan.runs.get(scope, ()):
            data = os.pread(fd, end - start, start)
            for offset, raw in enumerate(data.split(b"\n")):
                if raw.strip():
                    record = checked(json.loads(raw.decode("utf-8")), number + offset)
                    if record.scope == scope:
                        records.append(record)
        return records
    finally:
        os.close(fd)
