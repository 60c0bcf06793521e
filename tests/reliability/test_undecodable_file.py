"""Item 6 of issue 11: a long-term file that is not all UTF-8 is served, not refused.

Its bytes are kept in a copy beside it (once), the blocks with undecodable bytes are
quarantined with those bytes shown escaped, and every other entry is read and written
as usual.
"""

from __future__ import annotations

from memory_core.base.scope import MAIN
from memory_core.engine import MemoryCore
from memory_core.longterm.memory_md_parser import parse_memory


async def test_undecodable_bytes_are_quarantined_and_the_rest_is_served(
    core: MemoryCore,
) -> None:
    for text in ("likes green tea", "owns a red bicycle", "lives in Lyon"):
        await core.memories.capture(MAIN, text)
    await core.memories.flush()
    path = core.memories.path(MAIN)
    # A person's editor saved one line in Latin-1.
    damaged = path.read_bytes().replace(b"lives in Lyon", b"lives in Lyon \xe9t\xe9 2025")
    path.write_bytes(damaged)

    status = await core.memories.status(MAIN)
    assert sorted(e.content for e in status.active) == ["likes green tea", "owns a red bicycle"]
    [block] = status.quarantined
    assert "lives in Lyon \\xe9t\\xe9 2025" in block.text
    assert block.text.startswith("\\### [")  # kept out of the entries until fixed
    assert "not UTF-8" in block.reason
    copies = list(path.parent.glob("MEMORY.md.undecodable-*"))
    assert [c.read_bytes() for c in copies] == [damaged]
    assert [p.block.text for p in await core.memories.validate()] == [block.text]

    # Reads and writes of the scope go on.
    hits = await core.finder.search(MAIN, "bicycle")
    assert [h.text for h in hits] == ["owns a red bicycle"]
    added, _ = await core.memories.capture(MAIN, "plays the cello")
    await core.memories.flush()
    written = path.read_text(encoding="utf-8")  # UTF-8 again
    parsed = parse_memory(written)
    assert added.id in {e.id for e in parsed.entries}
    assert [b.text for b in parsed.quarantined] == [block.text]
    # A person fixes the text (and the escape): the entry is back, id and all.
    fixed = written.replace(block.text, block.text[1:].replace("\\xe9", "é"))
    path.write_text(fixed, encoding="utf-8")
    assert "lives in Lyon été 2025" in [e.content for e in await core.memories.entries(MAIN)]
    # The copy was made once: later reads do not add more.
    assert list(path.parent.glob("MEMORY.md.undecodable-*")) == copies


async def test_a_file_in_another_encoding_keeps_all_its_text(core: MemoryCore) -> None:
    """A whole file saved in GBK: nothing decodes, nothing is lost."""
    path = core.memories.path(MAIN)
    await core.memories.capture(MAIN, "用户对花生过敏")
    await core.memories.flush()
    original = path.read_text(encoding="utf-8")
    path.write_bytes(original.encode("gbk"))
    status = await core.memories.status(MAIN)
    assert status.active == [] and len(status.quarantined) == 1
    [copy] = path.parent.glob("MEMORY.md.undecodable-*")
    assert copy.read_bytes().decode("gbk") == original
