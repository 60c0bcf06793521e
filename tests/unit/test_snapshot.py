"""Layer 1, the working snapshot: budget shares by rank, section limits, richer text for
higher ranks, fixed sections that survive rebuilds, the prompt it replaces, the quiet
period that rebuilds it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.entries import MemoryEntry
from memory_core.base.scope import ScopeKey
from memory_core.base.text import estimate_tokens
from memory_core.config import Config, load_config
from memory_core.engine import MemoryCore
from memory_core.snapshot.builder import (
    BUDGET_RANGE,
    CONCISE_RANKS,
    FIXED_LIMITS,
    IDENTITY,
    INDEX_RANGE,
    RANKED_INDEX,
    RECENT,
    RECENT_LIMIT,
    SECTION_ORDER,
    SUMMARIES_RANGE,
    TOP_SUMMARIES,
    build_snapshot,
    cut_to_tokens,
    fixed_sections,
    rank_shares,
)
from testkit.openai_server import FakeOpenAI
from tests.postgres import with_storage
from tests.unit.chat_support import fake_fixture, model_config, turn_requests  # noqa: F401

ALICE = ScopeKey("peer:alice")
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def entry(n: int, words: int = 60) -> MemoryEntry:
    text = f"memory {n}: " + " ".join(f"word{n}x{i}" for i in range(words))
    return MemoryEntry(
        id=f"{n:08x}",
        content=text,
        category="fact",
        score=round(0.99 - n * 0.003, 3),
        created_at=NOW,
        last_activated=NOW,
        scored_at=NOW,
    )


def snapshot_config(workspace: Path, **snapshot: object) -> Config:
    config = load_config(None, env=with_storage(), workspace=workspace)
    return config.model_copy(update={"snapshot": config.snapshot.model_copy(update=snapshot)})


# --- pure: shares, limits, richness --------------------------------------------------------


def test_rank_shares_are_the_seeds() -> None:
    shares = rank_shares(10)
    assert shares[:3] == pytest.approx([0.40, 0.25, 0.15])
    assert shares[3:] == pytest.approx([0.20 / 7] * 7)
    assert sum(shares) == pytest.approx(1.0)
    assert rank_shares(1) == [1.0]
    assert rank_shares(2) == pytest.approx([0.40 / 0.65, 0.25 / 0.65])
    assert rank_shares(0) == []


def test_cut_to_tokens_keeps_within_the_budget() -> None:
    text = "一二三四五六七八九十 and some english words after it"
    for tokens in range(2, 30):
        cut = cut_to_tokens(text, tokens)
        assert estimate_tokens(cut) <= tokens
    assert cut_to_tokens("short", 10) == "short"
    assert cut_to_tokens("long " * 50, 5).endswith("…")


@pytest.mark.parametrize("budget", [1000, 2000, 3000, 4000, 9000])
def test_sections_keep_their_limits_and_the_budget(budget: int) -> None:
    fixed = {title: "x " * 150 for title in FIXED_LIMITS}
    summaries = [f"2026-02-{d:02d}: " + "summary words " * 200 for d in range(1, 20)]
    recent = [f"- 03-01 12:{m:02d} input: message {m} " + "y " * 30 for m in range(40)]
    snapshot = build_snapshot([entry(n) for n in range(300)], summaries, recent, fixed, NOW, budget)
    assert snapshot.budget == min(max(budget, BUDGET_RANGE[0]), BUDGET_RANGE[1])
    assert [s.title for s in snapshot.sections] == list(SECTION_ORDER)
    for section in snapshot.sections:
        assert 0 < section.tokens <= section.limit, section.title
    for title, limit in FIXED_LIMITS.items():
        assert snapshot.section(title).limit == limit
    assert SUMMARIES_RANGE[0] <= snapshot.section(TOP_SUMMARIES).limit <= SUMMARIES_RANGE[1]
    assert INDEX_RANGE[0] <= snapshot.section(RANKED_INDEX).limit <= INDEX_RANGE[1]
    assert snapshot.section(RECENT).limit == RECENT_LIMIT
    assert snapshot.tokens <= snapshot.budget
    # Recent holds the newest events first.
    assert snapshot.section(RECENT).text.startswith("- 03-01 12:39")


def test_higher_ranks_get_richer_text() -> None:
    snapshot = build_snapshot([entry(n, words=300) for n in range(40)], [], [], {}, NOW)
    lines = snapshot.section(RANKED_INDEX).text.splitlines()
    costs = [estimate_tokens(line) for line in lines]
    assert costs[0] > costs[1] > costs[2] > costs[3]
    text_room = 0.85 * snapshot.section(RANKED_INDEX).limit  # the rest is the pointers'
    assert costs[0] == pytest.approx(0.40 * text_room, abs=3)
    assert "2026-03-01" in lines[0] and "2026-03-01" not in lines[3]  # top ranks dated
    assert all(line.endswith("…") for line in lines[:CONCISE_RANKS])  # cut to their shares
    middle = 0.20 * text_room / (CONCISE_RANKS - 3)
    assert all(abs(cost - middle) <= 3 for cost in costs[3:CONCISE_RANKS])
    pointers = lines[CONCISE_RANKS:]
    assert len(pointers) == 40 - CONCISE_RANKS
    assert pointers[0] == f"- [{entry(CONCISE_RANKS).id}] fact {entry(CONCISE_RANKS).score:.2f}"
    # A short memory at the top is shown whole.
    short = build_snapshot([entry(0, words=8)], [], [], {}, NOW).section(RANKED_INDEX).text
    assert short.endswith(entry(0, words=8).content)


def test_a_small_scope_uses_what_it_has() -> None:
    snapshot = build_snapshot([entry(1, words=5)], [], [], {}, NOW)
    assert snapshot.section(RANKED_INDEX).text == f"- [{entry(1).id}] fact 0.99 2026-03-01: " + (
        entry(1, words=5).content
    )
    assert snapshot.section(TOP_SUMMARIES).text == ""


def test_a_long_hand_written_section_is_kept_whole_and_shown_over() -> None:
    words = "the household assistant of the Li family " * 40
    snapshot = build_snapshot([entry(1)], [], [], {IDENTITY: words}, NOW)
    identity = snapshot.section(IDENTITY)
    assert identity.text == words.strip() and identity.tokens > identity.limit


def test_fixed_sections_read_back_from_a_rendered_file() -> None:
    fixed = {IDENTITY: "I am chatmem, the family's bot.", "Owner": "Alice.\nLikes tea."}
    text = build_snapshot([entry(1)], ["a summary"], [], fixed, NOW).render()
    assert fixed_sections(text) == {
        "Identity": "I am chatmem, the family's bot.",
        "Owner": "Alice.\nLikes tea.",
        "Constraints": "",
    }
    assert fixed_sections("") == {}


# --- the file, the prompt, the quiet period ----------------------------------------------------


async def test_hand_edits_of_fixed_sections_survive_rebuilds(
    workspace: Path, clock: ManualClock
) -> None:
    config = snapshot_config(workspace, identity="From the config.", owner="Owner from config.")
    async with MemoryCore.open(config, clock=clock) as core:
        await core.memories.capture(ALICE, "Alice's cat is called Xiaoju")
        first = await core.snapshots.rebuild(ALICE)
        assert first.section(IDENTITY).text == "From the config."
        path = workspace / core.workspace.relative(core.snapshots.path(ALICE))
        edited = path.read_text(encoding="utf-8").replace(
            "From the config.", "Hand-written identity:\nthe household assistant."
        )
        path.write_text(edited, encoding="utf-8")
        await core.memories.capture(ALICE, "Alice moved to Hangzhou in May")
        again = await core.snapshots.rebuild(ALICE)
        text = path.read_text(encoding="utf-8")
        assert again.section(IDENTITY).text == "Hand-written identity:\nthe household assistant."
        assert "Hand-written identity:\nthe household assistant." in text
        assert "Owner from config." in text
        assert "Hangzhou" in text and "Xiaoju" in text
        # A dry run writes nothing.
        await core.memories.capture(ALICE, "Alice started learning the violin")
        await core.snapshots.build(ALICE)
        assert "violin" not in path.read_text(encoding="utf-8")
    # The config's Owner was never edited by hand: a changed setting shows at the next
    # build, while the hand-written Identity stays as written.
    changed = snapshot_config(workspace, identity="New config identity.", owner="New owner.")
    async with MemoryCore.open(changed, clock=clock) as core:
        third = await core.snapshots.rebuild(ALICE)
        assert third.section("Owner").text == "New owner."
        assert third.section(IDENTITY).text == "Hand-written identity:\nthe household assistant."


async def test_the_snapshot_replaces_the_top_entries_in_the_prompt(
    fake: FakeOpenAI,
    workspace: Path,
    clock: ManualClock,
) -> None:
    config = model_config(fake, workspace)
    on = config.model_copy(
        update={"snapshot": config.snapshot.model_copy(update={"enabled": True})}
    )
    async with MemoryCore.open(on, clock=clock) as core:
        await core.memories.capture(ALICE, "Alice's cat is called Xiaoju")
        fake.reply_text("ok")
        await core.conversation.turn(ALICE, "hello")
        system = turn_requests(fake)[-1]["messages"][0]["content"]
        assert "## Ranked Index" in system and "Xiaoju" in system
        assert "历史记忆" not in system
        assert (workspace / core.workspace.relative(core.snapshots.path(ALICE))).exists()
        assert (
            await core.snapshots.prompt_block(ALICE)
            == (workspace / core.workspace.relative(core.snapshots.path(ALICE))).read_text()
        )
    async with MemoryCore.open(config, clock=clock) as core:
        fake.reply_text("ok")
        await core.conversation.turn(ALICE, "hello again")
        system = turn_requests(fake)[-1]["messages"][0]["content"]
        assert "## Ranked Index" not in system and "Xiaoju" in system


async def test_the_quiet_period_rebuilds_the_snapshots(workspace: Path, clock: ManualClock) -> None:
    async with MemoryCore.open(snapshot_config(workspace, enabled=True), clock=clock) as core:
        await core.memories.capture(ALICE, "Alice's cat is called Xiaoju")
        path = workspace / core.workspace.relative(core.snapshots.path(ALICE))
        assert not path.exists()
        clock.advance(timedelta(minutes=30))
        assert "quiet-consolidation" in await core.conversation.tick()
        assert "Xiaoju" in path.read_text(encoding="utf-8")
    # The same workspace with snapshots off (one workspace: a PostgreSQL database
    # serves one): a scope changed since writes none.
    bob = ScopeKey("peer:bob")
    async with MemoryCore.open(snapshot_config(workspace), clock=clock) as core:
        await core.memories.capture(bob, "a memory")
        clock.advance(timedelta(days=1, minutes=30))
        assert "quiet-consolidation" in await core.conversation.tick()
        assert not (workspace / core.workspace.relative(core.snapshots.path(bob))).exists()


def test_the_budget_setting_is_checked(tmp_path: Path) -> None:
    from memory_core.base.errors import ConfigError

    bad = tmp_path / "bad.toml"
    bad.write_text("[snapshot]\nbudget_tokens = 500\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"snapshot\.budget_tokens"):
        load_config(bad, env={})


async def test_the_prompt_never_carries_a_stale_snapshot(
    workspace: Path, clock: ManualClock
) -> None:
    async with MemoryCore.open(snapshot_config(workspace, enabled=True), clock=clock) as core:
        assert "## Ranked Index" in await core.snapshots.prompt_block(ALICE)
        tea, _ = await core.memories.capture(ALICE, "Alice drinks green tea")
        assert "green tea" in await core.snapshots.prompt_block(ALICE)
        built = (workspace / core.workspace.relative(core.snapshots.path(ALICE))).stat().st_mtime_ns
        assert "green tea" in await core.snapshots.prompt_block(ALICE)  # unchanged: not rebuilt
        assert (
            workspace / core.workspace.relative(core.snapshots.path(ALICE))
        ).stat().st_mtime_ns == built
        await core.memories.forget(ALICE, tea.id)
        assert "green tea" not in await core.snapshots.prompt_block(ALICE)


async def test_pointers_name_the_line_memory_get_opens(workspace: Path, clock: ManualClock) -> None:
    async with MemoryCore.open(snapshot_config(workspace), clock=clock) as core:
        for n in range(CONCISE_RANKS + 2):
            await core.memories.capture(ALICE, f"memory number {n} about topic {n * 7919}")
        snapshot = await core.snapshots.build(ALICE)
        pointer = snapshot.section(RANKED_INDEX).text.splitlines()[-1]
        location = pointer.rsplit(" ", 1)[1]
        read = await core.finder.read(ALICE, location)
        entry_id = pointer.split("]")[0].removeprefix("- [")
        assert f"[{entry_id}]" in read.text
