"""The files a scope's sync stats are exactly the files the index covers (`scope_files`),
listed without a `Path` per file (a scope of 100 000 daily files is stat'ed at each start)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.recall.index.files import scope_files, stat_files


@pytest.mark.parametrize("scope", [MAIN, ScopeKey("peer:42")])
def test_stat_files_lists_what_scope_files_lists(tmp_path: Path, scope: ScopeKey) -> None:
    ws = Workspace.at(tmp_path)
    ws.ensure_scope(scope)
    directory = ws.memory_dir(scope)
    (directory / "summary").mkdir()
    files = {
        ws.long_term_path(scope): "# Agent Memory\n",
        directory / "2026-02-01.md": "- 10:00:00 a note\n",
        directory / "2026-02-30.md": "not a day\n",
        directory / "2026-02-02-chat-log.md": "# raw\n",
        directory / "SNAPSHOT.md": "not indexed\n",
        directory / "notes.txt": "not markdown\n",
        directory / "summary" / "2026-02-01.md": "a day\n",
        directory / "summary" / "2026-02.md": "a month\n",
        directory / "summary" / "other.md": "not a summary\n",
    }
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    (directory / "2026-02-03.md").symlink_to(directory / "2026-02-01.md")
    (directory / "2026-02-04.md").mkdir()
    os.utime(directory / "2026-02-01.md", ns=(1, 1_700_000_000_123_456_789))

    listed = stat_files(ws, scope)
    assert sorted(listed) == sorted(ws.relative(p) for p in scope_files(ws, scope))
    for relative, (mtime, size) in listed.items():
        st = (tmp_path / relative).stat()
        assert (mtime, size) == (st.st_mtime_ns, st.st_size)
    assert listed[ws.relative(directory / "2026-02-01.md")][0] == 1_700_000_000_123_456_789
