"""The lexical candidates of a search are the scope's best chunks by FTS5's bm25 on both
backends: SQLite's FTS5 ranks them itself, PostgreSQL's query computes the same formula
over the GIN index (memory_core/recall/index/postings.py). A candidate cut short of the
matching rows must keep the same ones, in the same order, with filters applied."""

from __future__ import annotations

from typing import Any

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.sql import Connection
from memory_core.base.text import tokenize
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall.index import search as reads
from memory_core.recall.index.postings import FTS5_B, FTS5_K1, fts5_idf
from memory_core.recall.index.ranking import CorpusStats
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


def reference(rows: list[tuple[int, str]], terms: list[str], stats: CorpusStats) -> list[int]:
    """Chunk ids by FTS5's bm25 over the stored tokens, best first (ties by id)."""
    scored = []
    for chunk_id, tokens in rows:
        doc = tokens.split(" ")
        score = 0.0
        for term in terms:
            tf = doc.count(term)
            if tf:
                idf = fts5_idf(stats.docs, stats.doc_freq.get(term, 0))
                norm = FTS5_K1 * (1 - FTS5_B + FTS5_B * len(doc) / stats.avg_len)
                score += idf * tf * (FTS5_K1 + 1) / (tf + norm)
        if score > 0:
            scored.append((-score, chunk_id))
    return [chunk_id for _, chunk_id in sorted(scored)]


@pytest.mark.parametrize("question", ["green tea", "tea", "green walls boiler"])
async def test_a_cut_keeps_the_best_by_bm25_with_filters(config: Config, question: str) -> None:
    async with MemoryCore.open(config, clock=ManualClock(START)) as core:
        for note in NOTES:
            await core.notes.append(MAIN, note)
        for note in OTHER:
            await core.notes.append(ScopeKey("peer:other"), note)
        sid = await index_of(core).scope_id(MAIN)
        assert sid is not None
        terms = list(dict.fromkeys(tokenize(question)))

        def read(conn: Connection) -> tuple[list[int], list[int], list[int]]:
            stats = reads.corpus_stats(conn, sid, set(terms))
            rows = [
                (int(r[0]), str(r[1]))
                for r in conn.execute("SELECT id, tokens FROM chunks WHERE scope_id = ?", (sid,))
            ]
            expected = reference(rows, terms, stats)

            def ids(filters: list[str], params: list[Any], wanted: int) -> list[int]:
                found = reads.candidates(conn, sid, terms, stats, filters, params, wanted)
                return [int(r[0]) for r in found]

            best = ids([], [], 3)
            filtered = ids(["c.id <> ?", "c.path <> ?"], [expected[0], "elsewhere.md"], 3)
            return expected, best, filtered

        expected, best, filtered = await database(core).call(read)
    assert len(expected) > 3  # the cut leaves some out
    assert best == expected[:3]
    assert filtered == expected[1:4]


@pytest.mark.postgres_only
async def test_the_postings_pending_list_is_kept_small(config: Config) -> None:
    """Every search reads the GIN index's whole pending list: it is bounded at 256 kB
    (m014), not the server's 4 MB default."""
    async with MemoryCore.open(config, clock=ManualClock(START)) as core:
        [(options,)] = await sql(
            core, "SELECT reloptions FROM pg_class WHERE oid = 'chunks_postings'::regclass"
        )
    assert options == ["gin_pending_list_limit=256"]
