"""The consolidation phases: the pure decisions, then the resumable, idempotent run
over a real workspace (both storage backends), offline and with a model."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core.base.clock import ManualClock, format_when
from memory_core.base.entries import ArchiveReason, Importance, MemoryClass, MemoryEntry
from memory_core.base.merge_values import ChangeKind
from memory_core.base.scope import ScopeKey
from memory_core.base.text import tokenize
from memory_core.config import Config, load_config
from memory_core.consolidation.phases import (
    MAX_SUMMARY_CHARS,
    PHASES,
    EventRef,
    Judgement,
    Phase,
    Verdict,
    apply_judgements,
    apply_summaries,
    inputs_to_consider,
    plan_summaries,
    polarity_verdict,
    same_subject,
    summary_id,
    verification_pairs,
    worth_extracting,
)
from memory_core.engine import MemoryCore
from memory_core.longterm.scoring import Status, rank_terms, status_of
from memory_core.notes.event_log import Event, EventKind, message_events
from testkit.openai_server import FakeOpenAI
from tests.postgres import with_storage
from tests.unit.chat_support import fake_fixture, model_config  # noqa: F401

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ALICE = ScopeKey("peer:alice")


def entry(
    entry_id: str,
    content: str,
    *,
    at: datetime = T0,
    memory_class: MemoryClass | None = None,
    category: str = "fact",
    **kw: object,
) -> MemoryEntry:
    return MemoryEntry(
        id=entry_id,
        content=content,
        category=category,
        score=kw.pop("score", 0.6),  # type: ignore[arg-type]
        created_at=at,
        last_activated=at,
        scored_at=at,
        memory_class=memory_class,
        **kw,  # type: ignore[arg-type]
    )


def said(text: str, session: str | None = "s1") -> Event:
    return Event(EventKind.INPUT, T0, {"text": text}, session)


# --- filter ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("我喜欢乌龙茶", True),
        ("I moved to Hangzhou last spring", True),
        ("你觉得明天会下雨吗", False),
        ("what time is it?", False),
        ("谢谢", False),
        ("ok", False),
        ("thanks!", False),
        ("/new", False),
    ],
)
def test_the_offline_filter_keeps_statements(text: str, kept: bool) -> None:
    assert worth_extracting(said(text)) is kept


def test_the_filter_reads_only_inputs() -> None:
    reply = Event(EventKind.OUTPUT, T0, {"text": "I moved to Hangzhou last spring"}, "s1")
    assert not worth_extracting(reply)


def test_inputs_skip_merged_sessions_and_wait_for_open_ones() -> None:
    events = [
        (EventRef("2026-03-02", 0), said("我喜欢乌龙茶", "done")),
        (EventRef("2026-03-02", 1), said("我住在杭州", "closed")),
        (EventRef("2026-03-02", 2), said("I am learning the violin", "open")),
        (EventRef("2026-03-02", 3), said("我养了一只猫", "closed")),
        (EventRef("2026-03-03", 0), said("my sister is Carol", None)),
    ]
    chosen, cursor = inputs_to_consider(events, None, {"done"}, {"open"})
    assert [ref for ref, _ in chosen] == [
        EventRef("2026-03-02", 1),
        EventRef("2026-03-02", 3),
        EventRef("2026-03-03", 0),
    ]
    # The cursor stops before the open session: once it closes, the next run sees it.
    assert cursor == EventRef("2026-03-02", 1)
    later, _ = inputs_to_consider(events, cursor, {"done", "closed"}, set())
    assert [ref for ref, _ in later] == [EventRef("2026-03-02", 2), EventRef("2026-03-03", 0)]


# --- verify ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("belief", "fact", "verdict"),
    [
        ("Alice likes jazz music", "Alice likes jazz music a lot", Verdict.CONFIRMED),
        ("Alice likes jazz music", "Alice no longer likes jazz music", Verdict.CONTRADICTED),
        ("用户喜欢喝咖啡", "用户不喜欢喝咖啡", Verdict.CONTRADICTED),
        ("用户喜欢喝咖啡", "用户每天都喝咖啡，很喜欢", Verdict.CONFIRMED),
        ("Alice likes jazz music", "Bob owns a red bicycle", Verdict.UNRELATED),
    ],
)
def test_offline_judgement(belief: str, fact: str, verdict: Verdict) -> None:
    """Unrelated unless the two share most terms, then by polarity (the offline judge)."""
    if not same_subject(set(tokenize(belief)), set(tokenize(fact))):
        assert verdict is Verdict.UNRELATED
    else:
        assert polarity_verdict(belief, fact) is verdict


def test_only_later_unchecked_facts_are_paired_with_a_belief() -> None:
    belief = entry("b", "Alice likes jazz", memory_class=MemoryClass.BELIEF)
    earlier = entry("f0", "Alice likes jazz", at=T0 - timedelta(days=1))
    later = entry("f1", "Alice hates jazz", at=T0 + timedelta(days=2))
    newest = entry("f2", "Alice plays jazz", at=T0 + timedelta(days=5))
    other = entry("f3", "Bob owns a red bicycle", at=T0 + timedelta(days=5))
    entries = [belief, earlier, later, newest, other]
    when = T0 + timedelta(days=6)

    def pairs(checked: datetime | None) -> list[tuple[str, str]]:
        found = verification_pairs(entries, checked, when, tokenize)
        return [(b.id, f.id) for b, facts in found for f in facts]

    assert pairs(None) == [("b", "f1"), ("b", "f2")]  # not the earlier, not Bob's bicycle
    assert pairs(T0 + timedelta(days=3)) == [("b", "f2")]
    # A state "as of" a later day than now (a simulated run) checks everything again.
    assert pairs(when + timedelta(days=30)) == [("b", "f1"), ("b", "f2")]


def test_judgements_move_confidence_once() -> None:
    belief = entry("b", "Alice likes jazz", memory_class=MemoryClass.BELIEF, confidence=0.6)
    contradicted = [Judgement("b", "f1", Verdict.CONTRADICTED)]
    once, changes = apply_judgements([belief], contradicted, T0)
    assert once[0].confidence == pytest.approx(0.3)
    assert [c.kind for c in changes] == [ChangeKind.EDITED]
    assert "contradicted by [f1]" in changes[0].detail
    twice, again = apply_judgements(once, contradicted, T0)
    assert twice == once and again == []


def test_a_belief_confirmed_often_enough_becomes_a_fact() -> None:
    belief = entry("b", "Alice likes jazz", memory_class=MemoryClass.BELIEF, confidence=0.85)
    confirmed = [Judgement("b", f"f{n}", Verdict.CONFIRMED) for n in range(3)]
    entries, changes = apply_judgements([belief], confirmed, T0)
    assert entries[0].memory_class is MemoryClass.FACT
    assert entries[0].confidence == pytest.approx(0.88 + 0.12 * 0.2)  # 0.85 -> 0.88 -> 0.904
    # Once a fact, later confirmations no longer apply to it as a belief.
    assert len(changes) == 2 and changes[-1].detail.endswith("now a fact")


# --- summarize ---------------------------------------------------------------------------


def week_of_events() -> list[MemoryEntry]:
    return [
        entry("e1", "went hiking at Mount Tai", memory_class=MemoryClass.EVENT),
        entry(
            "e2",
            "visited aunt in Hangzhou",
            at=T0 + timedelta(days=2),
            memory_class=MemoryClass.EVENT,
        ),
        entry(
            "e3", "dentist appointment", at=T0 + timedelta(days=3), memory_class=MemoryClass.EVENT
        ),
        entry("t1", "renew the passport", at=T0 + timedelta(days=3), category="todo"),
        # a week later: a single event stays itself
        entry("e4", "concert with Bob", at=T0 + timedelta(days=8), memory_class=MemoryClass.EVENT),
        # too recent to summarize
        entry("e5", "new job started", at=T0 + timedelta(days=20), memory_class=MemoryClass.EVENT),
        entry("e6", "a pinned trip", memory_class=MemoryClass.EVENT, pinned=True),
        entry(
            "e7", "archived by hand", memory_class=MemoryClass.EVENT, archived=ArchiveReason.MANUAL
        ),
        entry("f1", "Alice lives in Hangzhou"),
    ]


def test_a_week_of_events_becomes_one_summary() -> None:
    when = T0 + timedelta(days=22)
    plans = plan_summaries(week_of_events(), when)
    assert [(p.label, p.covers) for p in plans] == [
        ("2026-03-02 to 2026-03-05", ("e1", "e2", "e3"))
    ]
    plan = plans[0]
    assert plan.id == summary_id(["e3", "e1", "e2"])
    assert "went hiking at Mount Tai" in plan.text and "2026-03-04" in plan.text


def test_long_weeks_are_split_into_readable_summaries() -> None:
    long = [
        entry(
            f"e{n}",
            f"event {n} " + "x" * 300,
            at=T0 + timedelta(hours=n),
            memory_class=MemoryClass.EVENT,
        )
        for n in range(10)
    ]
    plans = plan_summaries(long, T0 + timedelta(days=30))
    assert len(plans) > 1
    assert sorted(i for p in plans for i in p.covers) == sorted(e.id for e in long)
    assert all(len(p.text) <= MAX_SUMMARY_CHARS + 400 for p in plans)


def test_a_summary_replaces_its_events_in_ranking_and_applies_once() -> None:
    when = T0 + timedelta(days=22)
    events = week_of_events()
    plans = plan_summaries(events, when)
    after, changes = apply_summaries(events, plans, when)
    by_id = {e.id: e for e in after}
    summary = by_id[plans[0].id]
    assert summary.memory_class is MemoryClass.SUMMARY
    assert summary.importance is Importance.MEDIUM
    for covered in ("e1", "e2", "e3"):
        assert by_id[covered].archived is ArchiveReason.SUMMARIZED
        assert status_of(by_id[covered]) is Status.ARCHIVED
    assert status_of(summary) is Status.ACTIVE
    ranked = sorted(
        (e for e in after if status_of(e) is Status.ACTIVE),
        key=lambda e: -rank_terms(e, when).total,
    )
    assert summary.id in [e.id for e in ranked]
    assert not {"e1", "e2", "e3"} & {e.id for e in ranked}
    assert [c.kind for c in changes].count(ChangeKind.ADDED) == 1
    assert [c.kind for c in changes].count(ChangeKind.ARCHIVED) == 3
    # Running the phase again over its own result plans nothing and changes nothing.
    assert plan_summaries(after, when) == []
    again, none = apply_summaries(after, plans, when)
    assert none == [] and sorted(again, key=lambda e: e.id) == sorted(after, key=lambda e: e.id)


# --- the run over a workspace ------------------------------------------------------------


def offline_config(workspace: Path, **snapshot: object) -> Config:
    config = load_config(None, env=with_storage(), workspace=workspace)
    return config.model_copy(update={"snapshot": config.snapshot.model_copy(update=snapshot)})


async def seed_scope(core: MemoryCore, clock: ManualClock) -> None:
    """A scope with a week of events, a belief, a later fact against it, and raw inputs of
    a session that never reached long-term memory."""
    await core.memories.capture(ALICE, "went hiking at Mount Tai", memory_class=MemoryClass.EVENT)
    clock.advance(timedelta(days=1))
    await core.memories.capture(
        ALICE, "visited my aunt in Hangzhou", memory_class=MemoryClass.EVENT
    )
    events = core.event_log
    for text in ("我喜欢乌龙茶", "你好", "what is the weather?"):
        await events.record(ALICE, *message_events("user", text, clock(), "lost-session"))
    await events.record(
        ALICE, *message_events("user", "I am learning the violin", clock(), "open-one")
    )


async def write_belief(core: MemoryCore, clock: ManualClock) -> None:
    from memory_core.base.merge_values import Proposal

    await core.memories.merge_candidates(
        ALICE,
        [Proposal("Alice likes jazz music", memory_class=MemoryClass.BELIEF, confidence=0.6)],
        session_id="b",
        source="test",
    )
    clock.advance(timedelta(days=1))
    await core.memories.capture(ALICE, "Alice no longer likes jazz music")


async def test_a_full_run_then_a_second_run_changes_nothing(
    workspace: Path, clock: ManualClock
) -> None:
    config = offline_config(workspace, enabled=True)
    async with MemoryCore.open(config, clock=clock) as bot:
        # A bot's process holds the session open; the run below is another process's,
        # whose core has asked nothing of the history before it consolidates.
        await seed_scope(bot, clock)
        await bot.record_session(ALICE, "open-one", clock(), [], status="open")
        await write_belief(bot, clock)
    clock.advance(timedelta(days=9))
    async with MemoryCore.open(config, clock=clock) as core:
        reports = await core.consolidation.run(ALICE)
        assert [r.phase for r in reports] == list(PHASES)
        by_phase = {r.phase: r for r in reports}
        assert by_phase[Phase.FILTER].changes == 1  # 我喜欢乌龙茶; not 你好, not a question
        entries = {e.content: e for e in await core.memories.entries(ALICE)}
        assert "我喜欢乌龙茶" in entries
        assert "I am learning the violin" not in entries  # its session is still open
        belief = entries["Alice likes jazz music"]
        assert belief.confidence == pytest.approx(0.3)
        summaries = [e for e in entries.values() if e.memory_class is MemoryClass.SUMMARY]
        assert len(summaries) == 1
        assert "Mount Tai" in summaries[0].content and "Hangzhou" in summaries[0].content
        assert entries["went hiking at Mount Tai"].archived is ArchiveReason.SUMMARIZED
        snapshot = (workspace / core.workspace.relative(core.snapshots.path(ALICE))).read_text(
            encoding="utf-8"
        )
        top = snapshot.split("## Top Summaries")[1].split("## Ranked Index")[0]
        assert "went hiking at Mount Tai" in top  # the summary leads; its events left the index
        assert "went hiking" not in snapshot.split("## Ranked Index")[1]

        memory_file = workspace / core.memories.relative_path(ALICE)
        before = memory_file.read_bytes()
        state = json.loads((core.workspace.memory_dir(ALICE) / "consolidation.json").read_text())
        again = await core.consolidation.run(ALICE)
        assert [r.changes for r in again if r.phase is not Phase.SNAPSHOT] == [0] * 5
        assert memory_file.read_bytes() == before
        state_again = json.loads(
            (core.workspace.memory_dir(ALICE) / "consolidation.json").read_text()
        )
        assert state_again["cursor"] == state["cursor"]
        assert state_again["pending"] == state_again["candidates"] == []


@pytest.mark.sqlite_only
async def test_without_the_database_the_filter_takes_no_input(
    workspace: Path, clock: ManualClock
) -> None:
    """Only the history knows which sessions are still open: a run without it took every
    input as if no session were, an open one's from under its /new."""
    config = offline_config(workspace)
    async with MemoryCore.open(config, clock=clock) as core:
        await seed_scope(core, clock)
        before = await core.memories.entries(ALICE)
    (workspace / ".chatmem" / "index.sqlite3").write_bytes(b"not a database" * 512)
    async with MemoryCore.open(config, clock=clock) as core:
        assert not core.has_database
        filtered, extracted = await core.consolidation.run(ALICE, [Phase.FILTER, Phase.EXTRACT])
        assert (filtered.changes, extracted.changes) == (0, 0)
        assert filtered.detail == "no session history (no database), inputs wait"
        assert await core.memories.entries(ALICE) == before
        state = core.workspace.memory_dir(ALICE) / "consolidation.json"
    assert not state.exists()  # the cursor did not move


