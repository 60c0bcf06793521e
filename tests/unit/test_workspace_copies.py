"""A bench's run copy finds the prepared MEMORY.md itself (same inode: the parse cache's
stamp vouches, as in a workspace opened again), and a run that wrote it in place is caught."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testkit.workspace_copies import check_unchanged, copy_workspace, long_term_stamp


def _state(root: Path) -> Path:
    state = root / "state"
    (state / ".chatmem").mkdir(parents=True)
    (state / "memory").mkdir()
    (state / "MEMORY.md").write_text("# Agent Memory\n")
    (state / ".chatmem" / "index.sqlite3").write_bytes(b"index")
    (state / "memory" / "2026-11-01.md").write_text("a note\n")
    os.utime(state / "memory" / "2026-11-01.md", ns=(1_700_000_000_000_000_000,) * 2)
    return state


@pytest.mark.parametrize("link_days", [False, True])
def test_a_copy_links_memory_md_and_copies_the_index(tmp_path: Path, link_days: bool) -> None:
    state = _state(tmp_path)
    run = tmp_path / "run"
    copy_workspace(state, run, link_days=link_days)
    assert (run / "MEMORY.md").stat().st_ino == (state / "MEMORY.md").stat().st_ino
    assert (run / ".chatmem" / "index.sqlite3").stat().st_ino != (
        state / ".chatmem" / "index.sqlite3"
    ).stat().st_ino
    note = run / "memory" / "2026-11-01.md"
    assert note.stat().st_mtime_ns == 1_700_000_000_000_000_000


def test_a_write_by_rename_leaves_the_state_and_one_in_place_is_caught(tmp_path: Path) -> None:
    state = _state(tmp_path)
    run = tmp_path / "run"
    copy_workspace(state, run, link_days=False)
    stamp = long_term_stamp(state)
    replacement = run / ".MEMORY.md.tmp"
    replacement.write_text("# Agent Memory\n\nnew\n")
    os.replace(replacement, run / "MEMORY.md")
    check_unchanged(state, stamp)
    assert (state / "MEMORY.md").read_text() == "# Agent Memory\n"
    copy_workspace(state, run, link_days=False)
    with (run / "MEMORY.md").open("a") as written_in_place:
        written_in_place.write("more\n")
    with pytest.raises(SystemExit, match="written in place"):
        check_unchanged(state, stamp)


def test_a_workspace_without_memory_md_has_no_stamp(tmp_path: Path) -> None:
    assert long_term_stamp(tmp_path) is None
    check_unchanged(tmp_path, None)
