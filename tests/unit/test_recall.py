"""Recall: the labelled bilingual set (index and degraded path), recall intent, the
injected block (ranking order, confidence forms, caps, budget), priors as score terms,
`core.finder.recall` end to end, and reinforcement of the long-term entries a reply used."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualClock
from memory_core.base.scope import MAIN
from memory_core.base.text import estimate_tokens, tokenize
from memory_core.config import Config, load_config
from memory_core.engine import MemoryCore
from memory_core.recall import fallback
from memory_core.recall.index import Hit
from memory_core.recall.index.rerank import prior_factor
from memory_core.recall.injection import (
    BLOCK_HEADER,
    TRUNCATED,
    build_injection,
    has_recall_intent,
    hit_line,
)
from memory_core.recall.request import SearchRequest
from tests.conftest import START
from tests.support import chunk_counts, index_of, note_used

pytestmark = pytest.mark.storage

DATA = Path(__file__).resolve().parent.parent / "data" / "recall_bilingual.json"
RECALL_FLOOR = 0.9
TODAY = START.date()


# --- the labelled bilingual set ---------------------------------------------------------


def load_set() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


def write(core: MemoryCore, relative: str, text: str) -> None:
    path = core.workspace.root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _norm(text: str) -> str:
    return " ".join(text.split())


async def fill_workspace(core: MemoryCore, memories: Sequence[dict[str, Any]]) -> None:
    """Long-term entries through `capture`, daily notes through `append_daily`."""
    for number, memory in enumerate(memories):
        if memory["as"] == "long_term":
            await core.memories.capture(MAIN, memory["text"], category=memory["category"])
        else:
            day = date.fromisoformat(memory["day"])
            when = datetime(day.year, day.month, day.day, 9, tzinfo=UTC)
            await core.notes.append(MAIN, memory["text"], now=when + timedelta(minutes=number))


@pytest.fixture(scope="module")
def bilingual_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One workspace holding the labelled memories, built once for the module."""
    root = tmp_path_factory.mktemp("bilingual")
    config = load_config(None, env={}, workspace=root)  # files; each test's backend indexes them

    async def build() -> None:
        async with MemoryCore.open(config, clock=ManualClock(START)) as core:
            await fill_workspace(core, load_set()["memories"])

    asyncio.run(build())
    return root


def recall_at_5(
    queries: Sequence[dict[str, Any]],
    search: Callable[[str], Sequence[Hit]],
    ids_by_text: dict[str, str],
) -> tuple[float, list[str]]:
    """Mean fraction of each query's relevant memories found in its top 5, and misses."""
    total = 0.0
    misses: list[str] = []
    for query in queries:
        found = [ids_by_text.get(_norm(hit.text), "?") for hit in search(query["q"])[:5]]
        relevant = set(query["relevant"])
        share = len(relevant & set(found)) / len(relevant)
        total += share
        if share < 1:
            misses.append(f"{query['q']!r}: wanted {sorted(relevant)}, got {found}")
    return total / len(queries), misses