async def test_a_run_cut_between_extract_and_merge_resumes(
    workspace: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with MemoryCore.open(offline_config(workspace), clock=clock) as core:
        for text in ("我喜欢乌龙茶", "I live in Hangzhou"):
            await core.event_log.record(ALICE, *message_events("user", text, clock(), "s1"))
        long_term = core.memories
        merge = long_term.merge_candidates

        async def crash(*args: object, **kwargs: object) -> None:
            raise OSError("disk went away")

        monkeypatch.setattr(long_term, "merge_candidates", crash)
        with pytest.raises(OSError):
            await core.consolidation.run(ALICE, [Phase.FILTER, Phase.EXTRACT])
        state_path = core.workspace.memory_dir(ALICE) / "consolidation.json"
        state = json.loads(state_path.read_text(encoding="utf-8"))
        assert state["pending"] == []  # the inputs became candidates, kept in the state
        assert [c["content"] for c in state["candidates"]] == ["我喜欢乌龙茶", "I live in Hangzhou"]
        assert await long_term.entries(ALICE) == []

        monkeypatch.setattr(long_term, "merge_candidates", merge)
        reports = await core.consolidation.run(ALICE)
        contents = sorted(e.content for e in await long_term.entries(ALICE))
        assert contents == ["I live in Hangzhou", "我喜欢乌龙茶"]
        assert {r.phase: r.changes for r in reports}[Phase.FILTER] == 0  # not read twice
        assert json.loads(state_path.read_text(encoding="utf-8"))["candidates"] == []
        # And the same inputs are never extracted again.
        await core.consolidation.run(ALICE)
        assert sorted(e.content for e in await long_term.entries(ALICE)) == contents


async def test_an_unreadable_state_is_kept_aside_not_lost(
    workspace: Path, clock: ManualClock
) -> None:
    async with MemoryCore.open(offline_config(workspace), clock=clock) as core:
        path = core.workspace.memory_dir(ALICE) / "consolidation.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{not json", encoding="utf-8")
        await core.consolidation.run(ALICE, [Phase.VERIFY])
        assert path.with_name("consolidation.json.unreadable").read_text() == "{not json"
        assert json.loads(path.read_text(encoding="utf-8"))["version"] == 1


