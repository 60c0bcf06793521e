"""The exact BM25 top N of a scope, with MaxScore pruning: pure, I/O given as functions.

A search's lexical candidates are the N chunks with the highest BM25 over every query
term (its weights and idf, `ranking.bm25_scorer`'s formula), not an approximation: a
common term a question needs ("喜欢 认为 女儿") is never dropped for speed.

*How it stays fast (MaxScore, as Lucene and tantivy prune):* a term adds at most
`weight × idf × (k1 + 1)` to any chunk's score. Terms are read rarest (highest bound)
first; once the N-th best exact score found so far is above the sum of the bounds of the
terms not yet read, no chunk holding only those terms can enter the top N, and their
postings (the long lists of common words) are never read. Chunks already seen are
scored exactly from their own tokens (every term, read or not), best bound first, until
the next bound is below the N-th best score. Every chunk of the result is thus scored by
`Scoring.score`, the one function a brute-force top N would use, and ties are broken by
chunk id: the result is the brute-force one. A boost term (`Scoring.boosts`: a word that
only shapes the question) finds nothing: the candidates are the chunks holding another
term. Boosts are read last, and only when that is cheaper than verifying the chunks they
could still lift (their postings then add to the chunks already seen); a boost not read
counts its bound in every bound left.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memory_core.recall.index.ranking import CorpusStats, idf

if TYPE_CHECKING:  # numpy is loaded by the first search, never by a command's import
    import numpy as np
    from numpy.typing import ArrayLike, NDArray

Postings = Callable[[str], tuple["ArrayLike", "ArrayLike", "ArrayLike"]]
"""Chunk ids, term frequencies and chunk lengths in tokens of every chunk holding a
term, as three arrays, one entry per chunk. A length may be given shorter than it is
(0 when unknown): that only loosens the bound, never the result."""
Fetch = Callable[[list[int]], Sequence[Sequence[Any]]]
"""Candidate rows (`postings.CANDIDATE_COLUMNS`) of those ids that pass the search's
filters (visible, of the scope, kinds, times, paths); the others are left out."""
Admit = Callable[[list[int]], set[int]]
"""Which of these ids pass the search's filters: by id alone, far cheaper than `Fetch`."""
ID, TOKENS = 0, 4
"""Where a candidate row holds its chunk id and its tokens."""
SLACK = 1e-9
"""Relative margin of every pruning test: bounds and scores summed in another order
may differ in their last bits, and a chunk is pruned only when it surely scores below."""
BATCH = 64
"""Fewest chunks verified (read and scored from their tokens) at a time."""
VERIFY_COST = 8
"""What verifying one chunk costs, in postings read (a row fetched by id and its tokens
scored, against one posting of a term's list: measured at 100 000 chunks). A term left
unread makes every chunk seen that could still reach the bar need verifying; when those
cost more than the term's postings, the term is read instead."""
BOOST_VERIFY_COST = 32
"""The same in a boost's postings: they are only looked up among the chunks seen
(measured on the peer bench's questions that have one), far cheaper than a term that
finds chunks, whose postings are merged with the others'."""