async def test_bilingual_recall_at_5(
    bilingual_workspace: Path,
    record_property: Callable[[str, object], None],
    storage_env: Mapping[str, str],
) -> None:
    data = load_set()
    assert len(data["memories"]) >= 40 and len(data["queries"]) >= 40
    ids_by_text = {_norm(m["text"]): m["id"] for m in data["memories"]}
    assert len(ids_by_text) == len(data["memories"])
    known = set(ids_by_text.values())
    assert all(set(q["relevant"]) <= known for q in data["queries"])
    config = load_config(None, env=storage_env, workspace=bilingual_workspace)
    async with MemoryCore.open(config, clock=ManualClock(START)) as core:
        assert core.degraded_reason is None
        # Every labelled memory became exactly one chunk.
        counts = await chunk_counts(core, MAIN)
        assert sum(counts.values()) == len(data["memories"])
        results: dict[str, list[Hit]] = {}
        for query in data["queries"]:
            results[query["q"]] = await core.finder.search(MAIN, SearchRequest(query["q"], limit=5))
        floor = config.recall.min_score

        def degraded(q: str) -> list[Hit]:
            return fallback.search_files(
                core.workspace, MAIN, SearchRequest(q, limit=5, min_score=floor)
            )

        fts, fts_misses = recall_at_5(data["queries"], results.__getitem__, ids_by_text)
        files, file_misses = recall_at_5(data["queries"], degraded, ids_by_text)
    n = len(data["queries"])
    report = (
        f"recall@5 = {fts:.3f} over {n} queries (FTS5 index); "
        f"recall@5 = {files:.3f} over {n} queries (file fallback)"
    )
    print(f"\nrecall@5 = {fts:.3f} over {n} queries (FTS5 index)")
    print(f"recall@5 = {files:.3f} over {n} queries (file fallback, rank-bm25)")
    for miss in fts_misses:
        print("  index miss:", miss)
    for miss in file_misses:
        print("  fallback miss:", miss)
    record_property("recall_at_5_index", round(fts, 4))
    record_property("recall_at_5_fallback", round(files, 4))
    assert fts >= RECALL_FLOOR, f"{report}; misses: {fts_misses}"
    assert files >= RECALL_FLOOR, f"{report}; misses: {file_misses}"


# --- recall intent ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "我们之前讨论的那个方案怎么样了",
        "上次你推荐的那家餐厅叫什么",
        "昨天说的会议改到几点了",
        "你还记得吗，我女儿对什么过敏",
        "你还记得我喜欢喝什么咖啡吗",
        "Do you remember my daughter's name?",
        "What did we decide last time about the database?",
        "What did I say yesterday about the trip?",
        "LAST TIME you told me something else",
    ],
)
def test_recall_intent_detected(text: str) -> None:
    assert has_recall_intent(text)


@pytest.mark.parametrize(
    "text",
    [
        "今天天气不错",
        "帮我写一个快速排序",
        "明天下午三点提醒我开会",
        "Write a haiku about the sea.",
        "What's the capital of France?",
        "Please translate this paragraph into English.",
        "",
    ],
)
def test_no_recall_intent_in_ordinary_sentences(text: str) -> None:
    assert not has_recall_intent(text)


# --- the injected block -----------------------------------------------------------------


def hit(
    text: str,
    kind: ChunkKind,
    score: float,
    *,
    days_ago: int | None = 0,
    path: str | None = None,
    line: int = 3,
    ref: str | None = None,
    confidence: float = 0.9,
) -> Hit:
    created = (
        datetime.combine(TODAY - timedelta(days=days_ago), datetime.min.time(), tzinfo=UTC)
        if days_ago is not None
        else None
    )
    default_path = {
        ChunkKind.LONG_TERM: "MEMORY.md",
        ChunkKind.SUMMARY: "memory/summary/2026-01.md",
    }.get(kind, f"memory/{(created or START).date().isoformat()}.md")
    return Hit(path or default_path, line, line, score, text, kind, created, ref, confidence)


def test_block_keeps_the_ranking_order_whatever_the_kind() -> None:
    """No tiers any more: the ranking already weighed kind and age, the block keeps its
    order (a daily note above a long-term entry stays above it)."""
    hits = [
        hit("old daily note about tea", ChunkKind.DAILY, 9.0, days_ago=30),
        hit("monthly summary mentions tea", ChunkKind.SUMMARY, 8.0, days_ago=40),
        hit("user likes green tea", ChunkKind.LONG_TERM, 0.5, ref="aaaa1111"),
        hit("raw archive about tea", ChunkKind.ARCHIVE_RAW, 0.4, days_ago=2),
    ]
    injection = build_injection(["tea"], hits)
    assert [h.text for h in injection.hits] == [h.text for h in hits]
    assert injection.used_entry_ids == ["aaaa1111"]
    day = (TODAY - timedelta(days=30)).isoformat()
    assert injection.block.splitlines() == [
        BLOCK_HEADER,
        f"- old daily note about tea ({day})",
        f"- monthly summary mentions tea ({(TODAY - timedelta(days=40)).isoformat()})",
        "- user likes green tea",  # a long-term entry carries no date
        f"- raw archive about tea ({(TODAY - timedelta(days=2)).isoformat()})",
    ]


