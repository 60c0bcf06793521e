"""What the search index's chunks hold: line ranges, monthly summaries hiding daily ones, message chunks, and the filters a search takes."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualClock
from memory_core.base.errors import ChatmemError
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.text import tokenize
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall import fallback
from memory_core.recall.index import Hit
from memory_core.recall.index.rerank import prior_factor
from memory_core.recall.request import SearchRequest
from tests.conftest import START
from tests.support import (
    index_message,
    index_of,
)
from tests.unit.index_support import (
    DAY,
    chunk_rows,
    eager_config_fixture,  # noqa: F401  (a fixture)
    eager_fixture,  # noqa: F401  (a fixture)
    found,
    texts,
    write,
)

pytestmark = pytest.mark.storage


# --- line ranges ------------------------------------------------------------------------


async def assert_chunks_match_files(core: MemoryCore, scope: ScopeKey = MAIN) -> int:
    """Every file chunk's terms are in the file's lines line_from..line_to."""
    checked = 0
    for path, line_from, line_to, _, text, tokens, _ in await chunk_rows(core, scope):
        if path.startswith("sessions/"):
            continue
        lines = (core.workspace.root / path).read_text(encoding="utf-8").splitlines()
        assert 1 <= line_from <= line_to <= len(lines), (path, line_from, line_to)
        window = "\n".join(lines[line_from - 1 : line_to])
        assert set(tokens.split()) <= set(tokenize(window)), (path, line_from, text)
        assert tokens == " ".join(tokenize(text))
        checked += 1
    return checked


async def test_line_ranges_point_into_the_files(core: MemoryCore) -> None:
    path, line = await core.notes.append(MAIN, "buy milk")
    assert (path, line) == (DAY, 3)
    path, line = await core.notes.append(MAIN, "meeting notes\nalice: ship it\nbob: agreed")
    assert line == 4
    [hit] = await core.finder.search(MAIN, "alice ship")
    assert (hit.path, hit.line_from, hit.line_to) == (DAY, 4, 6)
    read = await core.finder.read(MAIN, hit.location, lines=3)
    assert read.text.splitlines()[0].endswith("meeting notes")
    assert read.text.splitlines()[2] == "  bob: agreed"

    first, _ = await core.memories.capture(MAIN, "user's dog is called Biscuit")
    second, _ = await core.memories.capture(
        MAIN, "user works at a bakery\nsince 2019, night shifts"
    )
    await core.memories.flush()
    long_term = (core.workspace.root / "MEMORY.md").read_text(encoding="utf-8").splitlines()
    for entry in (first, second):
        [hit] = await core.finder.search(MAIN, entry.content.split()[-1])
        assert long_term[hit.line_from - 1].startswith(f"### [{entry.id}]")
        assert long_term[hit.line_to - 1] == entry.content.splitlines()[-1]
        assert hit.ref == entry.id
        read = await core.finder.read(MAIN, f"[{hit.location}]", lines=1)
        assert read.text.startswith(f"### [{entry.id}]")

    write(
        core,
        "memory/summary/2026-02.md",
        "# February 2026\n"
        "\n"
        "## Work\n"
        "Shipped the billing rewrite.\n"
        "Postmortem for the outage.\n"
        "\n"
        "\n"
        "## Home\n"
        "Painted the kitchen.\n",
    )
    await index_of(core).sync_scope(MAIN)
    for query, expected in (
        ("billing rewrite", (3, 5)),
        ("postmortem outage", (3, 5)),
        ("painted kitchen", (8, 9)),
        ("february", (1, 1)),
    ):
        [hit] = await core.finder.search(
            MAIN, SearchRequest(query, kinds=[ChunkKind.SUMMARY], min_score=0.0)
        )
        assert (hit.line_from, hit.line_to) == expected, query
    assert await assert_chunks_match_files(core) == 7


async def test_line_ranges_after_hand_written_notes(core: MemoryCore) -> None:
    write(
        core,
        "memory/2026-02-20.md",
        "# 2026-02-20\n"
        "\n"
        "- 09:15:00 standup moved to 9:30\n"
        "  continuation about the room\n"
        "free text line written by hand\n"
        "\n"
        "- 18:00 dinner at the night market\n",
    )
    await index_of(core).sync_scope(MAIN)
    hits = {
        h.text: h
        for h in await core.finder.search(
            MAIN, SearchRequest("standup room hand dinner market", min_score=0.0)
        )
    }
    assert {k: (v.line_from, v.line_to) for k, v in hits.items()} == {
        "standup moved to 9:30\ncontinuation about the room": (3, 4),
        "free text line written by hand": (5, 5),
        "dinner at the night market": (7, 7),
    }
    assert hits["dinner at the night market"].created_at == datetime(2026, 2, 20, 18, tzinfo=UTC)
    assert hits["free text line written by hand"].created_at == datetime(2026, 2, 20, tzinfo=UTC)
    assert await assert_chunks_match_files(core) == 3


# --- monthly summaries hide daily summaries ---------------------------------------------


async def test_monthly_summary_hides_daily_summaries(eager: MemoryCore) -> None:
    core = eager
    write(core, "memory/summary/2026-02-03.md", "# 2026-02-03\n\nkayak lesson at the lake\n")
    write(core, "memory/summary/2026-01-15.md", "# 2026-01-15\n\nkayak bought in January\n")
    peer = ScopeKey("peer:5")
    core.workspace.ensure_scope(peer)
    write(
        core,
        core.workspace.relative(core.workspace.summary_dir(peer) / "2026-02-04.md"),
        "# 2026-02-04\n\nkayak rental for the peer\n",
    )
    both = ["kayak bought in January", "kayak lesson at the lake"]
    assert sorted(await found(core, "kayak")) == both

    monthly = write(core, "memory/summary/2026-02.md", "# 2026-02\n\nFebruary: paddling\n")
    assert await found(core, "kayak") == ["kayak bought in January"]
    assert await found(core, "paddling") == ["February: paddling"]
    assert texts(fallback.search_files(core.workspace, MAIN, "kayak")) == [
        "kayak bought in January"
    ]
    # Another scope's monthly-less daily summary is not touched.
    assert await found(core, "kayak", peer) == ["kayak rental for the peer"]

    monthly.unlink()
    assert sorted(await found(core, "kayak")) == both
    assert sorted(texts(fallback.search_files(core.workspace, MAIN, "kayak"))) == both

    # Written by the core (sync_file), the monthly summary hides them at once too.
    write(core, "memory/summary/2026-02.md", "# 2026-02\n\nFebruary again\n")
    await index_of(core).sync_file(MAIN, "memory/summary/2026-02.md")
    hidden = [r for r in await chunk_rows(core) if r[6]]
    assert [(r[0], r[4]) for r in hidden] == [
        ("memory/summary/2026-02-03.md", "# 2026-02-03"),
        ("memory/summary/2026-02-03.md", "kayak lesson at the lake"),
    ]


# --- message chunks ---------------------------------------------------------------------

EXCHANGE = "user: my locker code is 4512 at the gym\nassistant: Noted, locker 4512."


async def test_message_chunks_searchable_and_readable_in_their_scope(core: MemoryCore) -> None:
    index = index_of(core)
    peer = ScopeKey("peer:8")
    when = START - timedelta(hours=2)
    await index_message(core, MAIN, "sess-1", 7, "user", "my locker code is 4512 at the gym", when)
    await index_message(core, MAIN, "sess-1", 8, "assistant", "Noted, locker 4512.", when)
    await index_message(core, peer, "sess-1", 7, "user", "peer talks about swimming", when)
    await core.notes.append(MAIN, "went to the gym")

    # A turn is found with the turn next to it: the exchange, not the lone line. The
    # reply, shown inside that hit, is not a hit of its own.
    [hit] = await core.finder.search(MAIN, SearchRequest("code", kinds=[ChunkKind.MESSAGE]))
    assert (hit.kind, hit.path, hit.line_from, hit.line_to, hit.ref) == (
        ChunkKind.MESSAGE,
        "sessions/sess-1",
        7,
        8,
        "7",
    )
    assert hit.text == EXCHANGE
    assert hit.created_at == when
    assert hit.location == "sessions/sess-1:7"
    kinds = {h.kind for h in await core.finder.search(MAIN, SearchRequest("gym", min_score=0.0))}
    assert kinds == {ChunkKind.MESSAGE, ChunkKind.DAILY}
    assert await core.finder.search(MAIN, SearchRequest("gym", kinds=[ChunkKind.LONG_TERM])) == []

    read = await core.finder.read(MAIN, "sessions/sess-1:7")
    assert (
        read.text
        == "[7] user: my locker code is 4512 at the gym\n[8] assistant: Noted, locker 4512."
    )
    assert (read.start, read.end, read.truncated) == (7, 8, False)
    one = await core.finder.read(MAIN, "[sessions/sess-1:7]", lines=1)
    assert (one.text, one.truncated) == ("[7] user: my locker code is 4512 at the gym", True)
    # The peer's session of the same id holds only its own message.
    assert (await core.finder.read(peer, "sessions/sess-1:7")).text == (
        "[7] user: peer talks about swimming"
    )
    with pytest.raises(ChatmemError):
        await core.finder.read(peer, "sessions/sess-1:8")
    with pytest.raises(ChatmemError):
        await core.finder.read(ScopeKey("peer:404"), "sessions/sess-1:7")
    assert await core.finder.search(peer, "locker") == []

    # Messages survive a sync and a rebuild (they have no file).
    await index.sync_scope(MAIN, force=True)
    await index.rebuild()
    assert texts(
        await core.finder.search(MAIN, SearchRequest("code", kinds=[ChunkKind.MESSAGE]))
    ) == [EXCHANGE]
    await index.remove_messages(MAIN, [7, 8])
    assert await core.finder.search(MAIN, SearchRequest("locker", min_score=0.0)) == []


# --- filters ----------------------------------------------------------------------------


async def test_kinds_since_until_and_min_score(core: MemoryCore) -> None:
    await core.memories.capture(MAIN, "espresso machine descaling every month")
    for days in (10, 3, 1, 0):
        await core.notes.append(
            MAIN, f"espresso tasting day minus {days}", now=START - timedelta(days=days)
        )
    write(core, "memory/summary/2026-02.md", "# 2026-02\n\nespresso habit grew\n")
    write(core, "memory/2026-02-27-export.md", "raw: espresso talk\n")
    await index_of(core).sync_scope(MAIN)

    async def kinds_of(**kw: Any) -> Counter[str]:
        hits = await core.finder.search(
            MAIN, SearchRequest("espresso", limit=20, min_score=0.0, **kw)
        )
        return Counter(h.kind.value for h in hits)

    assert await kinds_of() == Counter({"daily": 4, "long_term": 1, "summary": 1, "archive_raw": 1})
    assert await kinds_of(kinds=[ChunkKind.DAILY]) == Counter({"daily": 4})
    assert await kinds_of(kinds=[ChunkKind.SUMMARY, ChunkKind.ARCHIVE_RAW]) == Counter(
        {"summary": 1, "archive_raw": 1}
    )
    assert await kinds_of(kinds=["long_term"]) == Counter({"long_term": 1})
    assert await kinds_of(kinds=[]) == Counter()

    since = START - timedelta(days=3)
    dated = await core.finder.search(
        MAIN, SearchRequest("espresso", limit=20, min_score=0.0, since=since)
    )
    assert all(h.created_at is not None and h.created_at >= since for h in dated)
    assert sorted(h.text for h in dated if h.kind is ChunkKind.DAILY) == [
        "espresso tasting day minus 0",
        "espresso tasting day minus 1",
        "espresso tasting day minus 3",  # since is inclusive
    ]
    until = START - timedelta(days=1)
    window = await core.finder.search(
        MAIN, SearchRequest("espresso", limit=20, min_score=0.0, since=since, until=until)
    )
    # until is exclusive: the note of exactly one day ago is out.
    assert sorted(texts(window)) == ["espresso tasting day minus 3", "raw: espresso talk"]
    old = await core.finder.search(
        MAIN, SearchRequest("espresso", limit=20, min_score=0.0, until=date_start(2026, 2, 25))
    )
    assert sorted(texts(old)) == ["espresso habit grew", "espresso tasting day minus 10"]

    everything = await core.finder.search(
        MAIN, SearchRequest("espresso descaling", limit=20, min_score=0.0)
    )
    best = everything[0]
    assert best.text == "espresso machine descaling every month"
    # min_score bounds the BM25 evidence, before the priors lift or cut a hit: the best
    # hit's is its score without its long-term and recency lift.
    settings = index_of(core).rank_settings
    lifted = prior_factor(best.kind, best.created_at, START.date(), UTC, settings)
    assert lifted > 1.0
    evidence = best.score / lifted
    assert texts(
        await core.finder.search(
            MAIN, SearchRequest("espresso descaling", min_score=evidence - 1e-9)
        )
    ) == [best.text]
    assert (
        await core.finder.search(
            MAIN, SearchRequest("espresso descaling", min_score=evidence + 1e-9)
        )
        == []
    )
    assert (
        await core.finder.search(MAIN, SearchRequest("espresso descaling", min_score=best.score))
        == []
    )
    # Explicit searches show every match; only automatic recall applies recall.min_score.
    assert (
        await core.finder.search(MAIN, SearchRequest("espresso descaling", limit=20)) == everything
    )
    assert len(await core.finder.search(MAIN, SearchRequest("espresso", limit=2))) <= 2
    assert await core.finder.search(MAIN, SearchRequest("espresso", limit=0)) == []


def date_start(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


async def test_degraded_time_window_sees_past_the_top_hits(core: MemoryCore) -> None:
    """With the index down, since/until filter every hit before the limit applies: the
    best hits here are older than the window and must not crowd out the ones inside."""
    for number in range(20):
        await core.notes.append(MAIN, f"unrelated chore {number}", now=START - timedelta(days=20))
    for days in range(5, 11):
        text = f"postgres postgres vacuum {days}" if days > 6 else f"postgres note {days}"
        await core.notes.append(MAIN, text, now=START - timedelta(days=days))
    unfiltered = await core.finder.search(MAIN, SearchRequest("postgres", limit=2, min_score=0.0))
    assert all("vacuum" in h.text for h in unfiltered)  # the older notes score best
    since = START - timedelta(days=6, hours=12)
    healthy = await core.finder.search(
        MAIN, SearchRequest("postgres", limit=2, since=since, min_score=0.0)
    )
    assert sorted(texts(healthy)) == ["postgres note 5", "postgres note 6"]
    until = START - timedelta(days=8, hours=12)
    healthy_old = await core.finder.search(
        MAIN, SearchRequest("postgres", limit=1, until=until, min_score=0.0)
    )
    assert texts(healthy_old) == ["postgres postgres vacuum 9"]  # the newer of the two
    core.guard.index = None
    degraded = await core.finder.search(
        MAIN, SearchRequest("postgres", limit=2, since=since, min_score=0.0)
    )
    assert_same_hits(degraded, healthy)
    old = await core.finder.search(
        MAIN, SearchRequest("postgres", limit=1, until=until, min_score=0.0)
    )
    assert_same_hits(old, healthy_old)


def assert_same_hits(got: list[Hit], want: list[Hit]) -> None:
    """Same chunks in the same order; scores equal up to summation order."""
    assert [(h.path, h.line_from, h.text) for h in got] == [
        (h.path, h.line_from, h.text) for h in want
    ]
    assert [h.score for h in got] == pytest.approx([h.score for h in want], rel=1e-12)


async def test_degraded_time_window_applies_before_near_copies_are_dropped(
    core: MemoryCore,
) -> None:
    """The same note on two days: the index filters by time first, then drops near-copies;
    the files must find the same hit."""
    for number in range(6):
        await core.notes.append(MAIN, f"unrelated chore {number}", now=START - timedelta(days=9))
    for days in (2, 9):
        await core.notes.append(MAIN, "postgres vacuum full", now=START - timedelta(days=days))
    until = START - timedelta(days=5)
    healthy = await core.finder.search(MAIN, SearchRequest("postgres vacuum", until=until))
    assert [h.created_at for h in healthy] == [START - timedelta(days=9)]
    core.guard.index = None
    assert_same_hits(
        await core.finder.search(MAIN, SearchRequest("postgres vacuum", until=until)), healthy
    )


async def test_daily_note_time_survives_a_resync_in_another_time_zone(
    config: Config, clock: ManualClock
) -> None:
    zoned = config.model_copy(update={"timezone": "Asia/Shanghai"})
    async with MemoryCore.open(zoned, clock=clock) as core:
        await core.notes.append(MAIN, "lantern festival dumplings")  # 20:00 in Shanghai
        window = {"since": START - timedelta(minutes=1), "until": START + timedelta(minutes=1)}
        assert await found(core, "dumplings", **window) == ["lantern festival dumplings"]
        await index_of(core).sync_scope(MAIN, force=True)
        [hit] = await core.finder.search(MAIN, SearchRequest("dumplings", min_score=0.0))
        assert hit.created_at == START
        assert await found(core, "dumplings", **window) == ["lantern festival dumplings"]
