"""A bench's copies of a prepared workspace: what a process opening its own workspace
again finds, made cheaply and without ever changing the prepared state."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def copy_workspace(source: Path, target: Path, link_days: bool) -> None:
    """A copy that keeps every file's times (what the index compares). MEMORY.md is a hard
    link to the source's: the same inode, so the parse cache's stamp vouches for it as it
    does when a bot or a command opens its own workspace again (a copy's new inode makes
    the first reader hash the whole file, as after a restore). Every tree writes MEMORY.md
    by rename, so the source's file is never changed (`check_unchanged`). Daily notes,
    which nothing measured writes, are hard links too (100 000 copies would take minutes)."""
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if link_days:
        subprocess.run(["cp", "-al", str(source), str(target)], check=True)
        state = target / ".chatmem"
        if state.exists():
            shutil.rmtree(state)
            subprocess.run(["cp", "-a", str(source / ".chatmem"), str(state)], check=True)
    else:
        subprocess.run(["cp", "-a", str(source), str(target)], check=True)
    long_term = target / "MEMORY.md"
    if long_term.exists():
        long_term.unlink()
        os.link(source / "MEMORY.md", long_term)


def long_term_stamp(workspace: Path) -> tuple[int, int] | None:
    """MEMORY.md's (mtime, size), None when the workspace has none."""
    try:
        st = (workspace / "MEMORY.md").stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


def check_unchanged(source: Path, stamp: tuple[int, int] | None) -> None:
    """The MEMORY.md a run's copy linked was replaced there, never written in place."""
    if long_term_stamp(source) != stamp:
        raise SystemExit(f"{source}/MEMORY.md changed under a run: it was written in place")
