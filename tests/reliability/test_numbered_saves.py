"""100 numbered saves, each with its own codes, through the real MCP `memory_save`:
100 entries, none demoted (issue 34, finding 5: 97 of 99 ended at 0.30).

"flood r1 stdio number 7 qz000mk z0007q" and "... number 8 ... z0008q" are alike in
their bigrams and differ in a number, but a text with another code (z0007q / z0008q) is
another fact, not an update of the first. Saying one of them again still reinforces it.
"""

from __future__ import annotations

import pytest
from mcp import Client

from adapters.mcp_server import build_server
from memory_core.base.scope import MAIN
from memory_core.engine import MemoryCore

pytestmark = pytest.mark.storage

SAVES = 100


def numbered(n: int) -> str:
    return f"flood r1 stdio number {n} qz000mk z{n:04d}q"


async def test_numbered_saves_with_codes_are_kept_apart(core: MemoryCore) -> None:
    async with Client(build_server(core, MAIN)) as client:
        ids = []
        for n in range(1, SAVES + 1):
            result = await client.call_tool(
                "memory_save", {"content": numbered(n), "target": "long-term"}
            )
            assert not result.is_error, result
            assert result.structured_content is not None
            ids.append(result.structured_content["id"])
        again = await client.call_tool(
            "memory_save", {"content": numbered(7), "target": "long-term"}
        )
        assert again.structured_content is not None
        assert again.structured_content["id"] == ids[6]
    await core.memories.flush()
    entries = {e.content: e for e in await core.memories.entries(MAIN)}
    demoted = [e.content for e in entries.values() if e.score < 0.6]
    print(f"\nnumbered saves: {len(entries)} entries, {len(demoted)} demoted")
    assert len(set(ids)) == SAVES
    assert set(entries) == {numbered(n) for n in range(1, SAVES + 1)}
    assert demoted == []
    assert entries[numbered(7)].score > 0.6  # reinforced by the repeat


async def test_a_changed_value_without_codes_is_still_an_update(core: MemoryCore) -> None:
    first, _ = await core.memories.capture(MAIN, "my PIN is 1234")
    second, result = await core.memories.capture(MAIN, "my PIN is 5678")
    assert result.outcome is not None and result.outcome.replaced == first.id
    await core.memories.flush()
    scores = {e.id: e.score for e in await core.memories.entries(MAIN)}
    assert scores == {first.id: pytest.approx(0.3), second.id: pytest.approx(0.6)}
