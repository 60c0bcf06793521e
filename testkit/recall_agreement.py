"""The recall bench's quality check (bench/recall_bench.py): a plain BM25 baseline over
the same terms, and how its top 5 and the product's agree (docs/decisions/0011)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memory_core.base import text as mtext
from memory_core.recall.index import K1, B
from testkit.reference_bm25 import ReferenceBM25


class Baseline:
    """rank-bm25 over the same terms, scoring like the index (`ReferenceBM25`)."""

    def __init__(self, tokens: list[list[str]]) -> None:
        self.bm25 = ReferenceBM25(tokens, k1=K1, b=B)

    def top(self, query: str, limit: int = 5) -> tuple[list[int], np.ndarray | None]:
        """Indexes of the best `limit` chunks (score > 0), and every chunk's score."""
        terms = list(dict.fromkeys(mtext.tokenize(query)))
        if not terms:
            return [], None
        scores = self.bm25.get_scores(terms)
        if len(scores) > limit:
            best = np.argpartition(-scores, limit)[:limit]
        else:
            best = np.arange(len(scores))
        ranked = sorted(best.tolist(), key=lambda i: (-scores[i], i))
        return [i for i in ranked if scores[i] > 0][:limit], scores


@dataclass
class Quality:
    recall_ours: int = 0
    recall_same_words: int = 0
    recall_base: int = 0
    questions: int = 0
    question_ours: int = 0
    question_base: int = 0
    overlap: float = 0.0
    equivalent: float = 0.0
    top1: float = 0.0

    def add(
        self,
        texts: Sequence[str],
        target: int,
        tops: tuple[list[int], list[int], list[int]],
        scores: object,
        question: bool,
    ) -> None:
        """One query: `tops` = (ours as asked, ours with the baseline's words, the
        baseline's); `question` = the product reads it as a question (`read_otherwise`)."""
        ours, same_words, base = tops
        wanted = texts[target]
        found = any(texts[i] == wanted for i in ours if i >= 0)
        found_base = any(texts[i] == wanted for i in base)
        self.recall_ours += found
        self.recall_same_words += any(texts[i] == wanted for i in same_words if i >= 0)
        self.recall_base += found_base
        if question:
            self.questions += 1
            self.question_ours += found
            self.question_base += found_base
        # How far the two rankings agree is asked of the same words: the index's top 5
        # against exact BM25, not the reading of a question against none.
        ours = same_words
        if not base and not ours:
            self.overlap += 1.0
            self.equivalent += 1.0
            self.top1 += 1.0
            return
        self.overlap += len(set(ours) & set(base)) / max(len(base), len(ours))
        if not isinstance(scores, np.ndarray) or not base:
            return
        # Ties make "the same chunks" too strict (a tiny vocabulary has many equal
        # scores): count our hits that score, by the baseline's own BM25, at least as
        # high as the baseline's last hit.
        floor = scores[base[-1]] - 1e-9
        good = sum(1 for i in ours if i >= 0 and scores[i] >= floor)
        self.equivalent += min(good, len(base)) / len(base)
        self.top1 += bool(ours and ours[0] >= 0 and scores[ours[0]] >= scores[base[0]] - 1e-9)