def test_confidence_decides_the_form_of_each_line() -> None:
    """The injection tiers: above 0.8 plain, 0.5 to 0.8 with its source, below 0.5 a pointer."""
    hits = [
        hit("user's cat is called Mochi", ChunkKind.LONG_TERM, 3.0, confidence=0.9),
        hit("vet visit for Mochi on Friday", ChunkKind.DAILY, 2.0, line=7, confidence=0.6),
        hit(
            "a long talk about pets " * 5,
            ChunkKind.ARCHIVE_RAW,
            1.0,
            line=12,
            confidence=0.3,
            path="memory/2026-02-27-pets.md",
            days_ago=2,
        ),
    ]
    lines = build_injection(["mochi"], hits).block.splitlines()
    assert lines == [
        BLOCK_HEADER,
        "- user's cat is called Mochi",
        "- [memory/2026-03-01.md:7] (2026-03-01) vet visit for Mochi on Friday",
        "- see memory/2026-02-27-pets.md:12 (2026-02-27) (memory_get)",
    ]
    # The bounds: exactly 0.8 is not above 0.8, exactly 0.5 is not below 0.5.
    forms = [
        hit_line(hit("x y", ChunkKind.LONG_TERM, 1.0, confidence=c), 300) for c in (0.81, 0.8, 0.5)
    ]
    assert forms == ["- x y", "- [MEMORY.md:3] x y", "- [MEMORY.md:3] x y"]
    assert hit_line(hit("x y", ChunkKind.LONG_TERM, 1.0, confidence=0.49), 300) == (
        "- see MEMORY.md:3 (memory_get)"
    )
    # A pointer costs a few tokens whatever the hit's length: weak hits stay cheap.
    long_pointer = hit("word " * 400, ChunkKind.DAILY, 1.0, confidence=0.1)
    assert estimate_tokens(hit_line(long_pointer, 300)) < 20


def test_at_most_max_hits_in_ranking_order() -> None:
    hits = [hit(f"note {i}", ChunkKind.DAILY, 10.0 - i, line=i + 1) for i in range(12)]
    injection = build_injection(["note"], hits)
    assert len(injection.hits) == 5  # the pure function's default
    assert [h.text for h in injection.hits] == [f"note {i}" for i in range(5)]
    assert injection.block.count("\n") == 5
    assert all(line.startswith("- note ") for line in injection.block.splitlines()[1:])
    assert len(build_injection(["note"], hits, max_hits=2).hits) == 2
    assert len(build_injection(["note"], hits, max_hits=18).hits) == 12


def test_long_hit_cut_at_300_chars_with_mark() -> None:
    long_text = "咖啡" * 100 + "word " * 100  # 200 CJK + 500 latin characters
    short_text = "x" * 300
    injection = build_injection(
        ["x"],
        [
            hit(long_text, ChunkKind.LONG_TERM, 1.0),
            hit(short_text, ChunkKind.LONG_TERM, 0.5, line=9, confidence=0.6),
        ],
    )
    first, second = injection.block.splitlines()[1:]
    body = first.removeprefix("- ")
    assert body.endswith(TRUNCATED)
    assert body[: -len(TRUNCATED)] == " ".join(long_text.split())[:300]
    assert len(body) == 300 + len(TRUNCATED)
    # Exactly 300 characters is not cut.
    assert second == "- [MEMORY.md:9] " + short_text
    assert TRUNCATED not in second
    # Whitespace is flattened; the turns of an exchange are joined by " / ", each cut
    # on its own, so the answer after a long question still shows.
    assert hit_line(hit("a  b\n c", ChunkKind.LONG_TERM, 1.0), 300) == "- a b / c"
    exchange = hit("Mia: " + "q" * 400 + "\nLeo: Five years already!", ChunkKind.MESSAGE, 1.0)
    line = hit_line(exchange, 300)
    assert line.count(TRUNCATED) == 1
    assert line.endswith(" / Leo: Five years already! (2026-03-01)")