@dataclass(frozen=True, slots=True)
class Scoring:
    """BM25 of one query: each term's weight × idf, summed in this order."""

    weights: dict[str, float]
    k1: float
    b: float
    avg_len: float
    postings: dict[str, int]
    """How many chunks hold each term (the scope's statistics): what reading it costs."""
    boosts: frozenset[str] = frozenset()
    """Terms that score a chunk but never make it a candidate alone (`Query.shaping`):
    the top N is of the chunks holding another term."""

    @classmethod
    def of(
        cls,
        terms: Mapping[str, float],
        stats: CorpusStats,
        k1: float,
        b: float,
        boosts: AbstractSet[str] = frozenset(),
    ) -> Scoring:
        """The query's terms (their weights) over the scope's statistics, as
        `ranking.bm25_scorer` weighs them; terms of weight 0 or less score nothing."""
        weights = {
            t: w * idf(stats.docs, stats.doc_freq.get(t, 1)) for t, w in terms.items() if w > 0
        }
        held = {t: stats.doc_freq.get(t, 0) for t in weights}
        return cls(
            weights, k1, b, max(stats.avg_len, 1e-9), held, frozenset(boosts) & weights.keys()
        )

    @property
    def finders(self) -> list[str]:
        """The terms whose holders are candidates, highest weight first."""
        return self.heaviest_first(t for t in self.weights if t not in self.boosts)

    def heaviest_first(self, terms: Iterable[str]) -> list[str]:
        """`terms` by weight, highest first (ties: by the term): the order MaxScore reads."""
        weights = self.weights
        return sorted(terms, key=lambda t: (-weights[t], t))

    def part(self, weight: float, tf: int, length: int) -> float:
        """One term's part of a chunk's score (`ranking.bm25_scorer`'s expression)."""
        k1 = self.k1
        norm = k1 * (1.0 - self.b + self.b * length / self.avg_len)
        return weight * tf * (k1 + 1.0) / (tf + norm)

    def bound(self, term: str) -> float:
        """The most the term can add to any chunk's score (tf → ∞)."""
        return self.weights[term] * (self.k1 + 1.0)

    def score(self, tokens: str) -> float:
        """A chunk's score from its stored tokens: the reference every result meets."""
        doc = tokens.split()
        total = 0.0
        for term, weight in self.weights.items():
            tf = doc.count(term)
            if tf:
                total += self.part(weight, tf, len(doc))
        return total


def warm_up() -> None:
    """Import numpy now (blocking: a worker thread's), so a serving process's first
    search does not pay for it (a tenth of a second of CPU), nor for the part of it the
    first `numpy.isin` imports."""
    import numpy.ma  # noqa: F401


def exact_top(
    scoring: Scoring, wanted: int, postings: Postings, fetch: Fetch, admit: Admit | None = None
) -> list[Any]:
    """The `wanted` best rows by `scoring.score` (ties: lower chunk id first), best first.

    Only rows `fetch` returns count (the filters); a chunk is fetched at most once. When
    most of a batch fails the filters (a question's named day), `admit` sorts out every
    chunk left by id first, so only those that pass are fetched."""
    import numpy as np

    finders = scoring.finders
    if wanted <= 0 or not finders:
        return []
    # The boosts come last: read only to score the chunks the finders brought.
    order = [*finders, *scoring.heaviest_first(scoring.boosts)]
    rest = [0.0] * (len(order) + 1)
    for j in range(len(order) - 1, -1, -1):
        rest[j] = rest[j + 1] + scoring.bound(order[j])
    top = _Top(scoring, wanted, fetch)
    k1, b = scoring.k1, scoring.b
    flat, per_token = k1 * (1.0 - b), k1 * b / scoring.avg_len
    seen: list[NDArray[np.int64]] = []
    parts: list[NDArray[np.float64]] = []
    ids: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
    partial: NDArray[np.float64] = np.zeros(0)
    read = 0
    for term in order:
        cut = top.cut()
        boost = read >= len(finders)
        if boost or (read and rest[read] < cut):
            # No chunk holding only the terms not read can enter the top N (a boost brings
            # none): stop, unless verifying the chunks seen that still might costs more
            # than this term.
            needed = (
                len(ids) if cut == -math.inf else int(np.count_nonzero(partial >= cut - rest[read]))
            )
            cost = BOOST_VERIFY_COST if boost else VERIFY_COST
            if not needed or needed * cost <= scoring.postings.get(term, 0):
                break
        chunk_ids, tf, length = (np.asarray(a) for a in postings(term))
        # `part`'s value in another order of operations: a bound, exact to SLACK.
        gain = scoring.weights[term] * (k1 + 1.0)
        tf = tf.astype(np.float64)
        part = gain * tf / (tf + flat + per_token * length.astype(np.float64))
        if boost:
            # Only the chunks seen gain: `ids` stays as it is (sorted, unique).
            at = np.minimum(np.searchsorted(ids, chunk_ids), len(ids) - 1)
            held = ids[at] == chunk_ids
            partial[at[held]] += part[held]
        else:
            seen.append(chunk_ids.astype(np.int64))
            parts.append(part)
            ids, where = np.unique(np.concatenate(seen), return_inverse=True)
            partial = np.bincount(where, weights=np.concatenate(parts), minlength=len(ids)).astype(
                np.float64
            )
        read += 1
        if read < len(order) and len(ids) >= wanted:
            # Could the terms left be skipped? Only the best seen chunks tell (their
            # exact scores set the bar); worth reading them when their partial scores
            # alone already clear the terms' bounds.
            best = float(np.partition(partial, len(partial) - wanted)[len(partial) - wanted])
            if best > rest[read] * (1.0 + SLACK):
                top.verify(_best(ids, partial, top.checked, -math.inf, wanted))
    remaining = rest[read]
    bounds = partial + remaining
    if top.cut() == -math.inf:
        # No bar yet (every term read, or too few seen): the best seen set it.
        top.verify(_best(ids, bounds, top.checked, -math.inf, wanted))
    # The seen chunks left that may still enter, highest bound first (ties: lowest id):
    # few, once the bar is set. `ids` is fixed (sorted) from here: which are still
    # unchecked is a mask, not a set searched at every batch.
    unchecked = np.ones(len(ids), dtype=bool)
    _mark(ids, unchecked, top.checked)
    step = max(BATCH, wanted)
    while True:
        batch = _best(ids, bounds, unchecked, top.cut(), step)
        if not batch:
            break
        passed = top.verify(batch)
        _mark(ids, unchecked, batch)
        if admit is not None and passed * 2 < len(batch):
            left = [int(i) for i in ids[unchecked & (bounds >= top.cut())]]
            admitted = admit(left) if left else set()
            out = [i for i in left if i not in admitted]
            top.checked.update(out)
            _mark(ids, unchecked, out)
            admit = None  # once: the rest are known to pass
    return top.rows()


