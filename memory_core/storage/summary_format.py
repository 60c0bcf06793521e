"""A scope summary as `scope_summaries` stores it: its stamp and its payload.

Pure rules, shared by whoever reads a scope's files and keeps what `chatmem scopes` and
`stats` need of them: the listing (`scope_listing/`), a reindex and a scope's sync
(`recall/index/summaries.py`). One copy of the rules, so a summary is the same bytes
whoever made it. (`stamp_part` is the one stat the stamp is made of.)
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Iterable, Sequence

from memory_core.base.entries import MemoryEntry

SUMMARY_VERSION = 1
"""Bumped when the payload's layout changes: an older summary is then made again."""

RACY = "racy"
"""The stamp of a summary read from files written just before: equal to no real stamp."""

DAILY_NAME = "????-??-??.md"
"""A daily file as `LongTermViews.status` counts them (any entry of the scope folder)."""


def entries_text(entries: Sequence[MemoryEntry]) -> str:
    """The payload's part of a scope's parsed entries (in file order): each entry's
    scoring fields (no text, no id), as JSON. Made apart from the rest of the payload,
    so a reindex's worker makes it beside the file's chunks."""
    rows = [
        [
            e.category,
            e.memory_class.value if e.memory_class is not None else None,
            e.score,
            e.scored_at.isoformat(),
            e.last_activated.isoformat(),
            e.pinned,
            e.archived.value if e.archived is not None else None,
        ]
        for e in entries
    ]
    return json.dumps(rows, separators=(",", ":"))


def payload(entries: str, quarantined: int, daily_files: int) -> str:
    """The payload of `entries_text`, the quarantined blocks and the daily files counted:
    `{"v":…,"q":…,"d":…,"e":[…]}`, the bytes `json.dumps` makes of that object."""
    return f'{{"v":{SUMMARY_VERSION},"q":{quarantined},"d":{daily_files},"e":{entries}}}'


def encode(entries: Sequence[MemoryEntry], quarantined: int, daily_files: int) -> str:
    """The summary of a scope's parsed entries (in file order) as stored."""
    return payload(entries_text(entries), quarantined, daily_files)


def readable(payload: str) -> bool:
    """Whether `payload` is a summary of this layout (else it is made again)."""
    try:
        return bool(json.loads(payload).get("v") == SUMMARY_VERSION)
    except (ValueError, AttributeError):
        return False


def daily_count(names: Iterable[str]) -> int:
    """How many of a scope folder's entry names are daily files."""
    return len(fnmatch.filter(names, DAILY_NAME))  # `fnmatch`'s rule, one compile


def stamp_part(path: str) -> tuple[str, int]:
    """Blocking: one file's part of a stamp ("mtime_ns:size" of the path itself, a link
    not followed; "-" when missing) and its mtime_ns (0 when missing). Taken before the
    file is read: a write after it leaves a stamp no later stat matches."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return "-", 0
    return f"{st.st_mtime_ns}:{st.st_size}", st.st_mtime_ns


def joined(parts: Sequence[str]) -> str:
    """The stamp of the long-term file's and the scope folder's parts (in that order)."""
    return "/".join(parts)


def kept_stamp(stamp: str, racy: bool) -> str:
    """What is stored as the summary's stamp: `RACY` (no stamp equals it, so the next
    listing reads the files again) when a part was read within the racy window of its
    mtime (`store_versions.is_racy_mtime`): the file may change under the same stamp."""
    return RACY if racy else stamp