def test_token_budget_respected_and_small_budget_drops_hits() -> None:
    hits = [hit("记忆" * 140, ChunkKind.DAILY, 10.0 - i, line=i + 1) for i in range(5)]
    full = build_injection(["记忆"], hits)
    assert len(full.hits) == 5
    assert full.tokens == estimate_tokens(full.block) <= 2048
    one_line = estimate_tokens(hit_line(hits[0], 300))
    small_budget = estimate_tokens(BLOCK_HEADER) + 2 * one_line + 5
    small = build_injection(["记忆"], hits, token_budget=small_budget)
    assert len(small.hits) == 2
    assert small.tokens <= small_budget
    # A budget too small for any hit gives no block at all.
    assert build_injection(["记忆"], hits, token_budget=20).block == ""
    # A hit too long for what is left is skipped, and a shorter one after it still fits.
    mixed = [hits[0], hits[1], hit("记忆 short", ChunkKind.DAILY, 1.0, line=9)]
    fitted = build_injection(["记忆"], mixed, token_budget=small_budget - one_line + 12)
    assert [h.line_from for h in fitted.hits] == [1, 9]


def test_token_budget_holds_for_any_mix_of_lines() -> None:
    """The block, line breaks included, never costs more than the budget."""
    import random

    rng = random.Random(7)
    alphabet = ["a", "bc ", "中", "文", "x", "．", " ", "\n"]
    for _ in range(400):
        hits = [
            hit(
                "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 350))),
                rng.choice([ChunkKind.LONG_TERM, ChunkKind.DAILY, ChunkKind.SUMMARY]),
                rng.random(),
                line=i + 1,
                confidence=rng.random(),
            )
            for i in range(rng.randint(1, 8))
        ]
        budget = rng.randint(5, 700)
        injection = build_injection(["k"], hits, token_budget=budget, max_hits=18)
        assert injection.tokens <= budget
        assert injection.tokens == estimate_tokens(injection.block)


def test_budget_is_exact_for_lines_with_no_rounding_slack() -> None:
    """Lines whose length is a multiple of 4 have no rounding slack, so the line breaks
    joining them must be paid for (they used to push the block one token over)."""
    hits = []
    for i in range(5):
        probe = hit("x", ChunkKind.LONG_TERM, 1.0 - i / 10, line=10 + i)
        pad = (-len(hit_line(probe, 300))) % 4
        hits.append(hit("x" * (1 + pad), ChunkKind.LONG_TERM, 1.0 - i / 10, line=10 + i))
    naive = estimate_tokens(BLOCK_HEADER) + sum(estimate_tokens(hit_line(h, 300)) for h in hits)
    injection = build_injection(["x"], hits, token_budget=naive)
    assert injection.tokens <= naive
    assert 1 <= len(injection.hits) < 5


def test_no_block_without_hits() -> None:
    injection = build_injection(["nothing"], [])
    assert injection.block == "" and injection.hits == [] and injection.tokens == 0
    assert injection.keywords == ["nothing"]
    assert injection.used_entry_ids == []


# --- priors are score terms, not tiers ----------------------------------------------------


async def test_a_much_better_older_hit_beats_a_weak_recent_one(core: MemoryCore) -> None:
    """Recency and kind only nudge the score: a 60-day-old note that answers the question
    outranks today's note and a long-term entry that merely mention a word of it."""
    for i in range(8):
        await core.notes.append(
            MAIN, f"watered the plants, chore {i}", now=START - timedelta(days=3)
        )
    await core.notes.append(
        MAIN,
        "tonkotsu ramen broth: simmer the pork bones twelve hours",
        now=START - timedelta(days=60),
    )
    await core.notes.append(MAIN, "walked past a ramen shop")
    await core.memories.capture(MAIN, "likes ramen")
    hits = await core.finder.search(MAIN, SearchRequest("tonkotsu ramen broth pork bones", limit=5))
    assert hits[0].text.startswith("tonkotsu ramen broth")
    assert hits[0].created_at == START - timedelta(days=60)
    # Through recall too (the block keeps the ranking's order).
    injection = await core.finder.recall(MAIN, "how long do I simmer the tonkotsu ramen broth?")
    assert injection.hits[0].text.startswith("tonkotsu ramen broth")


