"""Search straight from the files when the index cannot be used.

Same chunks, same tokens and the same BM25 scorer (`recall.k1`, `recall.b`) as the index, so
a corrupt or locked database degrades speed, not answers. Only this scope's files are read.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, tzinfo

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import Clock, system_clock
from memory_core.base.scope import ScopeKey
from memory_core.base.turn_dates import overlaps
from memory_core.base.workspace import Workspace
from memory_core.recall.chunking import summary_period
from memory_core.recall.index import K1, B, Hit, PreparedFile, prepare_file, scope_files
from memory_core.recall.index.pipeline import MAX_TERMS, Ranking, rank, speaker_score
from memory_core.recall.index.ranking import CorpusStats, bm25_scorer, select_terms
from memory_core.recall.index.rerank import CONVERSATION_KINDS, Candidate, RankSettings
from memory_core.recall.query import as_query
from memory_core.recall.request import QueryInput, SearchRequest

log = logging.getLogger(__name__)


def load_scope_chunks(
    workspace: Workspace, scope: ScopeKey, *, include_hidden: bool = False, zone: tzinfo = UTC
) -> list[PreparedFile]:
    """Every indexed-kind file of the scope, chunked and tokenized (blocking); without
    `include_hidden`, daily summaries hidden by their month's summary are left out."""
    prepared = [prepare_file(workspace, path, zone) for path in scope_files(workspace, scope)]
    files = [p for p in prepared if p is not None]
    if include_hidden:
        return files
    hidden = _hidden_paths(files)
    return [f for f in files if f.path not in hidden]


def _hidden_paths(files: Sequence[PreparedFile]) -> set[str]:
    """A monthly summary hides that month's daily summaries, as in the index."""
    months = {summary_period(f.path) for f in files if f.kind is ChunkKind.SUMMARY}
    hidden: set[str] = set()
    for f in files:
        period = summary_period(f.path)
        if f.kind is ChunkKind.SUMMARY and period and len(period) == 10 and period[:7] in months:
            hidden.add(f.path)
    return hidden


def search_files(
    workspace: Workspace,
    scope: ScopeKey,
    asked: SearchRequest | QueryInput,
    *,
    zone: tzinfo = UTC,
    k1: float = K1,
    b: float = B,
    settings: RankSettings | None = None,
    clock: Clock = system_clock,
) -> list[Hit]:
    """The index's ranking over the scope's files (blocking: run in a thread): the
    index's BM25 scorer, then the same `pipeline.rank` steps, neighbours read from each
    file's own chunk order. `zone`, `k1`, `b` and `settings` are the index's; a request
    without its day is read on `clock`'s day in `zone`."""
    request = SearchRequest.of(asked)
    kinds, since, until = request.kinds, request.since, request.until
    day = request.today or clock().astimezone(zone).date()
    plan = as_query(request.query, day)
    if not plan.terms and plan.window is None:
        return []
    wanted = {ChunkKind(k) for k in kinds} if kinds is not None else None
    # The corpus statistics (N, average length, document frequencies) are the whole
    # scope's, hidden daily summaries and unwanted kinds included, as in the index, which
    # keeps them per scope; those chunks are scored but never returned.
    files = load_scope_chunks(workspace, scope, include_hidden=True, zone=zone)
    hidden = _hidden_paths(files)
    docs = [(prepared, index) for prepared in files for index in range(len(prepared.chunks))]
    if not docs:
        return []
    corpus = [prepared.chunks[index][1] for prepared, index in docs]
    stats = scope_stats(corpus, plan.terms)
    terms = select_terms(plan.terms, stats, MAX_TERMS, plan.shaping)
    finders = terms.keys() - plan.shaping
    score = bm25_scorer(terms, stats, k1, b)
    lexical = [score(tokens) for tokens in corpus]
    ranking = Ranking(
        terms,
        stats,
        plan.window,
        day,
        zone,
        settings or RankSettings(),
        k1,
        b,
        plan.answer,
        several=plan.several,
    )
    pool: dict[int, Candidate] = {}
    excluded = set(request.exclude_paths)
    for i, (prepared, index) in enumerate(docs):
        if prepared.path in hidden or prepared.path in excluded:
            continue
        if wanted is not None and prepared.kind not in wanted:
            continue
        chunk = prepared.chunks[index][0]
        if not _between(chunk.created_at, since, until):
            continue
        dated = plan.window is not None and (
            _within_days(chunk.created_at, plan.window, zone)
            or overlaps(chunk.dates or (), *plan.window)
        )
        found = lexical[i] > 0 and (not plan.shaping or not finders.isdisjoint(corpus[i].split()))
        if not found and not (dated and not terms):
            continue
        candidate = _candidate(i, prepared, index, lexical[i])
        candidate.lexical += speaker_score(ranking, candidate)
        pool[i] = candidate
    reach = len(ranking.settings.context_weights)
    for i in list(pool):
        prepared, index = docs[i]
        if pool[i].kind not in CONVERSATION_KINDS:
            continue
        for distance in range(1, reach + 1):
            for j in (i - distance, i + distance):
                if 0 <= j < len(docs) and docs[j][0] is prepared:
                    if j not in pool:
                        pool[j] = _candidate(j, prepared, docs[j][1], lexical[j])
                        pool[j].lexical += speaker_score(ranking, pool[j])
                    if (distance, j) not in pool[i].neighbours:
                        pool[i].neighbours.append((distance, j))
                    if (distance, i) not in pool[j].neighbours:
                        pool[j].neighbours.append((distance, i))
    return rank(pool, ranking, limit=request.limit, min_score=request.min_score)


def scope_stats(corpus: Sequence[str], terms: Iterable[str]) -> CorpusStats:
    """N, average length and the document frequency of `terms` over token strings, as
    the index keeps them per scope."""
    wanted = set(terms)
    freq: Counter[str] = Counter()
    total = 0
    for tokens in corpus:
        words = tokens.split()
        total += len(words)
        freq.update(wanted.intersection(words))
    return CorpusStats(docs=len(corpus), avg_len=total / len(corpus), doc_freq=dict(freq))


def _candidate(key: int, prepared: PreparedFile, index: int, lexical: float) -> Candidate:
    chunk, tokens = prepared.chunks[index]
    return Candidate(
        id=key,
        path=prepared.path,
        line_from=chunk.line_from,
        line_to=chunk.line_to,
        kind=prepared.kind,
        created_at=chunk.created_at,
        ref=chunk.ref,
        text=chunk.text,
        tokens=tokens,
        lexical=lexical,
        dates=chunk.dates or (),
    )


def _between(moment: datetime | None, since: datetime | None, until: datetime | None) -> bool:
    """The index's `since`/`until` filter: an undated chunk passes only when neither is set."""
    if moment is None:
        return since is None and until is None
    return (since is None or moment >= since) and (until is None or moment < until)


def _within_days(moment: datetime | None, window: tuple[date, date], zone: tzinfo) -> bool:
    return moment is not None and window[0] <= moment.astimezone(zone).date() <= window[1]
