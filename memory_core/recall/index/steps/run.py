"""What the ranking steps share: the query's `Ranking`, the state of one ranking run
(`RankRun`), the `Step` type, and the record of each step's contributions (`Trace`).

A step reads and writes the run (the candidate pool and what earlier steps chose);
`run_steps` runs a list of them in order. When a search is explained (`explaining`),
the run also snapshots every candidate around each step and keeps what it changed; when
not, nothing is recorded and nothing is copied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import date, tzinfo
from enum import Enum

from memory_core.base.answer_kind import AnswerKind
from memory_core.base.records import Contribution
from memory_core.recall.index.rank_settings import RankSettings
from memory_core.recall.index.ranking import K1, B, CorpusStats
from memory_core.recall.index.rerank import Candidate, words

DENSE_FLOOR = 0.25
DENSE_FULL = 0.7
"""Cosine at which a vector hit is no evidence at all, and at which it is sure."""


@dataclass(slots=True)
class Ranking:
    """What a backend needs of the query to score its rows."""

    terms: Mapping[str, float]
    stats: CorpusStats
    window: tuple[date, date] | None
    today: date
    zone: tzinfo
    settings: RankSettings
    k1: float = K1
    b: float = B
    answer: AnswerKind | None = None
    speaker_terms: frozenset[str] = frozenset()
    """Query terms naming a speaker of the candidate turns (see `steps.speakers`)."""
    several: bool = False
    """The question gathers its answer from several moments: a session's later hits rank
    lower (`settings.session_repeat`, see `rerank.diversify`)."""


class Measure(Enum):
    """What a step changes of a candidate, as its explanation shows it."""

    LEXICAL = "lexical"
    """The BM25 score of its words (and speaker field)."""
    WORDS = "words"
    """The lexical evidence fusion weighs (with the exchange's, when scored so)."""
    BASE = "base"
    """The fused score."""
    SCORE = "score"
    """The ranked score."""
    FACTOR = "factor"
    """The product of the factors (time, priors, ...) that `weigh` multiplies in."""


Snapshot = tuple[float, float, float, float, float]
"""A candidate's measures, in `Measure`'s order."""


def snapshot(c: Candidate) -> Snapshot:
    return (c.lexical, words(c), c.base, c.score, c.factor)


_INDEX = {m: i for i, m in enumerate(Measure)}
WORDS = "words"
"""The first line of an explanation: the candidate's BM25 score before the steps."""


@dataclass(frozen=True, slots=True)
class Step:
    """One named rule of the ranking: `apply` changes the run (scores, factors or the
    candidates kept); `knobs` are the `RankSettings` fields it reads. Its explanation is
    the change of `measure` (a ratio for `Measure.FACTOR`, else what it added), from
    `since` before it (default: `measure`); no measure, no explanation (a filter)."""

    name: str
    apply: Callable[[RankRun], None]
    knobs: tuple[str, ...] = ()
    measure: Measure | None = None
    since: Measure | None = None

    def contribution(self, before: Snapshot, after: Snapshot) -> Contribution | None:
        if self.measure is None:
            return None
        now = after[_INDEX[self.measure]]
        was = before[_INDEX[self.since or self.measure]]
        if self.measure is Measure.FACTOR:
            if now == was:
                return None
            return Contribution(self.name, "×", now / was if was else now)
        if now == was:
            return None
        return Contribution(self.name, "+", now - was)


@dataclass(slots=True)
class Trace:
    """Each candidate's contributions, by id, in the order the steps made them."""

    steps: dict[int, list[Contribution]] = field(default_factory=dict)

    def start(self, candidates: Sequence[Candidate]) -> None:
        """What each candidate brings before any step: its words' score ("words")."""
        for c in candidates:
            if c.lexical:
                self.steps[c.id] = [Contribution(WORDS, "+", c.lexical)]

    def around(self, step: Step, run: RankRun) -> None:
        """Run `step`, keeping what it changed of each candidate."""
        if step.measure is None:
            step.apply(run)
            return
        before = {c.id: snapshot(c) for c in run.candidates}
        step.apply(run)
        for c in run.candidates:
            made = step.contribution(before[c.id], snapshot(c))
            if made is not None:
                self.steps.setdefault(c.id, []).append(made)

    def of(self, c: Candidate) -> tuple[Contribution, ...]:
        return tuple(self.steps.get(c.id, ()))


_EXPLAIN: ContextVar[bool] = ContextVar("chatmem_explain_ranking", default=False)


@contextmanager
def explaining() -> Iterator[None]:
    """Searches inside this block return hits carrying their steps' contributions
    (`Hit.steps`). A context variable rather than a parameter: a front end asks for it at
    its one search call, and the ranking runs several calls below it (the index's search
    or the files' fallback) whose signatures need not carry it."""
    token = _EXPLAIN.set(True)
    try:
        yield
    finally:
        _EXPLAIN.reset(token)


def explain_asked() -> bool:
    return _EXPLAIN.get()


@dataclass(slots=True)
class RankRun:
    """One ranking in progress: the pool and what the steps so far made of it."""

    pool: dict[int, Candidate]
    ranking: Ranking
    limit: int
    min_score: float = 0.0
    candidates: list[Candidate] = field(default_factory=list)
    """The whole pool, in its order (every step that scores, scores these)."""
    window_scorer: Callable[[str], float] | None = None
    """BM25 of an exchange as one document, when turns are scored so (`steps.exchange`)."""
    evidence: dict[int, float] = field(default_factory=dict)
    """Each kept candidate's own and its neighbours' lexical score (for its confidence)."""
    kept: list[Candidate] = field(default_factory=list)
    """Candidates with evidence enough, best first (`steps.evidence`)."""
    named: set[int] = field(default_factory=set)
    """Ids of the holders of a rare term of the question (`steps.exact_terms`)."""
    weighed: list[Candidate] = field(default_factory=list)
    """The kept candidates that can still reach the results, whose factors count."""
    chosen: list[Candidate] = field(default_factory=list)
    """The results, best first."""
    trace: Trace | None = None

    @property
    def settings(self) -> RankSettings:
        return self.ranking.settings


def run_steps(run: RankRun, steps: Sequence[Step]) -> None:
    """Each step in order; with a trace, each one's contributions recorded."""
    trace = run.trace
    if trace is not None:
        trace.start(run.candidates)
    for step in steps:
        if trace is None:
            step.apply(run)
        else:
            trace.around(step, run)


def dense_confidence(similarity: float | None) -> float:
    """How sure a vector hit is by its cosine alone, 0..1."""
    if similarity is None:
        return 0.0
    return min(max((similarity - DENSE_FLOOR) / (DENSE_FULL - DENSE_FLOOR), 0.0), 1.0)


def shown_window(c: Candidate) -> set[int]:
    """The chunks a hit shows: itself and its nearest neighbours."""
    return {c.id, *(o for d, o in c.neighbours if d == 1)}