async def test_long_term_lifts_ties_and_recency_breaks_them(core: MemoryCore) -> None:
    """Equal words, equal BM25: the long-term entry comes first, then the newer note, then
    the older one, then the summary; the lifts are small factors of the score."""
    for i in range(6):
        await core.notes.append(MAIN, f"unrelated chore {i}", now=START - timedelta(days=1))
    await core.notes.append(MAIN, "kayak delta", now=START - timedelta(days=20))
    await core.notes.append(MAIN, "kayak bravo")
    await core.memories.capture(MAIN, "kayak alpha")
    write(core, "memory/summary/2026-02.md", "kayak echo\n")
    await index_of(core).sync_scope(MAIN)
    hits = await core.finder.search(MAIN, SearchRequest("kayak", limit=10))
    assert [h.text for h in hits] == ["kayak alpha", "kayak bravo", "kayak delta", "kayak echo"]
    settings = index_of(core).rank_settings
    by_text = {h.text: h.score for h in hits}
    # Strip each prior and the four scores are the same BM25 score.
    lexical = {
        h.text: h.score / prior_factor(h.kind, h.created_at, TODAY, UTC, settings) for h in hits
    }
    assert len({round(v, 9) for v in lexical.values()}) == 1
    assert by_text["kayak alpha"] / by_text["kayak bravo"] == pytest.approx(
        (1 + settings.long_term_boost + settings.recency_boost) / (1 + settings.recency_boost)
    )
    assert by_text["kayak alpha"] < 1.5 * by_text["kayak echo"]


# --- core.finder.recall end to end -------------------------------------------------------


async def test_core_recall_end_to_end(core: MemoryCore) -> None:
    entry, _ = await core.memories.capture(
        MAIN, "咖啡只喝美式，不加糖也不加奶", category="preference"
    )
    await core.notes.append(MAIN, "今天和 Alice 在星巴克喝了一杯美式咖啡")
    await core.notes.append(
        MAIN, "old note: tried a latte in January", now=START - timedelta(days=40)
    )
    injection = await core.finder.recall(MAIN, "你还记得我喝咖啡有什么习惯吗？")
    # The query's terms, heaviest first; "记得" only shapes the question: half weight, last.
    assert {"咖啡", "喝咖啡", "习惯"} <= set(injection.keywords)
    assert injection.keywords[-1] == "记得"
    assert injection.block.startswith(BLOCK_HEADER + "\n")
    lines = injection.block.splitlines()[1:]
    assert [h.text for h in injection.hits] == [
        "咖啡只喝美式，不加糖也不加奶",
        "今天和 Alice 在星巴克喝了一杯美式咖啡",
    ]  # the latte note shares no term and stays out
    # Each line has the form its hit's confidence asks for, in ranking order.
    assert lines == [hit_line(h, core.config.recall.hit_chars) for h in injection.hits]
    assert all(0.0 < h.confidence <= 1.0 for h in injection.hits)
    assert injection.hits[0].score > injection.hits[1].score
    assert any("星巴克" in line and "(2026-03-01)" in line for line in lines)
    assert injection.used_entry_ids == [entry.id]
    # The hit's location opens the entry with memory_get.
    read = await core.finder.read(MAIN, injection.hits[0].location, lines=3)
    assert read.text.startswith(f"### [{entry.id}]")
    # Keywords from recent messages count when the pending input has none.
    later = await core.finder.recall(MAIN, "嗯嗯", ["我们聊聊 Alice 吧"])
    assert tokenize("Alice")[0] in later.keywords
    assert [h.text for h in later.hits] == ["今天和 Alice 在星巴克喝了一杯美式咖啡"]


async def test_core_recall_empty_when_nothing_scores(core: MemoryCore) -> None:
    await core.memories.capture(MAIN, "I prefer dark mode in every editor")
    for pending in ("completely unrelated question about volcanoes", "", "   ", "的了吗"):
        injection = await core.finder.recall(MAIN, pending)
        assert injection.block == "" and injection.hits == []


