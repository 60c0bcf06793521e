"""The shortcuts of a chat turn give what the long way gives: one history query for three,
the message and its index row in one transaction, the prompt block cached until
a score can change, and the per-query BM25 scorer."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.base.atomic import atomic_write_text
from memory_core.base.clock import ManualClock, ManualMonotonic
from memory_core.base.entries import MemoryEntry
from memory_core.base.errors import DatabaseFailure
from memory_core.base.policy import DEFAULT_POLICY
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.sql import Connection
from memory_core.engine import MemoryCore
from memory_core.longterm.long_term_views import HOT_PATH_MAX_AGE
from memory_core.longterm.memory_md_renderer import render_memory
from memory_core.longterm.prompt import (
    render_prompt_memories,
    select_prompt_entries,
    select_prompt_entries_until,
)
from memory_core.recall.index import CorpusStats, bm25_scorer
from memory_core.recall.index import writes as index_writes
from memory_core.recall.request import SearchRequest
from memory_core.storage.history import HistoryStore
from memory_core.storage.sessions import SUMMARY_ROLE, NewMessage, sql_length
from tests.conftest import START
from tests.support import bm25_score, index_of, posting_ids, sql

pytestmark = pytest.mark.storage

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def history_of(core: MemoryCore) -> HistoryStore:
    return core.history


# --- one history query instead of three ---------------------------------------------------


@pytest.mark.parametrize("summary_at", [None, 0, 5, 40])
@pytest.mark.parametrize("limit", [1, 7, 60])
async def test_turn_context_is_the_three_queries_it_replaces(
    core: MemoryCore, summary_at: int | None, limit: int
) -> None:
    history = history_of(core)
    session = await history.open_session(MAIN, START)
    ids = []
    for number in range(50):
        role = SUMMARY_ROLE if number == summary_at else ("user", "assistant", "tool")[number % 3]
        text = f"message {number} " + "x\x00y" * (number % 4) + "字" * number
        message = await history.add_message(NewMessage(MAIN, session.id, role, text, START))
        ids.append(message.id)
    await history.mark_compacted(ids[:10])

    context = await history.turn_context(session.id, limit)

    # The long way: three plain queries.
    live = [m for m in await history.session_messages(session.id)]
    expected = live[-limit:] if limit > 0 else []
    if expected and not any(m.role == SUMMARY_ROLE for m in expected):
        summaries = [
            m
            for m in await history.session_messages(session.id, include_compacted=True)
            if m.role == SUMMARY_ROLE
        ]
        if summaries:
            expected.insert(0, summaries[-1])
    assert context.messages == expected
    [(chars,)] = await sql(
        core,
        "SELECT COALESCE(SUM(LENGTH(content)), 0) FROM messages WHERE session_id = ?"
        " AND compacted = 0",
        session.id,
    )
    assert context.chars == chars


def test_sql_length_is_sqlites_length() -> None:
    conn = sqlite3.connect(":memory:")
    for text in ["", "abc", "字字", "a\x00b", "\x00", "é🙂"]:
        assert sql_length(text) == conn.execute("SELECT LENGTH(?)", (text,)).fetchone()[0]


# --- a message and its index row in one transaction ----------------------------------------


async def test_chat_turn_index_rows_match_a_full_recount(core: MemoryCore) -> None:
    """Messages stored by turns (one transaction each) leave chunks, FTS rows, document
    frequencies and counters exactly as a recount from the stored chunks gives them."""
    scope = ScopeKey("peer:carol")
    for text in ["我喜欢喝绿茶 green tea", "the gym locker is 4512", "绿茶 again", "ok"]:
        await core.conversation.turn(scope, text)
    sid = await index_of(core).scope_id(scope)
    rows = await sql(
        core,
        "SELECT c.id, c.line_from, c.line_to, c.ref, c.text, c.tokens, m.role, m.content"
        " FROM chunks c JOIN messages m ON m.id = c.line_from WHERE c.scope_id = ?"
        " AND c.kind = 'message' ORDER BY c.id",
        sid,
    )
    assert len(rows) == 4  # four questions (the offline notices are not stored)
    for _, line_from, line_to, ref, text, _tokens, role, content in rows:
        assert line_to == line_from and ref == str(line_from)
        assert text == f"{role}: {content}"
    terms = await sql(core, "SELECT term, df FROM terms WHERE scope_id = ? AND df > 0", sid)
    recount: Counter[str] = Counter()
    for row in rows:
        recount.update(set(str(row[5]).split()))
    assert dict((str(t), int(n)) for t, n in terms) == dict(recount)
    counters = await sql(core, "SELECT chunk_count, token_count FROM scopes WHERE id = ?", sid)
    assert tuple(next(iter(counters))) == (
        len(rows),
        sum(len(str(r[5]).split()) for r in rows),
    )
    for row in rows:
        assert row[0] in await posting_ids(core, sid, str(row[5]).split()[0])
    hits = await core.guard.index.search(scope, SearchRequest("locker 4512", limit=3))
    assert hits and "4512" in hits[0].text


async def test_a_failing_statement_rolls_the_whole_message_back(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index row is a step of the message's transaction: when it fails, the message
    is not stored either."""
    history = history_of(core)
    session = await history.open_session(MAIN, START)

    def failing(conn: Connection, *args: object) -> None:
        conn.execute("INSERT INTO no_such_table VALUES (1)")

    monkeypatch.setattr(index_writes, "insert_chunks", failing)
    with pytest.raises(DatabaseFailure):  # no such table, on either backend
        await history.add_message(NewMessage(MAIN, session.id, "user", "lost", START, indexed=True))
    monkeypatch.undo()
    assert await history.session_messages(session.id) == []
    kept = await history.add_message(NewMessage(MAIN, session.id, "user", "kept", START))
    assert [m.id for m in await history.session_messages(session.id)] == [kept.id]


