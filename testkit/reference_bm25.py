"""An independent BM25 to compare the product's against: rank-bm25's Okapi scorer (a dev
dependency only) with the index's always-positive idf. The tests check the index's
scores against it; the recall bench ranks with it as a baseline."""

from __future__ import annotations

from rank_bm25 import BM25Okapi

from memory_core.recall.index import idf


class ReferenceBM25(BM25Okapi):  # type: ignore[misc]
    """rank-bm25's Okapi scorer with the index's idf."""

    def _calc_idf(self, nd: dict[str, int]) -> None:
        self.document_frequency = dict(nd)
        self.idf = {word: idf(self.corpus_size, freq) for word, freq in nd.items()}
