"""Crash-safe file replacement: a reader sees the old file or the new one, never a mix.

A write the disk refuses (full, over the file size limit, read-only, no permission) leaves
the old file and is raised as one `MemoryFileError` line saying what, where and why, instead
of an `OSError` traceback: a person can act on "disk full", not on errno 28.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import tempfile
from pathlib import Path

from memory_core.base import safe_files
from memory_core.base.errors import MemoryFileError

log = logging.getLogger(__name__)

_REASONS = {
    errno.ENOSPC: "disk full",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file size limit reached",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EIO: "input/output error",
}


def describe(exc: OSError) -> str:
    """Why an I/O call failed, in words, with the errno name for searching: "disk full
    (ENOSPC)"."""
    code = exc.errno if isinstance(exc.errno, int) else -1
    reason = _REASONS.get(code) or exc.strerror or str(exc) or "failed"
    name = errno.errorcode.get(code)
    return f"{reason} ({name})" if name else reason


def write_error(what: str, path: Path | str, exc: OSError) -> MemoryFileError:
    """One line for a write that failed: `what` happened (to the data), `path`, and why."""
    return MemoryFileError(f"{what}: cannot write {path}: {describe(exc)}")


def fsync_dir(directory: Path) -> None:
    """Make a rename durable; a no-op where directories cannot be opened (Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str, *, root: Path) -> None:
    """Write to a temp file beside `path`, fsync it, then rename over `path`. `root` is
    the workspace's: a path that leads outside it is refused (`safe_files`)."""
    atomic_write_bytes(path, text.encode("utf-8"), root=root)


def atomic_write_bytes(path: Path, data: bytes, *, root: Path, kept: Path | None = None) -> None:
    """`atomic_write_text` for bytes; MemoryFileError when the disk refuses, saying that the
    old `kept` (default `path`) is left as it was. A link inside the workspace is
    written through (it stays a link); one leading out is refused."""
    what = f"{(kept or path).name} left as it was"
    try:
        path = safe_files.writable_target(root, path)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise write_error(what, path, exc) from exc
    tmp = Path(tmp_name)
    try:
        os.fchmod(fd, mode_for(path))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise write_error(what, path, exc) from exc
        raise
    try:
        fsync_dir(path.parent)
    except OSError as exc:
        # The new file is in place and every reader sees it: failing the write now would
        # make a caller retry a change that was made. Only a crash could undo the rename.
        log.warning("%s replaced, but its directory could not be flushed: %s", path, describe(exc))


def mode_for(path: Path) -> int:
    """Keep a replaced file's permissions; new files get the usual rw-r--r--."""
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        return 0o644


def backup_then_write(path: Path, data: bytes, backup: Path, *, root: Path) -> None:
    """Keep the previous version as `backup`, then write `data` (bytes: a 40 MB file's
    caller has encoded it once already, for its hash).

    The backup is a hard link to the old file, swapped in by rename: no copy, no second
    fsync, and `backup` is always a whole file. Where links are not possible it falls back
    to an atomic copy.
    """
    path = safe_files.writable_target(root, path)
    backup = safe_files.writable_target(root, backup)
    if path.exists():
        link = backup.with_name(f".{backup.name}.{os.getpid()}.link.tmp")
        try:
            with contextlib.suppress(FileNotFoundError):
                link.unlink()
            os.link(path, link)
            os.replace(link, backup)
        except OSError:
            with contextlib.suppress(OSError):
                link.unlink()
            try:
                old = safe_files.read_bytes(root, path, safe_files.LONG_TERM_BYTES)
            except OSError as exc:
                raise write_error(f"{path.name} left as it was", backup, exc) from exc
            atomic_write_bytes(backup, old, root=root, kept=path)
    atomic_write_bytes(path, data, root=root)