async def test_the_quiet_period_runs_every_phase(workspace: Path, clock: ManualClock) -> None:
    async with MemoryCore.open(offline_config(workspace), clock=clock) as core:
        await core.memories.capture(
            ALICE, "went hiking at Mount Tai", memory_class=MemoryClass.EVENT
        )
        await core.memories.capture(
            ALICE, "visited my aunt in Hangzhou", memory_class=MemoryClass.EVENT
        )
        clock.advance(timedelta(days=8))
        assert "quiet-consolidation" in await core.conversation.tick()
        entries = await core.memories.entries(ALICE)
        [summary] = [e for e in entries if e.memory_class is MemoryClass.SUMMARY]
        assert "Mount Tai" in summary.content
        state = core.workspace.memory_dir(ALICE) / "consolidation.json"
        assert json.loads(state.read_text(encoding="utf-8"))["checked_through"] == format_when(
            clock()
        )


async def test_with_a_model_each_phase_asks_it_with_its_prompt_file(
    fake: FakeOpenAI,
    workspace: Path,
    clock: ManualClock,
) -> None:
    from memory_core.llm.prompts import load_prompt

    async with MemoryCore.open(model_config(fake, workspace), clock=clock) as core:
        await core.memories.capture(
            ALICE, "went hiking at Mount Tai", memory_class=MemoryClass.EVENT
        )
        await core.memories.capture(
            ALICE, "visited my aunt in Hangzhou", memory_class=MemoryClass.EVENT
        )
        for text in ("我喜欢乌龙茶", "嗯嗯好的呀"):
            await core.event_log.record(ALICE, *message_events("user", text, clock(), "s1"))
        clock.advance(timedelta(days=8))

        # The model is down: the inputs wait, the cursor does not move.
        fake.fail(times=1)
        waiting = await core.consolidation.run(ALICE, [Phase.FILTER])
        assert "model unreachable" in waiting[0].detail
        state_path = core.workspace.memory_dir(ALICE) / "consolidation.json"
        assert not state_path.exists()  # nothing moved, nothing written

        fake.reply_json({"keep": [1]})
        fake.reply_json(
            [
                {
                    "content": "用户喜欢乌龙茶",
                    "category": "preference",
                    "memory_class": "belief",
                    "confidence": 0.7,
                }
            ]
        )
        fake.reply_json({"summary": "Hiked Mount Tai, then visited an aunt in Hangzhou."})
        reports = await core.consolidation.run(ALICE)
        prompts = [r["messages"][-1]["content"] for r in fake.chat_requests()[-3:]]
        assert prompts[0].startswith(load_prompt("filter").split("\n")[0])
        assert "1. 我喜欢乌龙茶" in prompts[0] and "2. 嗯嗯好的呀" in prompts[0]
        assert "我喜欢乌龙茶" in prompts[1] and "嗯嗯好的呀" not in prompts[1]
        assert prompts[2].startswith(load_prompt("generate_summary").split("（")[0])
        entries = {e.content: e for e in await core.memories.entries(ALICE)}
        belief = entries["用户喜欢乌龙茶"]
        assert (belief.memory_class, belief.confidence) == (MemoryClass.BELIEF, 0.7)
        [summary] = [e for e in entries.values() if e.memory_class is MemoryClass.SUMMARY]
        assert summary.content.endswith("Hiked Mount Tai, then visited an aunt in Hangzhou.")
        assert {r.phase: r.changes for r in reports}[Phase.SUMMARIZE] == 1

        # A later fact against the belief: the model says so, the belief loses confidence.
        clock.advance(timedelta(days=1))
        fact, _ = await core.memories.capture(ALICE, "用户不再喝乌龙茶了")
        fake.reply_json({"verdicts": [{"fact": fact.id, "verdict": "contradicted"}]})
        await core.consolidation.run(ALICE, [Phase.VERIFY])
        belief = {e.id: e for e in await core.memories.entries(ALICE)}[belief.id]
        assert belief.confidence == pytest.approx(0.35)
        asked = fake.chat_requests()[-1]["messages"][-1]["content"]
        assert "用户喜欢乌龙茶" in asked and f"[{fact.id}]" in asked