# --- prompt memories cached until a score can change -----------------------------------------

entry_strategy = st.builds(
    lambda i, score, age, hours, pinned: MemoryEntry(
        id=f"e{i}",
        content=f"memory {i}",
        category="fact",
        score=score,
        created_at=T0 - timedelta(days=age + 1),
        last_activated=T0 - timedelta(days=age, hours=hours),
        scored_at=T0 - timedelta(days=age, hours=hours),
        pinned=pinned,
    ),
    st.integers(0, 10_000),
    st.floats(0.05, 1.0),
    st.integers(0, 60),
    st.integers(0, 23),
    st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(entry_strategy, max_size=40, unique_by=lambda e: e.id),
    st.integers(0, 30 * 24),
    st.floats(0.0, 1.0),
    st.integers(1, 25),
)
def test_prompt_selection_holds_until_the_instant_it_reports(
    entries: list[MemoryEntry], hours: int, fraction: float, top_k: int
) -> None:
    now = T0 + timedelta(hours=hours)
    chosen, until = select_prompt_entries_until(entries, now, top_k=top_k, policy=DEFAULT_POLICY)
    assert chosen == select_prompt_entries(entries, now, top_k=top_k)
    assert until > now
    later = now + (min(until, now + timedelta(days=3)) - now) * fraction
    if later >= until:
        later = now
    again = select_prompt_entries(entries, later, top_k=top_k)
    # Only `scored_at` (the instant asked about) differs; the block is made of the rest.
    assert [(e.id, e.score) for e in again] == [(e.id, e.score) for e in chosen]
    assert render_prompt_memories(again) == render_prompt_memories(chosen)


async def test_prompt_memories_cache_follows_the_file_and_the_clock(
    core: MemoryCore, clock: ManualClock, monotonic: ManualMonotonic
) -> None:
    def fresh(entries: list[MemoryEntry], when: datetime) -> str:
        settings_ = core.config.prompt
        return render_prompt_memories(
            select_prompt_entries(
                entries,
                when,
                min_score=settings_.min_score,
                top_k=settings_.top_k,
                policy=core.policy,
            ),
            settings_.max_tokens,
        )

    await core.memories.capture(MAIN, "I drink green tea every morning", importance="high")
    first = await core.memories.prompt_memories(MAIN)
    assert "green tea" in first
    assert await core.memories.prompt_memories(MAIN) == first

    await core.memories.capture(MAIN, "My daughter is allergic to peanuts", importance="high")
    second = await core.memories.prompt_memories(MAIN)
    assert "peanuts" in second and second == fresh(await core.memories.entries(MAIN), clock())

    # A hand edit: seen once the hot path's stat interval has passed.
    entries = await core.memories.entries(MAIN)
    edited = [
        e.with_(content="I drink black coffee every morning") if "tea" in e.content else e
        for e in entries
    ]
    atomic_write_text(
        core.memories.path(MAIN), render_memory(edited, now=clock()), root=core.workspace.root
    )
    clock.advance(timedelta(seconds=5))
    within = await core.memories.prompt_memories(MAIN, now=clock() + timedelta(seconds=5))
    assert "green tea" in within  # the hot path re-stats at most once per HOT_PATH_MAX_AGE
    monotonic.advance(HOT_PATH_MAX_AGE)
    third = await core.memories.prompt_memories(MAIN, now=clock() + timedelta(seconds=5))
    assert "black coffee" in third and "green tea" not in third

    # Days later the scores have decayed: the cached block is not reused.
    for days in (3, 8, 9, 30, 120):
        when = clock() + timedelta(days=days)
        assert await core.memories.prompt_memories(MAIN, now=when) == fresh(
            await core.memories.entries(MAIN), when
        )


# --- the per-query scorer ---------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_bm25_scorer_is_bm25_score(seed: int) -> None:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(rng.randint(1, 30))]
    docs = [[rng.choice(vocab) for _ in range(rng.randint(0, 25))] for _ in range(8)]
    stats = CorpusStats(
        docs=rng.randint(1, 5000),
        avg_len=rng.uniform(0.5, 30.0),
        doc_freq={v: rng.randint(1, 100) for v in vocab if rng.random() < 0.8},
    )
    query = [rng.choice([*vocab, "absent"]) for _ in range(rng.randint(1, 8))]
    score = bm25_scorer(query, stats)
    for doc in docs:
        assert score(" ".join(doc)) == bm25_score(query, doc, stats)
