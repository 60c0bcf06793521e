"""Item 10 of issue 11: the store's cache must not serve a stale MEMORY.md where mtimes
are coarse and a same-size rewrite lands in the same timestamp tick.

The coarse clock is imitated with `os.utime`: the rewritten file gets back the very
mtime (and keeps the size and inode) it had, as on a kernel that stamps with the tick.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from memory_core.base.scope import MAIN
from memory_core.engine import MemoryCore
from memory_core.longterm.store import RACY_NS


def rewrite_in_the_same_tick(path: Path, old: bytes, new: bytes) -> None:
    assert len(old) == len(new)
    before = os.stat(path)
    data = path.read_bytes()
    assert data.count(old) == 1
    with path.open("r+b") as handle:  # in place: same inode
        handle.write(data.replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_mtime_ns, after.st_size, after.st_ino) == (
        before.st_mtime_ns,
        before.st_size,
        before.st_ino,
    )


async def test_a_same_size_rewrite_in_one_tick_is_seen(core: MemoryCore) -> None:
    await core.memories.capture(MAIN, "likes green tea")
    await core.memories.flush()
    path = core.memories.path(MAIN)
    assert [e.content for e in await core.memories.entries(MAIN)] == ["likes green tea"]

    rewrite_in_the_same_tick(path, b"likes green tea", b"likes black tea")
    assert [e.content for e in await core.memories.entries(MAIN)] == ["likes black tea"]


async def test_a_same_size_rewrite_in_one_tick_is_not_overwritten(core: MemoryCore) -> None:
    """The write path too: a capture must build on the person's edit, not on the cache."""
    first, _ = await core.memories.capture(MAIN, "likes green tea")
    await core.memories.flush()
    await core.memories.entries(MAIN)  # cached
    rewrite_in_the_same_tick(core.memories.path(MAIN), b"likes green tea", b"likes black tea")
    second, _ = await core.memories.capture(MAIN, "owns a red bicycle")
    await core.memories.flush()
    stored = {e.id: e.content for e in await core.memories.entries(MAIN)}
    assert stored == {first.id: "likes black tea", second.id: "owns a red bicycle"}


async def test_an_old_file_is_trusted_on_its_stamp(core: MemoryCore) -> None:
    """Past the timestamp granularity the stamp alone vouches: no hash on the hot path."""
    await core.memories.capture(MAIN, "likes green tea")
    await core.memories.flush()
    path = core.memories.path(MAIN)
    old = time.time_ns() - 10 * RACY_NS
    os.utime(path, ns=(old, old))
    await core.memories.entries(MAIN)
    store = core.memories.store.files
    assert store._cache[MAIN].racy is False
