"""The entities of a large long-term file kept beside its parse cache
(`longterm/entity_keeper.py`): a new process reads them and expands a query exactly as
one that found them again would, after a capture, after another program's edit of the
file, and with a torn entities file; and it neither loads the parse nor runs the rules.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core.base.entries import MemoryEntry
from memory_core.base.scope import MAIN
from memory_core.base.workspace import Workspace
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.longterm import entities, parse_cache
from memory_core.longterm.entities import expand_query, extract_entities
from memory_core.longterm.memory_md_parser import clear_parse_cache, parse_memory
from memory_core.longterm.memory_md_renderer import clear_render_cache, render_memory
from tests.support import forget_what_texts_taught

WHEN = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)
"""Recent: a capture's decay (on the real clock) leaves every entry as it is."""
NAMING = [
    "my cat is called Max and he sleeps all day",
    "我的猫叫小橘，很喜欢吃鱼",
    "my sister is called Anna and she lives in Berlin",
    "I work at Bank of China in the city",
]
QUERIES = ["what does my cat eat", "小橘 likes what", "when does Anna visit", "我的猫"]


def big_file(path: Path, extra: tuple[str, ...] = ()) -> list[MemoryEntry]:
    """A file the parse cache keeps (of at least 1 MiB, and 8 192 entries: a write takes
    fewer for a smaller file), dated an hour back as the files a process finds at its
    start are."""
    texts = [*NAMING, *extra] + [f"memory {n} about tea and planning" for n in range(8400)]
    made = [
        MemoryEntry(f"m{n:05d}", text, "fact", 0.5 + (n % 40) / 100, WHEN, WHEN, WHEN)
        for n, text in enumerate(texts)
    ]
    path.write_text(render_memory(made, now=WHEN), encoding="utf-8")
    assert path.stat().st_size >= parse_cache.MIN_BYTES
    age(path)
    return made


def age(path: Path) -> None:
    past = time.time() - 3600
    os.utime(path, (past, past))


def new_process() -> None:
    clear_parse_cache()
    clear_render_cache()
    forget_what_texts_taught()


def computed(path: Path) -> list[entities.Entity]:
    parsed = parse_memory(path.read_text(encoding="utf-8"))
    return extract_entities([e for e in parsed.entries if e.archived is None])


def expansions(found: list[entities.Entity]) -> list[list[str]]:
    return [expand_query(q, found) for q in QUERIES]


async def read_in_a_new_process(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> list[entities.Entity]:
    """The entities a new command process gets, with the rules made to fail: read, not
    found again (and the parse not loaded)."""
    new_process()
    with monkeypatch.context() as patched:

        def no_rules(text: str) -> tuple[entities.Named, ...]:
            raise AssertionError("the entities were found again")

        patched.setattr(entities, "named_in", no_rules)
        async with MemoryCore.open(config, serving=False) as core:
            found = await core.memories.entities(MAIN)
            assert core.memories.store.files.reads.cache_reads == 0  # no parse loaded
            assert core.memories.store.files.reads.parsed_blocks == 0
    return found


async def test_a_new_process_reads_the_entities_a_capture_left(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = config.workspace_path / "MEMORY.md"
    big_file(path)
    async with MemoryCore.open(config, serving=False) as core:
        await core.memories.capture(MAIN, "my dog is called Bolt and loves the park")
    age(path)
    found = await read_in_a_new_process(config, monkeypatch)
    assert found == computed(path)
    assert "Bolt" in {e.name for e in found}
    assert expansions(found) == expansions(computed(path))
    assert expand_query("what does my cat eat", found) == ["Max"]


async def test_each_capture_updates_them_by_difference_and_a_new_process_agrees(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = config.workspace_path / "MEMORY.md"
    big_file(path)
    async with MemoryCore.open(config, serving=False) as core:
        await core.memories.capture(MAIN, "my dog is called Bolt and loves the park")
    for text in ("my brother is called Tom", "Max the cat caught a bird today"):
        age(path)
        new_process()
        async with MemoryCore.open(config, serving=False) as core:
            await core.memories.entities(MAIN)  # read from the file, then kept up to date
            await core.memories.capture(MAIN, text)
            assert await core.memories.entities(MAIN) == computed(path)
    age(path)
    assert await read_in_a_new_process(config, monkeypatch) == computed(path)


async def test_after_another_programs_edit_they_are_found_again(config: Config) -> None:
    path = config.workspace_path / "MEMORY.md"
    big_file(path)
    async with MemoryCore.open(config, serving=False) as core:
        await core.memories.capture(MAIN, "my dog is called Bolt and loves the park")
    # A person's editor (or a sync tool) rewrites the file: the kept entities are of
    # another version and are not served.
    big_file(path, extra=("my horse is called Storm",))
    new_process()
    async with MemoryCore.open(config, serving=False) as core:
        found = await core.memories.entities(MAIN)
    assert found == computed(path)
    assert "Storm" in {e.name for e in found} and "Bolt" not in {e.name for e in found}


async def test_a_torn_entities_file_is_ignored(config: Config) -> None:
    path = config.workspace_path / "MEMORY.md"
    big_file(path)
    async with MemoryCore.open(config, serving=False) as core:
        await core.memories.capture(MAIN, "my dog is called Bolt and loves the park")
    kept = parse_cache.files_for(Workspace.at(config.workspace_path), MAIN).entities
    data = kept.read_bytes()
    kept.write_bytes(data[: len(data) // 3])
    age(path)
    new_process()
    async with MemoryCore.open(config, serving=False) as core:
        found = await core.memories.entities(MAIN)
    assert found == computed(path)
    assert kept.read_bytes() != data[: len(data) // 3]  # found again, and kept again