async def test_core_recall_respects_configured_caps(config: Config, clock: ManualClock) -> None:
    small = config.model_copy(
        update={"recall": config.recall.model_copy(update={"max_hits": 2, "hit_chars": 20})}
    )
    async with MemoryCore.open(small, clock=clock) as core:
        for i in range(12):
            await core.notes.append(MAIN, f"unrelated chore number {i}: water the plants")
        for i in range(6):
            await core.notes.append(MAIN, f"kubernetes upgrade step {i} " + "detail " * 20)
        injection = await core.finder.recall(MAIN, "kubernetes upgrade")
    assert len(injection.hits) == 2
    for line in injection.block.splitlines()[1:]:
        assert line.endswith(TRUNCATED)
        assert len(line.split(") ", 1)[1]) == 20 + len(TRUNCATED)


async def test_recall_never_crosses_scopes(core: MemoryCore) -> None:
    from memory_core.base.scope import ScopeKey

    other = ScopeKey("peer:7")
    await core.memories.capture(other, "peer seven keeps a pet iguana named Zorro")
    await core.memories.capture(MAIN, "main scope has a dog")
    assert (await core.finder.recall(MAIN, "do you remember my iguana Zorro?")).block == ""
    assert "Zorro" in (await core.finder.recall(other, "do you remember my iguana Zorro?")).block


# --- reinforcement of used entries ------------------------------------------------------


async def test_note_used_reinforces_once_per_session(core: MemoryCore, clock: ManualClock) -> None:
    used, _ = await core.memories.capture(MAIN, "user's cat is called Mochi", category="fact")
    other, _ = await core.memories.capture(MAIN, "user lives in Hangzhou", category="fact")
    start_score = used.score
    clock.advance(timedelta(hours=1))

    await note_used(core, MAIN, [used.id], "session-1")
    await note_used(core, MAIN, [used.id, used.id], "session-1")  # same session again
    result = await core.memories.consolidate(MAIN)
    after = await core.memories.get_entry(MAIN, used.id)
    assert after.hits == 1
    assert after.score == pytest.approx(start_score + (1 - start_score) * 0.2)
    assert after.last_activated == clock()
    assert [c.entry_id for c in result.changes if c.kind.value == "reinforce"] == [used.id]
    assert (await core.memories.get_entry(MAIN, other.id)).hits == 0

    # Nothing pending: a second consolidation reinforces nothing.
    await core.memories.consolidate(MAIN)
    assert (await core.memories.get_entry(MAIN, used.id)).hits == 1

    # The same session noted again after its reinforcement: still once per session.
    await note_used(core, MAIN, [used.id], "session-1")
    await core.memories.consolidate(MAIN)
    assert (await core.memories.get_entry(MAIN, used.id)).hits == 1

    # Two different sessions: two reinforcements.
    await note_used(core, MAIN, [used.id], "session-2")
    await note_used(core, MAIN, [used.id], "session-3")
    await core.memories.consolidate(MAIN)
    assert (await core.memories.get_entry(MAIN, used.id)).hits == 3


async def test_note_used_is_per_scope_and_ignores_unknown_ids(core: MemoryCore) -> None:
    from memory_core.base.scope import ScopeKey

    peer = ScopeKey("peer:1")
    mine, _ = await core.memories.capture(MAIN, "main memory about tea")
    theirs, _ = await core.memories.capture(peer, "peer memory about coffee")
    await note_used(core, MAIN, [theirs.id, "deadbeef"], "s1")  # not main's entries
    await note_used(core, MAIN, [], "s1")
    await core.memories.consolidate(MAIN)
    await core.memories.consolidate(peer)
    assert (await core.memories.get_entry(MAIN, mine.id)).hits == 0
    assert (await core.memories.get_entry(peer, theirs.id)).hits == 0


async def test_recall_then_note_used_round_trip(core: MemoryCore) -> None:
    entry, _ = await core.memories.capture(MAIN, "My daughter Emma is allergic to peanuts")
    injection = await core.finder.recall(MAIN, "Do you remember what Emma is allergic to?")
    assert injection.used_entry_ids == [entry.id]
    await note_used(core, MAIN, injection.used_entry_ids, "chat-42")
    await core.memories.consolidate(MAIN)
    assert (await core.memories.get_entry(MAIN, entry.id)).hits == 1
