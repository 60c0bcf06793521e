"""The first blocks of a large long-term file, parsed without reading the rest: the top
of its rankings (the file is sorted by score), in milliseconds."""

from __future__ import annotations

import re
from pathlib import Path

from memory_core.base import safe_files
from memory_core.base.entries import MemoryEntry
from memory_core.longterm.memory_md_parser import parse_memory

_TOTAL = re.compile(rb"<!-- Total entries: (\d+) -->")
_BLOCK = b"\n### "


def read_head(
    root: Path, path: Path, archive_below: float, max_bytes: int
) -> tuple[list[MemoryEntry], int | None] | None:
    """The first whole blocks of a large file; None when the file is small (read it all)."""
    try:
        data, size = safe_files.read_head(root, path, max_bytes)
    except FileNotFoundError:
        return None
    if size <= max_bytes:
        return None
    cut = data.rfind(_BLOCK)
    if cut <= 0:
        return None
    total = _TOTAL.search(data)
    parsed = parse_memory(data[: cut + 1].decode("utf-8", "replace"), archive_below=archive_below)
    return list(parsed.entries), int(total.group(1)) if total else None
