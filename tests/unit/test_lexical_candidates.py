"""The lexical candidates of a search are the exact top N by the ranking's BM25, every
query term counted, on both backends: SQLite reads FTS5's postings and prunes them by
MaxScore, PostgreSQL scores every holder in SQL (memory_core/recall/index/postings.py,
topk.py). The top N must be the brute-force one over the stored tokens, with filters
applied, and never reach another scope."""

from __future__ import annotations

import asyncio
import itertools
from datetime import date
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.base.clock import ManualClock
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.sql import Connection
from memory_core.base.text import tokenize
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall.index import search as reads
from memory_core.recall.index.topk import Scoring
from memory_core.recall.request import SearchRequest
from tests.conftest import START
from tests.support import database, index_of, sql

pytestmark = pytest.mark.storage

NOTES = [
    "green tea in the morning, green tea at noon and green tea at night",
    "tea",
    "green",
    "a long note about the garden where a green bench stands beside the old oak and roses",
    "black tea with milk and sugar",
    "green tea",
    "the boiler was serviced on Monday",
    "tea tea and more tea, then green walls",
]
OTHER = ["green tea " * 5, "green tea", "tea and green"]
"""Another scope's notes, holding the same words more often: never candidates here, and
not in this scope's statistics."""


def reference(rows: list[tuple[int, str]], scoring: Scoring) -> list[tuple[float, int]]:
    """(score, chunk id) of every row holding a term that finds (not only boosts) by the
    brute force, best first (ties: id)."""
    finders = set(scoring.finders)
    scored = sorted(
        (-scoring.score(tokens), chunk_id)
        for chunk_id, tokens in rows
        if not finders.isdisjoint(tokens.split())
    )
    return [(-negative, chunk_id) for negative, chunk_id in scored if negative < 0]


def top_n(
    conn: Connection,
    sid: int,
    terms: dict[str, float],
    filters: list[str],
    params: list[Any],
    wanted: int,
    boosts: frozenset[str] = frozenset(),
) -> tuple[list[tuple[float, int]], list[tuple[float, int]], set[int]]:
    """(what the index found, the brute-force top N, the scope's chunk ids), each as
    (score, id) best first."""
    stats = reads.corpus_stats(conn, sid, set(terms))
    scoring = Scoring.of(terms, stats, 1.2, 0.75, boosts)
    where = " AND ".join(["c.scope_id = ?", "c.hidden = 0", *filters])
    rows = [
        (int(r[0]), str(r[1]))
        for r in conn.execute(
            f"SELECT c.id, c.tokens FROM chunks AS c WHERE {where}", [sid, *params]
        )
    ]
    own = {int(r[0]) for r in conn.execute("SELECT id FROM chunks WHERE scope_id = ?", (sid,))}
    found = [
        (scoring.score(str(r[4])), int(r[0]))
        for r in reads.candidates(conn, sid, scoring, filters, params, wanted)
    ]
    return found, reference(rows, scoring)[:wanted], own


def same(found: list[tuple[float, int]], expected: list[tuple[float, int]]) -> None:
    """The same top N: the same scores in order (to the last bits a backend's SQL may
    sum differently), and the same chunks but where scores tie."""
    assert [round(s, 9) for s, _ in found] == [round(s, 9) for s, _ in expected]
    tied = {
        round(s, 9) for s, _ in expected if sum(round(e, 9) == round(s, 9) for e, _ in expected) > 1
    }
    assert [i for s, i in found if round(s, 9) not in tied] == [
        i for s, i in expected if round(s, 9) not in tied
    ]


@pytest.mark.parametrize("question", ["green tea", "tea", "green walls boiler"])
async def test_a_cut_keeps_the_best_by_bm25_with_filters(config: Config, question: str) -> None:
    async with MemoryCore.open(config, clock=ManualClock(START)) as core:
        for note in NOTES:
            await core.notes.append(MAIN, note)
        for note in OTHER:
            await core.notes.append(ScopeKey("peer:other"), note)
        sid = await index_of(core).scope_id(MAIN)
        assert sid is not None
        terms = dict.fromkeys(tokenize(question), 1.0)

        def read(conn: Connection) -> list[Any]:
            best = top_n(conn, sid, terms, [], [], 3)
            first = best[1][0][1]
            filtered = top_n(conn, sid, terms, ["c.id <> ?", "c.path <> ?"], [first, "x.md"], 3)
            return [best, filtered, first]

        (found, expected, _), (kept, expected_kept, _), first = await database(core).read(read)
    assert len(expected) == 3  # the cut leaves some out
    same(found, expected)
    same(kept, expected_kept)
    assert first not in {i for _, i in kept}


WORDS = ["tea", "green", "cat", "boiler", "rose", "oak", "kayak", "bench", "喜欢", "女儿"]
note_text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)
long_note = st.integers(130, 200).map(
    lambda n: " ".join(itertools.islice(itertools.cycle(WORDS), n))
)
"""Over 127 tokens: FTS5 keeps its length in two bytes (`postings._length`)."""
serial = itertools.count()


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    notes=st.lists(note_text | long_note, min_size=1, max_size=14),
    others=st.lists(note_text, max_size=5),
    questions=st.lists(
        st.dictionaries(st.sampled_from(WORDS), st.sampled_from([0.5, 1.0, 2.0]), min_size=1),
        min_size=1,
        max_size=3,
    ),
    wanted=st.integers(1, 6),
    boosts=st.frozensets(st.sampled_from(WORDS), max_size=2),
)
def test_the_top_n_is_the_brute_force_one_in_any_scope(
    config: Config,
    notes: list[str],
    others: list[str],
    questions: list[dict[str, float]],
    wanted: int,
    boosts: frozenset[str],
) -> None:
    """Random small scopes beside another holding the same words: the index's top N is
    the brute force's over the scope's own chunks, and only those; a boost (a word that
    only shapes the question) scores the chunks found and finds none alone."""

    async def check() -> None:
        number = next(serial)
        scope, other = ScopeKey(f"peer:s{number}"), ScopeKey(f"peer:o{number}")
        async with MemoryCore.open(config, clock=ManualClock(START)) as core:
            for text in others:
                await core.notes.append(other, text)
            for text in notes:
                await core.notes.append(scope, text)
            sid = await index_of(core).scope_id(scope)
            assert sid is not None
            for terms in questions:
                found, expected, own = await database(core).read(
                    lambda conn, terms=terms: top_n(conn, sid, terms, [], [], wanted, boosts)
                )
                same(found, expected)
                assert {i for _, i in found} <= own

    asyncio.run(check())


async def test_common_words_a_question_needs_are_kept(core: MemoryCore) -> None:
    """ "喜欢 认为 女儿": past 2 000 postings the rank budget searched 女儿 alone, so the
    notes holding both common words (together worth more than 女儿) were never found."""
    lines = (
        [f"女儿 f{i}" for i in range(950)]
        + [f"喜欢 a{i}" for i in range(1100)]
        + [f"认为 b{i}" for i in range(1100)]
        + [f"喜欢 认为 c{i}" for i in range(3)]
    )
    day = date(2026, 1, 5)
    ws = core.workspace
    path = ws.daily_path(MAIN, day)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {day}\n\n" + "".join(f"- 09:00:00 {line}\n" for line in lines), "utf-8")
    await index_of(core).sync_scope(MAIN, force=True)
    hits = await index_of(core).search(MAIN, SearchRequest("喜欢 认为 女儿", limit=3))
    assert sorted(h.text.split()[-1] for h in hits) == ["c0", "c1", "c2"]
    assert (await sql(core, "SELECT COUNT(*) FROM chunks"))[0][0] >= len(lines)
