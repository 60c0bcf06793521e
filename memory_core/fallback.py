"""Search straight from the files when the index cannot be used.

Same chunks, same tokens and BM25 (`recall.k1`, `recall.b`) through rank-bm25, so a corrupt or
locked database degrades speed, not answers. Only this scope's files are read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, tzinfo

from rank_bm25 import BM25Okapi

from memory_core.chunking import ChunkKind, summary_period
from memory_core.index import K1, B, Hit, PreparedFile, idf, prepare_file, scope_files
from memory_core.scope import ScopeKey
from memory_core.text import tokenize
from memory_core.workspace import Workspace

log = logging.getLogger(__name__)


class ScopeBM25(BM25Okapi):  # type: ignore[misc]
    """rank-bm25's Okapi scorer with the index's always-positive idf, so a degraded search
    scores every chunk exactly as the index would."""

    def _calc_idf(self, nd: dict[str, int]) -> None:
        self.idf = {word: idf(self.corpus_size, freq) for word, freq in nd.items()}


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
    query: str | Sequence[str],
    *,
    limit: int = 10,
    kinds: Iterable[ChunkKind] | None = None,
    min_score: float = 0.0,
    zone: tzinfo = UTC,
    k1: float = K1,
    b: float = B,
) -> list[Hit]:
    """rank-bm25 over the scope's chunks (blocking: run in a thread)."""
    terms = tokenize(query) if isinstance(query, str) else [t for q in query for t in tokenize(q)]
    if not terms:
        return []
    wanted = {ChunkKind(k) for k in kinds} if kinds is not None else None
    # The corpus statistics (N, average length, document frequencies) are the whole
    # scope's, hidden daily summaries and unwanted kinds included, as in the index, which
    # keeps them per scope; those chunks are scored but never returned.
    files = load_scope_chunks(workspace, scope, include_hidden=True, zone=zone)
    hidden = _hidden_paths(files)
    docs: list[tuple[PreparedFile, int]] = []
    corpus: list[list[str]] = []
    for prepared in files:
        for index, (_, tokens) in enumerate(prepared.chunks):
            docs.append((prepared, index))
            corpus.append(tokens.split())
    if not corpus:
        return []
    bm25 = ScopeBM25(corpus, k1=k1, b=b)
    scores = bm25.get_scores(list(dict.fromkeys(terms)))
    ranked = sorted(
        (
            i
            for i, (prepared, _) in enumerate(docs)
            if prepared.path not in hidden and (wanted is None or prepared.kind in wanted)
        ),
        key=lambda i: -scores[i],
    )
    hits: list[Hit] = []
    for i in ranked[: max(limit, 0)]:
        score = float(scores[i])
        if score <= 0 or score < min_score:
            break
        prepared, index = docs[i]
        chunk = prepared.chunks[index][0]
        hits.append(
            Hit(
                path=prepared.path,
                line_from=chunk.line_from,
                line_to=chunk.line_to,
                score=score,
                text=chunk.text,
                kind=prepared.kind,
                created_at=chunk.created_at,
                ref=chunk.ref,
            )
        )
    return hits