def _mark(ids: NDArray[np.int64], unchecked: NDArray[np.bool_], done: Iterable[int]) -> None:
    """Clear the mask at these chunks (every one is among the sorted `ids`)."""
    import numpy as np

    held = np.fromiter(done, dtype=np.int64)
    if len(held):
        unchecked[np.searchsorted(ids, held)] = False


def _best(
    ids: NDArray[np.int64],
    bounds: NDArray[np.float64],
    unchecked: NDArray[np.bool_] | set[int],
    floor: float,
    count: int,
) -> list[int]:
    """Up to `count` unchecked chunks of highest bound, none below `floor` (ties: lowest
    id), best first. `unchecked`: a mask over `ids`, or the set of chunks checked."""
    import numpy as np

    keep = bounds >= floor
    if isinstance(unchecked, set):
        if unchecked:
            checked = np.fromiter(unchecked, dtype=np.int64, count=len(unchecked))
            keep &= ~np.isin(ids, checked)
    else:
        keep &= unchecked
    candidates, values = ids[keep], bounds[keep]
    if len(candidates) > count:
        # Only what may make the first `count` is sorted: the count-th best and above.
        bar = np.partition(values, len(values) - count)[len(values) - count]
        near = values >= bar
        candidates, values = candidates[near], values[near]
    order = np.lexsort((candidates, -values))[:count]
    return [int(i) for i in candidates[order]]


class _Top:
    """Chunks read and scored exactly, and the bar the N-th best of them sets."""

    def __init__(self, scoring: Scoring, wanted: int, fetch: Fetch) -> None:
        self._scoring = scoring
        self._wanted = wanted
        self._fetch = fetch
        self.checked: set[int] = set()
        self._kept: list[tuple[float, int, Sequence[Any]]] = []
        self._bar: float | None = None

    def cut(self) -> float:
        """A chunk scoring at most a bound below this surely stays out of the top N."""
        bar = self._bar
        return -math.inf if bar is None else bar - SLACK * (1.0 + abs(bar))

    def verify(self, ids: list[int]) -> int:
        """Read and score these chunks; how many passed the filters."""
        if not ids:
            return 0
        self.checked.update(ids)
        rows = self._fetch(ids)
        for row in rows:
            chunk_id = int(row[ID])
            self._kept.append((self._scoring.score(str(row[TOKENS])), chunk_id, row))
        if len(self._kept) >= self._wanted:
            self._kept.sort(key=lambda k: (-k[0], k[1]))
            del self._kept[self._wanted :]
            self._bar = self._kept[-1][0]
        return len(rows)

    def rows(self) -> list[Any]:
        self._kept.sort(key=lambda k: (-k[0], k[1]))
        return [row for _, _, row in self._kept[: self._wanted]]
