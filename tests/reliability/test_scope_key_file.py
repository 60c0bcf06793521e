"""Item 7 of issue 11: the key file of a long-key scope is written atomically and
repaired when it is empty or wrong, so the scope never drops out of listings."""

from __future__ import annotations

from memory_core.base.clock import ManualClock
from memory_core.base.scope import ScopeKey, is_hashed_slug
from memory_core.base.workspace import SCOPE_KEY_FILE
from memory_core.config import Config
from memory_core.engine import MemoryCore

LONG = ScopeKey("group:telegram:" + "长" * 60 + ":topic:42")


async def make_long_scope(core: MemoryCore) -> None:
    await core.memories.capture(LONG, "the release is on the first monday of the month")
    await core.memories.flush()
    path = core.memories.path(LONG)
    # A block a person broke, so that `validate` has something to report in this scope.
    with path.open("a", encoding="utf-8") as handle:
        handle.write("\n### [zz] not | a | valid | header\nbroken block\n")


async def test_an_empty_key_file_does_not_hide_the_scope(
    config: Config, clock: ManualClock
) -> None:
    async with MemoryCore.open(config, clock=clock) as core:
        await make_long_scope(core)
        directory = core.workspace.memory_dir(LONG)
    assert is_hashed_slug(directory.name)
    key_file = directory / SCOPE_KEY_FILE
    assert key_file.read_text(encoding="utf-8") == LONG.value
    key_file.write_bytes(b"")  # torn by a crash, as a plain write_text could leave it

    async with MemoryCore.open(config, clock=clock) as core:
        assert LONG in await core.memories.scopes()
        assert key_file.read_text(encoding="utf-8") == LONG.value  # repaired
        problems = await core.memories.validate()
        assert [p.scope for p in problems] == [LONG]


async def test_a_wrong_key_file_is_repaired_when_the_scope_is_written(
    config: Config, clock: ManualClock
) -> None:
    async with MemoryCore.open(config, clock=clock) as core:
        await make_long_scope(core)
        key_file = core.workspace.memory_dir(LONG) / SCOPE_KEY_FILE
        key_file.write_text("peer:someone-else", encoding="utf-8")
        await core.notes.append(LONG, "release notes drafted")
        assert key_file.read_text(encoding="utf-8") == LONG.value
        assert LONG in await core.memories.scopes()


async def test_both_copies_lost_leaves_other_scopes_listed(
    config: Config, clock: ManualClock
) -> None:
    """With neither record of the key left there is nothing to rebuild it from: the
    directory is skipped (and logged), and everything else is listed as before."""
    other = ScopeKey("peer:7")
    async with MemoryCore.open(config, clock=clock) as core:
        await make_long_scope(core)
        await core.memories.capture(other, "likes green tea")
        directory = core.workspace.memory_dir(LONG)
        (directory / SCOPE_KEY_FILE).write_bytes(b"")
        (core.workspace.scope_keys_dir / directory.name).write_bytes(b"")
        assert LONG not in await core.memories.scopes()
        assert other in await core.memories.scopes()
        # The next write to the scope puts both back.
        await core.memories.capture(LONG, "the changelog is written by hand")
        assert LONG in await core.memories.scopes()
