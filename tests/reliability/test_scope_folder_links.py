"""A link inside the workspace must not cross from one scope into another (issue 34,
item 5, follow-up): Bob's scope folder linked to Ann's, Bob's long-term file or daily
note linked to Ann's, or a copy of Ann's folder under Bob's name (its key file names
Ann). Every way in is refused with one line, Ann's files are unchanged, and nothing of
Ann's reaches Bob: capture, daily notes, recall, the prompt, `memory_get`, the index
scan, the listing and `--scope peer:Bob capture` on the command line.

Before the fix Bob's capture landed in Ann's LONG_TERM.md and Bob's recall and
`memory_get` returned Ann's memories.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from adapters.cli import main
from memory_core.base.errors import ChatmemError, FileRefused
from memory_core.base.scope import ScopeKey, scope_slug
from memory_core.engine import MemoryCore

ANN = ScopeKey("peer:Ann")
BOB = ScopeKey("peer:Bob")
ANN_FACT = "keeps the spare key under the blue pot"


def folder_link(ws: Path) -> None:
    """`ln -s peer_~41nn memory/scopes/peer_~42ob`."""
    (ws / "memory" / "scopes" / scope_slug(BOB)).symlink_to(scope_slug(ANN))


def long_term_link(ws: Path) -> None:
    bob = ws / "memory" / "scopes" / scope_slug(BOB)
    bob.mkdir(parents=True, exist_ok=True)
    (bob / "LONG_TERM.md").symlink_to(Path("..") / scope_slug(ANN) / "LONG_TERM.md")


def folder_copy(ws: Path) -> None:
    scopes = ws / "memory" / "scopes"
    shutil.copytree(scopes / scope_slug(ANN), scopes / scope_slug(BOB))


CASES: dict[str, Callable[[Path], None]] = {
    "folder-link": folder_link,
    "long-term-link": long_term_link,
    "folder-copy": folder_copy,
}


async def seed_ann(core: MemoryCore) -> Path:
    await core.memories.capture(ANN, ANN_FACT)
    await core.memories.flush()
    await core.notes.append(ANN, f"said she {ANN_FACT}")
    return core.memories.path(ANN)


async def refused_or_without_ann(call: Callable[[], object]) -> None:
    """The call is refused (one `refused …` line) or answers with nothing of Ann's."""
    try:
        answer = await call()  # type: ignore[misc]
    except FileRefused as exc:
        assert "refused" in str(exc) and "\n" not in str(exc)
        return
    except ChatmemError as exc:
        assert "blue pot" not in str(exc) and "\n" not in str(exc), exc
        return
    assert "blue pot" not in repr(answer), answer


@pytest.mark.parametrize("make", CASES.values(), ids=list(CASES))
async def test_no_link_or_copy_lets_one_scope_reach_anothers_files(
    core: MemoryCore, make: Callable[[Path], None]
) -> None:
    ann_file = await seed_ann(core)
    ann_text = ann_file.read_text(encoding="utf-8")
    ann_note = core.workspace.daily_path(ANN, core.notes.today())
    note_text = ann_note.read_text(encoding="utf-8")
    make(core.workspace.root)

    with pytest.raises(FileRefused, match=r"a scope's (files|folder) must be its own"):
        await core.memories.capture(BOB, "Bob secret: the safe code is 4711")
        await core.memories.flush()
    await refused_or_without_ann(lambda: core.long_term_text(BOB))  # MCP's resource
    await refused_or_without_ann(
        lambda: core.memory_tool(BOB, "memory_search", {"query": "spare key blue pot"})
    )
    await refused_or_without_ann(
        lambda: core.memory_tool(BOB, "memory_save", {"content": "Bob secret: code 4711"})
    )
    await refused_or_without_ann(lambda: core.snapshots.rebuild(BOB))
    await refused_or_without_ann(lambda: core.reindex())
    await refused_or_without_ann(lambda: core.finder.search(BOB, "spare key blue pot"))
    await refused_or_without_ann(lambda: core.merge_scopes(BOB, ScopeKey("peer:Cy")))
    await refused_or_without_ann(lambda: core.memories.entries(BOB))
    await refused_or_without_ann(lambda: core.finder.recall(BOB, "spare key blue pot"))
    await refused_or_without_ann(lambda: core.snapshots.prompt_block(BOB))
    await refused_or_without_ann(lambda: core.notes.recent(BOB))
    slug = scope_slug(ANN)
    for path in ("LONG_TERM.md", f"memory/scopes/{slug}/LONG_TERM.md"):
        await refused_or_without_ann(
            lambda path=path: core.memory_tool(BOB, "memory_get", {"path": path})
        )
    if make is long_term_link:  # Bob's folder is his own: only his long-term file is not
        await core.notes.append(BOB, "Bob walked the dog")
    else:
        with pytest.raises(ChatmemError, match="refused"):
            await core.notes.append(BOB, "Bob walked the dog")

    assert "4711" not in ann_file.read_text(encoding="utf-8")
    assert ann_file.read_text(encoding="utf-8") == ann_text
    assert ann_note.read_text(encoding="utf-8") == note_text
    assert BOB not in await core.known_scopes() or make is long_term_link
    # Ann is served as before.
    assert [e.content for e in await core.memories.entries(ANN)] == [ANN_FACT]


def test_the_command_line_refuses_a_linked_scope_folder_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = str(tmp_path / "ws")
    assert main(["init", "--workspace", ws]) == 0
    assert main(["capture", ANN_FACT, "--workspace", ws, "--scope", ANN.value]) == 0
    folder_link(tmp_path / "ws")
    capsys.readouterr()
    ann_file = tmp_path / "ws" / "memory" / "scopes" / scope_slug(ANN) / "LONG_TERM.md"
    before = ann_file.read_text(encoding="utf-8")

    code = main(["capture", "Bob secret", "--workspace", ws, "--scope", BOB.value])

    err = capsys.readouterr().err
    assert code == 2
    assert [line for line in err.splitlines() if "error" in line] == [
        line for line in err.splitlines() if "refused" in line
    ]
    assert "is a link" in err and "Traceback" not in err
    assert ann_file.read_text(encoding="utf-8") == before
    assert "Bob secret" not in before
