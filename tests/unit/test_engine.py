"""MemoryCore, the async facade, driven with a ManualClock."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import timedelta
from pathlib import Path

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.entries import ArchiveReason, Importance, MemoryEntry
from memory_core.base.errors import ChatmemError, EntryNotFound, IndexUnavailable
from memory_core.base.merge_values import ChangeKind, Proposal
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.text import estimate_tokens
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.longterm.memory_md_parser import parse_memory
from memory_core.longterm.memory_md_renderer import render_memory
from memory_core.longterm.prompt import HEADER
from tests.conftest import START
from tests.support import FACT_DAY, sql

pytestmark = pytest.mark.storage

PYTEST_PREF = "用户喜欢用 pytest 而非 unittest"


async def file_entries(core: MemoryCore, scope: ScopeKey = MAIN) -> dict[str, MemoryEntry]:
    """What MEMORY.md holds once staged captures are written."""
    await core.memories.flush(scope)
    text = core.memories.path(scope).read_text(encoding="utf-8")
    parsed = parse_memory(text)
    assert parsed.quarantined == []
    return {e.id: e for e in parsed.entries}


def distinct_text(i: int) -> str:
    """Texts that no similarity rule confuses with one another."""
    return f"note {hashlib.sha256(str(i).encode()).hexdigest()[:24]}"


async def test_capture_then_status(core: MemoryCore) -> None:
    entry, result = await core.memories.capture(MAIN, PYTEST_PREF, category="preference")
    assert result.count(ChangeKind.ADDED) == 1
    assert (entry.content, entry.category, entry.score, entry.hits) == (
        PYTEST_PREF,
        "preference",
        0.6,
        0,
    )
    assert entry.created_at == entry.last_activated == START
    status = await core.memories.status(MAIN)
    assert [e.id for e in status.active] == [entry.id]
    assert status.archived == []
    assert status.quarantined == []
    assert status.path == "MEMORY.md"
    assert (await file_entries(core))[entry.id].content == PYTEST_PREF
    assert (
        (core.workspace.root / "MEMORY.md").read_text(encoding="utf-8").startswith("# Agent Memory")
    )
    [record] = await core.audit.history(MAIN, entry.id)
    assert (record.action, record.old_score, record.new_score, record.source) == (
        "add",
        None,
        0.6,
        "capture",
    )


async def test_capture_rejects_blank_text(core: MemoryCore) -> None:
    with pytest.raises(ChatmemError):
        await core.memories.capture(MAIN, "   ")


async def test_capture_same_text_reinforces(core: MemoryCore, clock: ManualClock) -> None:
    first, _ = await core.memories.capture(MAIN, PYTEST_PREF, category="preference")
    clock.advance(timedelta(hours=2))
    again, result = await core.memories.capture(MAIN, PYTEST_PREF, category="preference")
    assert result.count(ChangeKind.REINFORCED) == 1
    assert again.id == first.id
    assert again.hits == 1
    assert again.score == pytest.approx(0.68)
    assert again.last_activated == START + timedelta(hours=2)
    assert list(await file_entries(core)) == [first.id]
    assert (await file_entries(core))[first.id].score == pytest.approx(0.68)


async def test_importance_sets_initial_score(core: MemoryCore) -> None:
    high, _ = await core.memories.capture(MAIN, distinct_text(1), importance=Importance.HIGH)
    low, _ = await core.memories.capture(MAIN, distinct_text(2), importance="low")
    assert (high.score, low.score) == (0.8, 0.4)


async def test_consolidate_forgets_after_400_days(core: MemoryCore, clock: ManualClock) -> None:
    entry, _ = await core.memories.capture(MAIN, PYTEST_PREF, category="preference")
    clock.advance(timedelta(days=400))
    result = await core.memories.consolidate(MAIN)
    assert result.count(ChangeKind.FORGOTTEN) == 1
    assert await file_entries(core) == {}
    assert (await core.memories.status(MAIN)).active == []
    [record] = await core.audit.forgotten(MAIN)
    assert record.action == "forget"
    assert record.entry_id == entry.id
    assert record.content == PYTEST_PREF
    assert record.category == "preference"
    assert record.old_score == pytest.approx(0.6 * FACT_DAY**393)
    assert record.new_score is None
    assert record.source == "consolidate"
    assert record.at == START + timedelta(days=400)


async def test_consolidate_at_150_days_archives(core: MemoryCore, clock: ManualClock) -> None:
    entry, _ = await core.memories.capture(MAIN, PYTEST_PREF)
    clock.advance(timedelta(days=150))
    result = await core.memories.consolidate(MAIN)
    assert result.count(ChangeKind.ARCHIVED) == 1
    stored = (await file_entries(core))[entry.id]
    assert stored.score == pytest.approx(0.6 * FACT_DAY**143)
    status = await core.memories.status(MAIN)
    assert status.active == []
    assert [e.id for e in status.archived] == [entry.id]
    text = core.memories.path(MAIN).read_text(encoding="utf-8")
    assert text.index("## Archived Memories") < text.index(f"### [{entry.id}]")
    actions = [r.action for r in await core.audit.recent(MAIN)]
    assert actions == ["archive", "add"]


async def test_status_shows_current_scores_without_writing(
    core: MemoryCore, clock: ManualClock
) -> None:
    entry, _ = await core.memories.capture(MAIN, PYTEST_PREF)
    await core.memories.flush()
    before = core.memories.path(MAIN).read_bytes()
    clock.advance(timedelta(days=37))
    status = await core.memories.status(MAIN)
    assert status.active[0].score == pytest.approx(0.6 * FACT_DAY**30)
    assert core.memories.path(MAIN).read_bytes() == before
    assert (await file_entries(core))[entry.id].score == 0.6


async def audit_of(
    core: MemoryCore, entry_id: str
) -> list[tuple[str, float | None, float | None, str]]:
    return [
        (r.action, r.old_score, r.new_score, r.source)
        for r in await core.audit.history(MAIN, entry_id)
    ]


async def test_manual_actions_write_file_and_audit(core: MemoryCore, clock: ManualClock) -> None:
    entry, _ = await core.memories.capture(MAIN, PYTEST_PREF)
    await core.memories.flush()
    path = core.memories.path(MAIN)

    def stamp() -> bytes:
        return path.read_bytes()

    clock.advance(timedelta(days=1))
    before = stamp()
    archived = await core.memories.archive(MAIN, entry.id, source="tui")
    assert archived.archived is ArchiveReason.MANUAL
    assert stamp() != before
    assert (await file_entries(core))[entry.id].archived is ArchiveReason.MANUAL
    assert [e.id for e in (await core.memories.status(MAIN)).archived] == [entry.id]

    clock.advance(timedelta(days=1))
    restored = await core.memories.restore(MAIN, entry.id, source="tui")
    assert restored.archived is None
    assert restored.score == 0.6  # still in grace: nothing decayed
    assert (await file_entries(core))[entry.id].archived is None

    clock.advance(timedelta(days=1))
    pinned = await core.memories.set_pinned(MAIN, entry.id, True, source="cli")
    assert pinned.pinned
    assert (await file_entries(core))[entry.id].pinned

    clock.advance(timedelta(days=1))
    unpinned = await core.memories.set_pinned(MAIN, entry.id, False, source="cli")
    assert not unpinned.pinned
    assert not (await file_entries(core))[entry.id].pinned

    clock.advance(timedelta(days=1))
    edited = await core.memories.edit(
        MAIN, entry.id, "用户喜欢用 pytest\n# 而非 unittest", source="tui"
    )
    assert edited.content == "用户喜欢用 pytest\n# 而非 unittest"
    assert (await file_entries(core))[entry.id].content == "用户喜欢用 pytest\n# 而非 unittest"
    assert edited.score == 0.6
    assert edited.hits == 0

    clock.advance(timedelta(days=1))
    gone = await core.memories.forget(MAIN, entry.id, source="cli")
    assert gone.id == entry.id
    assert await file_entries(core) == {}

    assert await audit_of(core, entry.id) == [
        ("add", None, 0.6, "capture"),
        ("archive", 0.6, 0.6, "tui"),
        ("restore", 0.6, 0.6, "tui"),
        ("pin", 0.6, 0.6, "cli"),
        ("unpin", 0.6, 0.6, "cli"),
        ("edit", 0.6, 0.6, "tui"),
        ("forget", 0.6, None, "cli"),
    ]
    [forgotten] = await core.audit.forgotten(MAIN)
    assert forgotten.content == "用户喜欢用 pytest\n# 而非 unittest"
    # The backup holds the version before the last write.
    assert entry.id in core.workspace.backup_path(MAIN).read_text(encoding="utf-8")


@pytest.mark.parametrize("action", ["archive", "restore", "pin", "unpin", "forget", "edit"])
async def test_unknown_id_raises_and_writes_nothing(core: MemoryCore, action: str) -> None:
    await core.memories.capture(MAIN, PYTEST_PREF)
    await core.memories.flush()
    before = core.memories.path(MAIN).read_bytes()
    calls = {
        "archive": lambda: core.memories.archive(MAIN, "nope"),
        "restore": lambda: core.memories.restore(MAIN, "nope"),
        "pin": lambda: core.memories.set_pinned(MAIN, "nope", True),
        "unpin": lambda: core.memories.set_pinned(MAIN, "nope", False),
        "forget": lambda: core.memories.forget(MAIN, "nope"),
        "edit": lambda: core.memories.edit(MAIN, "nope", "x"),
    }
    with pytest.raises(EntryNotFound):
        await calls[action]()
    assert core.memories.path(MAIN).read_bytes() == before
    with pytest.raises(EntryNotFound):
        await core.memories.get_entry(MAIN, "nope")


async def test_restore_of_decayed_entry_lifts_it_to_low_start(
    core: MemoryCore, clock: ManualClock
) -> None:
    entry, _ = await core.memories.capture(MAIN, PYTEST_PREF)
    clock.advance(timedelta(days=150))
    await core.memories.consolidate(MAIN)
    restored = await core.memories.restore(MAIN, entry.id)
    assert restored.score == 0.4
    assert restored.last_activated == START + timedelta(days=150)
    assert restored.archived is None
    status = await core.memories.status(MAIN)
    assert [e.id for e in status.active] == [entry.id]
    history = await audit_of(core, entry.id)
    assert history[-1][0] == "restore"
    assert history[-1][1] == pytest.approx(0.6 * FACT_DAY**143)
    assert history[-1][2] == 0.4
    # It does not fall straight back: a week later it is still 0.4.
    clock.advance(timedelta(days=7))
    assert (await core.memories.status(MAIN)).active[0].score == 0.4


async def test_pinning_keeps_the_current_score(core: MemoryCore, clock: ManualClock) -> None:
    entry, _ = await core.memories.capture(MAIN, PYTEST_PREF)
    clock.advance(timedelta(days=40))
    decayed = 0.6 * FACT_DAY**33
    pinned = await core.memories.set_pinned(MAIN, entry.id, True)
    # Pinning freezes the score where it is; it does not undo the decay so far.
    assert pinned.score == pytest.approx(decayed)
    assert await audit_of(core, entry.id) == [
        ("add", None, 0.6, "capture"),
        ("pin", pytest.approx(decayed), pytest.approx(decayed), "user"),
    ]
    clock.advance(timedelta(days=1000))
    await core.memories.consolidate(MAIN)
    assert (await file_entries(core))[entry.id].score == pytest.approx(decayed)
    # Unpinned, it decays from now on, not for the years it was pinned.
    unpinned = await core.memories.set_pinned(MAIN, entry.id, False)
    assert unpinned.score == pytest.approx(decayed)
    clock.advance(timedelta(days=1))
    assert (await core.memories.status(MAIN)).active[0].score == pytest.approx(decayed * FACT_DAY)


async def test_merge_candidates_is_idempotent_per_session(
    core: MemoryCore, clock: ManualClock
) -> None:
    cands = [
        Proposal(PYTEST_PREF, "preference", Importance.MEDIUM),
        Proposal("用户提到下周三有产品评审会议", "todo", Importance.HIGH),
    ]
    first = await core.memories.merge_candidates(MAIN, cands, session_id="sess-1", source="extract")
    assert first.stats == {"add": 2}
    assert not first.skipped
    clock.advance(timedelta(hours=1))
    before = core.memories.path(MAIN).read_bytes()
    second = await core.memories.merge_candidates(
        MAIN, cands, session_id="sess-1", source="extract"
    )
    assert second.skipped
    assert second.changes == []
    assert core.memories.path(MAIN).read_bytes() == before
    assert {e.hits for e in (await file_entries(core)).values()} == {0}
    assert await core.audit.seen_sessions(MAIN) == frozenset({"sess-1"})
    assert await core.audit.seen_sessions(ScopeKey("peer:1")) == frozenset()
    rows = await sql(core, "SELECT scope, session_id FROM extractions")
    assert [tuple(r) for r in rows] == [("main", "sess-1")]
    # A new session reinforces.
    third = await core.memories.merge_candidates(
        MAIN, cands[:1], session_id="sess-2", source="extract"
    )
    assert third.stats == {"reinforce": 1}


async def test_concurrent_captures_in_one_process_lose_nothing(core: MemoryCore) -> None:
    texts = [distinct_text(i) for i in range(30)]
    await asyncio.gather(*(core.memories.capture(MAIN, t) for t in texts))
    assert sorted(e.content for e in (await file_entries(core)).values()) == sorted(texts)


# --- prompt ------------------------------------------------------------------------------


async def seed_prompt_entries(core: MemoryCore) -> list[MemoryEntry]:
    now = core.now()
    ranked = [
        MemoryEntry(
            id=f"r{i:02d}",
            content=f"rank {i + 1} {distinct_text(i)}",
            category="fact",
            score=0.99 - i * 0.01,
            created_at=now,
            last_activated=now,
            scored_at=now,
        )
        for i in range(25)
    ]
    extra = [
        MemoryEntry("low", "below the prompt line", "fact", 0.45, now, now, now),
        MemoryEntry(
            "arch", "manually archived", "fact", 0.95, now, now, now, archived=ArchiveReason.MANUAL
        ),
        MemoryEntry(
            "old",
            "decayed since it was stored",
            "fact",
            0.7,
            now - timedelta(days=60),
            now - timedelta(days=60),
            now - timedelta(days=60),
        ),
    ]
    await core.memories.store.update(MAIN, lambda parsed: ([*ranked, *extra], None), now)
    return ranked


async def test_prompt_memories_selects_active_top_20(core: MemoryCore) -> None:
    ranked = await seed_prompt_entries(core)
    block = await core.memories.prompt_memories(MAIN)
    assert block.startswith(HEADER)
    lines = [line for line in block.splitlines() if line.startswith("- ")]
    assert len(lines) == 20
    for rank, (line, entry) in enumerate(zip(lines, ranked, strict=False), start=1):
        assert entry.content in line, f"rank {rank} out of order"
    for absent in ("below the prompt line", "manually archived", "decayed since", "rank 21 "):
        assert absent not in block
    # One shape for every rank: "- [category] content".
    assert all(line.startswith("- [fact] ") for line in lines)
    assert not any("score" in line for line in lines)
    assert estimate_tokens(block) <= core.config.prompt.max_tokens


async def test_prompt_memories_empty_scope(core: MemoryCore) -> None:
    assert await core.memories.prompt_memories(MAIN) == ""
    await core.memories.capture(MAIN, "a low one", importance="low")
    assert await core.memories.prompt_memories(MAIN) == ""


async def test_prompt_memories_shrinks_under_a_small_cap(
    config: Config, clock: ManualClock
) -> None:
    async with MemoryCore.open(config, clock=clock) as full_core:
        ranked = await seed_prompt_entries(full_core)
        full = await full_core.memories.prompt_memories(MAIN)
    cap = estimate_tokens(HEADER) + 60
    small = config.model_copy(
        update={"prompt": config.prompt.model_copy(update={"max_tokens": cap})}
    )
    async with MemoryCore.open(small, clock=clock) as core:
        block = await core.memories.prompt_memories(MAIN)
    assert block
    assert len(block) < len(full)
    lines = [line for line in block.splitlines() if line.startswith("- ")]
    assert 1 <= len(lines) < 20
    assert ranked[0].content in lines[0]
    assert sum(estimate_tokens(line) for line in lines) + estimate_tokens(HEADER) <= cap


async def test_prompt_min_score_and_top_k_are_configurable(
    config: Config, clock: ManualClock
) -> None:
    tuned = config.model_copy(
        update={"prompt": config.prompt.model_copy(update={"min_score": 0.9, "top_k": 3})}
    )
    async with MemoryCore.open(tuned, clock=clock) as core:
        ranked = await seed_prompt_entries(core)
        block = await core.memories.prompt_memories(MAIN)
    lines = [line for line in block.splitlines() if line.startswith("- ")]
    assert len(lines) == 3
    assert all(entry.content in line for line, entry in zip(lines, ranked, strict=False))


# --- daily notes -------------------------------------------------------------------------


async def test_append_daily_returns_path_and_line(core: MemoryCore, clock: ManualClock) -> None:
    path, line = await core.notes.append(MAIN, "first note")
    assert (path, line) == ("memory/2026-03-01.md", 3)
    path2, line2 = await core.notes.append(MAIN, "second note\nwith a second line")
    assert (path2, line2) == ("memory/2026-03-01.md", 4)
    _, line3 = await core.notes.append(MAIN, "third")
    assert line3 == 6
    text = (core.workspace.root / path).read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0] == "# 2026-03-01"
    assert lines[2] == "- 12:00:00 first note"
    assert lines[3] == "- 12:00:00 second note"
    assert lines[4] == "  with a second line"
    assert lines[5] == "- 12:00:00 third"
    with pytest.raises(ChatmemError):
        await core.notes.append(MAIN, "  ")


async def test_recent_daily_today_and_yesterday(core: MemoryCore, clock: ManualClock) -> None:
    await core.notes.append(MAIN, "three days ago", now=START - timedelta(days=2))
    await core.notes.append(MAIN, "yesterday note", now=START - timedelta(days=1))
    await core.notes.append(MAIN, "today early", now=START - timedelta(hours=2))
    await core.notes.append(MAIN, "today late")
    recent = await core.notes.recent(MAIN)
    assert "three days ago" not in recent
    assert recent.index("## 2026-02-28") < recent.index("yesterday note")
    assert recent.index("yesterday note") < recent.index("## 2026-03-01")
    assert recent.index("today early") < recent.index("today late")


async def test_recent_daily_cap_keeps_the_newest(config: Config, clock: ManualClock) -> None:
    capped = config.model_copy(
        update={"prompt": config.prompt.model_copy(update={"daily_max_chars": 60})}
    )
    async with MemoryCore.open(capped, clock=clock) as core:
        await core.notes.append(MAIN, "yesterday, should be cut", now=START - timedelta(days=1))
        for i in range(5):
            clock.advance(timedelta(minutes=1))
            await core.notes.append(MAIN, f"today number {i}")
        recent = await core.notes.recent(MAIN)
    assert "today number 4" in recent
    assert "today number 3" in recent
    assert "today number 0" not in recent
    assert "yesterday" not in recent
    body = [line for line in recent.splitlines() if line.startswith("- ")]
    assert sum(len(line) + 1 for line in body) <= 60


# --- scopes ------------------------------------------------------------------------------


async def test_scopes_are_isolated(core: MemoryCore) -> None:
    peer1, peer2 = ScopeKey("peer:1"), ScopeKey("peer:2")
    entry, _ = await core.memories.capture(peer1, "peer one likes tea")
    await core.notes.append(peer1, "peer one daily")
    assert [e.id for e in (await core.memories.status(peer1)).active] == [entry.id]
    assert (await core.memories.status(MAIN)).active == []
    assert (await core.memories.status(peer2)).active == []
    assert await core.memories.prompt_memories(peer2) == ""
    assert await core.notes.recent(MAIN) == ""
    assert not core.memories.path(MAIN).exists()
    long_term = core.workspace.root / "memory" / "scopes" / "peer_1" / "LONG_TERM.md"
    assert long_term.is_file()
    assert (await core.memories.status(peer1)).path == "memory/scopes/peer_1/LONG_TERM.md"
    assert (core.workspace.root / "memory" / "scopes" / "peer_1" / "2026-03-01.md").is_file()
    assert not (core.workspace.root / "memory" / "2026-03-01.md").exists()
    assert entry.content in long_term.read_text(encoding="utf-8")
    # The same text in another scope is a new entry there, not a reinforcement.
    _, result = await core.memories.capture(peer2, "peer one likes tea")
    assert result.count(ChangeKind.ADDED) == 1
    assert (await core.memories.get_entry(peer1, entry.id)).hits == 0
    with pytest.raises(EntryNotFound):
        await core.memories.forget(MAIN, entry.id)
    assert await core.memories.scopes() == [MAIN, peer1, peer2]
    assert {r.scope for r in await core.audit.recent()} == {"peer:1", "peer:2"}
    assert [r.scope for r in await core.audit.recent(MAIN)] == []


async def test_validate_reports_quarantined_blocks(core: MemoryCore) -> None:
    await core.memories.capture(MAIN, PYTEST_PREF)
    assert await core.memories.validate() == []
    path = core.memories.path(MAIN)
    broken = "### [zz9] fact | lots | 2026-01-01 | 1\nbroken by hand"
    path.write_text(path.read_text(encoding="utf-8") + "\n" + broken + "\n", encoding="utf-8")
    problems = await core.memories.validate()
    assert len(problems) == 1
    assert problems[0].path == "MEMORY.md"
    assert problems[0].block.text == broken
    assert "score" in problems[0].block.reason
    # A write keeps the quarantined block.
    await core.memories.capture(MAIN, distinct_text(5))
    await core.memories.flush()
    assert distinct_text(5) in path.read_text(encoding="utf-8")
    assert broken in path.read_text(encoding="utf-8")
    assert len((await core.memories.status(MAIN)).quarantined) == 1


async def test_hand_edit_is_seen_by_the_next_load(core: MemoryCore) -> None:
    entry, _ = await core.memories.capture(MAIN, PYTEST_PREF)
    assert (await core.memories.get_entry(MAIN, entry.id)).score == 0.6
    path = core.memories.path(MAIN)
    text = path.read_text(encoding="utf-8").replace("| 0.60 |", "| 0.95 |")
    path.write_text(text + "\n", encoding="utf-8")
    assert (await core.memories.get_entry(MAIN, entry.id)).score == 0.95


# --- a broken database -------------------------------------------------------------------


@pytest.mark.sqlite_only
async def test_corrupt_index_degrades_but_files_still_work(
    config: Config, clock: ManualClock, workspace: Path
) -> None:
    db_path = workspace / ".chatmem" / "index.sqlite3"
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"this is not a database \x00\xff" * 200)
    async with MemoryCore.open(config, clock=clock) as core:
        assert core.degraded_reason
        assert "index.sqlite3" in core.degraded_reason
        with pytest.raises(IndexUnavailable):
            await core.audit.recent(MAIN)
        entry, _ = await core.memories.capture(MAIN, PYTEST_PREF)
        await core.memories.merge_candidates(MAIN, [Proposal("x y z")], session_id="s", source="t")
        assert (await file_entries(core))[entry.id].content == PYTEST_PREF
        assert len((await core.memories.status(MAIN)).active) == 2
        await core.memories.forget(MAIN, entry.id)
        assert entry.id not in await file_entries(core)


async def test_render_of_seeded_file_matches_what_core_reads(core: MemoryCore) -> None:
    now = core.now()
    entries = [MemoryEntry("a1", "hello", "fact", 0.5, now, now, now)]
    core.memories.path(MAIN).write_text(render_memory(entries, now=now), encoding="utf-8")
    assert await core.memories.entries(MAIN) == entries
