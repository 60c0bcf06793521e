"""Crash-safe file replacement: a reader sees the old file or the new one, never a mix."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


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


def atomic_write_text(path: Path, text: str) -> None:
    """Write to a temp file beside `path`, fsync it, then rename over `path`."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def _mode_for(path: Path) -> int:
    """Keep a replaced file's permissions; new files get the usual rw-r--r--."""
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        return 0o644


def backup_then_write(path: Path, text: str, backup: Path) -> None:
    """Keep the previous version as `backup`, then write.

    The backup is a hard link to the old file, swapped in by rename: no copy, no second
    fsync, and `backup` is always a whole file. Where links are not possible it falls back
    to an atomic copy.
    """
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
            atomic_write_bytes(backup, path.read_bytes())
    atomic_write_text(path, text)
