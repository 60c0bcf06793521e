"""A large scope's graph written beside the index, so a restart reads it instead of
building it again (minutes of a core at 100 000 vectors; ann.py).

One file per scope, `.chatmem/graphs/scope-<id>.graph`: a header (format, the model and
vector size, the graph's build parameters and usearch's version), then the chunk ids the
graph holds with the text hash of each one's vector, then the graph itself (usearch's
bytes), all under one checksum (CRC-32: it finds a damaged or cut file, in 0.04 s for a
100 000-vector graph of 83 MB where BLAKE2 took 0.18). What it holds is said by content,
not by a counter: a reader compares the (chunk id, text hash) pairs with the scope's
vectors now and takes in only the difference (graphs.py), so a file written before a
restart, by another process, or before the database was moved or rebuilt is as good as
what still matches in it.

A file is written to a temporary name and renamed over the old one, so a reader sees a
whole file or the previous one. It is not synced to the disk: a file cut short by a power
cut fails its checksum and the graph is built again, which is all a lost file costs. A
file that does not read back (damaged, cut short, another format, another model, another
usearch) is logged, deleted and built again; it never stops a start.

Only functions of paths and bytes (run in worker threads): the graphs themselves are
ann.py's, when to write them graphs.py's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import struct
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memory_core.base import safe_files
from memory_core.base.errors import FileRefused
from memory_core.base.scope_names import scope_name

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger(__name__)

FORMAT = 1
MAGIC = b"chatmem-graph\n"
SUFFIX = ".graph"
MARK_BYTES = 32
"""A text hash as stored (its 32 hex digits)."""
_LENGTH = struct.Struct("<I")
MAX_FILE_BYTES = 8 << 30
"""A graph file larger than this is no graph this process wrote (its vectors are capped
far below): refused unread, and built again."""


def directory(state_dir: Path) -> Path:
    """Where a workspace's graph files live (beside `index.sqlite3` in `.chatmem/`)."""
    return state_dir / "graphs"


def path(folder: Path, sid: int) -> Path:
    return folder / f"scope-{int(sid)}{SUFFIX}"


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What a graph file must have been written for to be read: the model that made its
    vectors, their size, and how the graph was built (ann.PARAMS, usearch's version)."""

    model: str
    dim: int
    params: str
    library: str


@dataclass(frozen=True, slots=True)
class Saved:
    """A graph file read back: its chunk ids, the text hash of each (`S32`), and the
    graph's bytes for `ann.Graph.restore`."""

    keys: npt.NDArray[np.int64]
    marks: npt.NDArray[np.bytes_]
    blob: memoryview


def write(
    folder: Path,
    sid: int,
    fingerprint: Fingerprint,
    keys: npt.NDArray[np.int64],
    marks: npt.NDArray[np.bytes_],
    blob: bytes | bytearray,
) -> int:
    """Write the scope's graph file (atomically: a temporary file renamed over the old
    one); returns its size."""
    import numpy as np

    ids = np.ascontiguousarray(keys, dtype="<i8").tobytes()
    hashes = np.ascontiguousarray(marks, dtype=f"S{MARK_BYTES}").tobytes()
    checksum = 0
    for part in (ids, hashes, blob):
        checksum = zlib.crc32(part, checksum)
    header = json.dumps(
        {
            "format": FORMAT,
            "model": fingerprint.model,
            "dim": fingerprint.dim,
            "params": fingerprint.params,
            "library": fingerprint.library,
            "scope": int(sid),
            "count": len(keys),
            "blob": len(blob),
            "checksum": f"{checksum:08x}",
        },
        sort_keys=True,
    ).encode()
    folder.mkdir(parents=True, exist_ok=True)
    target = path(folder, sid)
    temporary = target.with_name(f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        with temporary.open("wb") as out:
            out.write(MAGIC)
            out.write(_LENGTH.pack(len(header)))
            out.write(header)
            out.write(ids)
            out.write(hashes)
            out.write(blob)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    return len(MAGIC) + _LENGTH.size + len(header) + len(ids) + len(hashes) + len(blob)


class Unreadable(Exception):
    """The file is no graph this process can use."""


def read(folder: Path, sid: int, fingerprint: Fingerprint) -> Saved | None:
    """The scope's graph file, or None when there is none or it is unusable (then it is
    deleted, and said so in the log)."""
    target = path(folder, sid)
    try:
        # The folder (`.chatmem/graphs`) is checked when the workspace opens; a file in
        # it that is a link or a FIFO is no graph of ours.
        data = safe_files.read_bytes(folder, target, MAX_FILE_BYTES)
    except FileNotFoundError:
        return None
    except (OSError, FileRefused) as exc:
        log.warning("graph of scope %s not read, building it again: %s", scope_name(sid), exc)
        return None
    try:
        return _parse(data, fingerprint)
    except Unreadable as exc:
        log.warning("graph file %s not used, building it again: %s", target.name, exc)
        with contextlib.suppress(OSError):
            target.unlink()
        return None


def _parse(data: bytes, fingerprint: Fingerprint) -> Saved:
    import numpy as np

    view = memoryview(data)
    start = len(MAGIC) + _LENGTH.size
    if len(data) < start or data[: len(MAGIC)] != MAGIC:
        raise Unreadable("not a graph file")
    (size,) = _LENGTH.unpack_from(data, len(MAGIC))
    try:
        header = json.loads(bytes(view[start : start + size]))
        count, blob_size = int(header["count"]), int(header["blob"])
        found = (
            header["format"],
            header["model"],
            header["dim"],
            header["params"],
            header["library"],
        )
        checksum = str(header["checksum"])
    except (ValueError, KeyError, TypeError) as exc:
        raise Unreadable(f"header unreadable: {exc}") from exc
    wanted = (
        FORMAT,
        fingerprint.model,
        fingerprint.dim,
        fingerprint.params,
        fingerprint.library,
    )
    if found != wanted:
        raise Unreadable(f"written for {found}, wanted {wanted}")
    body = start + size
    ids_end = body + count * 8
    marks_end = ids_end + count * MARK_BYTES
    if count < 0 or blob_size < 0 or len(data) != marks_end + blob_size:
        raise Unreadable("cut short or too long")
    if f"{zlib.crc32(view[body:]):08x}" != checksum:
        raise Unreadable("checksum does not match")
    keys = np.frombuffer(view[body:ids_end], dtype="<i8").astype(np.int64)
    marks = np.frombuffer(view[ids_end:marks_end], dtype=f"S{MARK_BYTES}").copy()
    return Saved(keys, marks, view[marks_end:])


def remove(folder: Path, sid: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        path(folder, sid).unlink()


def remove_all(folder: Path) -> None:
    """Every graph file (a purge: a graph holds its vectors, in int8)."""
    shutil.rmtree(folder, ignore_errors=True)
