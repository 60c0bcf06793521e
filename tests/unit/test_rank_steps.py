"""Each named ranking step alone, on hand-made candidates: what it changes, and that
`RANK_STEPS` runs them in order with the knobs they name (recall/index/steps/)."""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import UTC, date, datetime

import pytest

from memory_core.base.answer_kind import AnswerKind
from memory_core.base.chunks import ChunkKind
from memory_core.base.speaker_label import CLAIM_MARK
from memory_core.base.text import tokenize
from memory_core.config.memory import RecallSettings
from memory_core.longterm.claims import CLAIM_FACTOR
from memory_core.recall.index.pipeline import Ranking, rank
from memory_core.recall.index.rank_settings import RankSettings, rank_settings
from memory_core.recall.index.ranking import CorpusStats
from memory_core.recall.index.rerank import Candidate
from memory_core.recall.index.steps import RANK_STEPS, Measure, RankRun, Step
from memory_core.recall.index.steps.answer import ANSWER, HEADING_FACTOR, HEADINGS
from memory_core.recall.index.steps.context import CONTEXT
from memory_core.recall.index.steps.dates import DATED_ONLY, TIME
from memory_core.recall.index.steps.duplicates import DUPLICATES
from memory_core.recall.index.steps.evidence import EVIDENCE
from memory_core.recall.index.steps.exact_terms import EXACT_TERMS, RARE_TERMS
from memory_core.recall.index.steps.exchange import EXCHANGE
from memory_core.recall.index.steps.fusion import FUSION
from memory_core.recall.index.steps.longterm import CLAIMS, ENTRIES
from memory_core.recall.index.steps.priors import PRIORS
from memory_core.recall.index.steps.questions import QUESTIONS
from memory_core.recall.index.steps.reach import PRIOR_REACH, REACH
from memory_core.recall.index.steps.replies import QUESTION_KEEPS, REPLIES
from memory_core.recall.index.steps.run import WORDS
from memory_core.recall.index.steps.speakers import OTHER_SPEAKERS, SPEAKER_NAMES
from memory_core.recall.index.steps.weigh import WEIGH
from tests.support import candidate

TODAY = date(2026, 3, 1)
MARCH = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
JANUARY = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def ranking(
    query: str = "tea", *, window: tuple[date, date] | None = None, **knobs: object
) -> Ranking:
    terms = dict.fromkeys(tokenize(query), 1.0)
    stats = CorpusStats(docs=50, avg_len=6.0, doc_freq=dict.fromkeys(terms, 10))
    return Ranking(terms, stats, window, TODAY, UTC, RankSettings(**knobs))  # type: ignore[arg-type]


def run_of(cs: list[Candidate], r: Ranking | None = None, *, limit: int = 10) -> RankRun:
    pool = {c.id: c for c in cs}
    return RankRun(pool, r or ranking(), limit, candidates=list(pool.values()))


def weighed(cs: list[Candidate], r: Ranking | None = None) -> RankRun:
    """A run at the factor steps: every candidate kept and weighed, factor 1."""
    run = run_of(cs, r)
    run.kept = list(cs)
    run.weighed = list(cs)
    return run


def link(a: Candidate, b: Candidate, distance: int = 1) -> None:
    a.neighbours.append((distance, b.id))
    b.neighbours.append((distance, a.id))


# --- the list -------------------------------------------------------------------------


def test_the_steps_have_unique_names_and_name_only_real_knobs() -> None:
    names = [s.name for s in RANK_STEPS]
    assert len(set(names)) == len(names) and WORDS not in names
    knobs = {f.name for f in fields(RankSettings)}
    assert all(set(s.knobs) <= knobs for s in RANK_STEPS)
    factors = [i for i, s in enumerate(RANK_STEPS) if s.measure is Measure.FACTOR]
    assert max(factors) < RANK_STEPS.index(WEIGH) < RANK_STEPS.index(DUPLICATES)


def test_rank_runs_the_given_steps_in_order() -> None:
    seen: list[str] = []
    steps = [Step(n, lambda run, n=n: seen.append(n)) for n in ("a", "b", "c")]
    assert rank({1: candidate(1, "tea", lexical=1.0)}, ranking(), limit=3, steps=steps) == []
    assert seen == ["a", "b", "c"]


def test_rank_settings_follow_the_recall_section() -> None:
    assert rank_settings(RecallSettings()) == RankSettings()
    changed = rank_settings(RecallSettings(time_boost=2.5, context_window=[0.1]))
    assert changed.time_boost == 2.5 and changed.context_weights == (0.1,)
    assert RankSettings().context_weights == tuple(RecallSettings().context_window)


# --- the steps, one by one ------------------------------------------------------------


def test_speaker_names_scores_a_named_speaker_as_the_speaker() -> None:
    nate = candidate(1, "Nate: hi Joanna", kind=ChunkKind.MESSAGE, lexical=0.0)
    thanks = candidate(2, "Joanna: thanks, Nate!", kind=ChunkKind.MESSAGE, lexical=5.0)
    r = ranking("nate")
    SPEAKER_NAMES.apply(run_of([nate, thanks], r))
    assert r.speaker_terms == frozenset({"nate"})
    assert nate.lexical > 0 and thanks.lexical == 0.0
    off = candidate(2, "Joanna: thanks, Nate!", kind=ChunkKind.MESSAGE, lexical=5.0)
    SPEAKER_NAMES.apply(run_of([off], ranking("nate", speaker_names=False)))
    assert off.lexical == 5.0


def test_exchange_scores_a_turn_with_its_neighbours_words() -> None:
    a = candidate(1, "Mia: how long have you had green tea?", kind=ChunkKind.MESSAGE)
    b = candidate(2, "Tom: 5 years already!", kind=ChunkKind.MESSAGE)
    link(a, b)
    run = run_of([a, b])
    EXCHANGE.apply(run)
    assert run.window_scorer is not None
    assert b.exchange is not None and b.exchange > 0 and a.exchange == b.exchange
    none = candidate(3, "tea", kind=ChunkKind.MESSAGE)
    EXCHANGE.apply(run_of([none], ranking(exchange_documents=False)))
    assert none.exchange is None


def test_fusion_gates_a_turns_vector() -> None:
    near = candidate(1, "Mia: hi", kind=ChunkKind.MESSAGE, lexical=1.0, dense=0.9)
    far = candidate(2, "Mia: tea", kind=ChunkKind.MESSAGE, lexical=1.0, dense=0.1)
    FUSION.apply(run_of([near, far]))
    assert near.base > 1.0 and far.base == 1.0


def test_dated_only_ranks_a_time_alone_by_date() -> None:
    c = candidate(1, "anything", lexical=0.0)
    DATED_ONLY.apply(run_of([c], ranking("", window=(TODAY, TODAY))))
    assert c.base == 1.0
    d = candidate(1, "tea", lexical=2.0)
    d.base = 2.0
    DATED_ONLY.apply(run_of([d]))
    assert d.base == 2.0


def test_context_adds_shares_of_the_neighbours() -> None:
    a, b = candidate(1, "a"), candidate(2, "b")
    a.base, b.base = 1.0, 2.0
    link(a, b)
    CONTEXT.apply(run_of([a, b], ranking(context_weights=(0.5,))))
    assert (a.score, b.score) == (2.0, 2.5)


def test_replies_hand_a_questions_score_to_its_reply() -> None:
    q = candidate(1, "Mia: do you like green tea?", kind=ChunkKind.MESSAGE, lexical=2.0)
    a = candidate(2, "Tom: yes, every morning", kind=ChunkKind.MESSAGE)
    link(q, a)
    q.score, a.score = 2.0, 0.5
    REPLIES.apply(run_of([q, a]))
    assert a.score == 2.0 and a.lent == (1, 2.0) and q.score == 2.0 * QUESTION_KEEPS


def test_evidence_keeps_what_has_words_best_first() -> None:
    weak, strong, none = (
        candidate(1, "a", lexical=0.2),
        candidate(2, "b", lexical=3.0),
        candidate(3, "c"),
    )
    weak.score, strong.score = 0.2, 3.0
    run = run_of([weak, strong, none])
    run.min_score = 0.5
    EVIDENCE.apply(run)
    assert run.kept == [strong] and run.evidence == {2: 3.0}


def test_rare_terms_and_exact_terms_keep_a_rare_terms_holder() -> None:
    r = ranking("zq7x tea")
    r.stats.doc_freq["zq7x"] = 1
    holder = candidate(1, "ticket zq7x", lexical=1.0)
    others = [candidate(i, "tea", lexical=2.0) for i in range(2, 5)]
    run = run_of([holder, *others], r, limit=2)
    run.kept = [*others, holder]
    RARE_TERMS.apply(run)
    assert run.named == {1}
    run.weighed = run.kept
    run.chosen = others[:2]
    EXACT_TERMS.apply(run)
    assert holder in run.chosen and len(run.chosen) == 2


def test_time_lifts_what_falls_in_the_named_time() -> None:
    inside = candidate(1, "tea", created_at=MARCH)
    outside = candidate(2, "tea", created_at=JANUARY)
    run = run_of([inside, outside], ranking(window=(TODAY, TODAY), time_boost=0.5))
    run.kept = [inside, outside]
    TIME.apply(run)
    assert (inside.factor, outside.factor) == (1.5, 1.0)


def test_reach_weighs_the_best_and_the_lifted_only() -> None:
    limit = 1
    cs = [candidate(i, "tea") for i in range(limit * PRIOR_REACH + 12)]
    cs[-1].factor = 1.5
    run = run_of(cs, limit=limit)
    run.kept = list(cs)
    REACH.apply(run)
    assert run.weighed == [*cs[: limit * PRIOR_REACH + 10], cs[-1]]


@pytest.mark.parametrize(
    ("step", "c", "r", "factor"),
    [
        (PRIORS, candidate(1, "x", kind=ChunkKind.LONG_TERM), ranking(recency_boost=0.0), 1.15),
        (PRIORS, candidate(1, "x", kind=ChunkKind.SUMMARY), ranking(recency_boost=0.0), 0.9),
        (
            CLAIMS,
            candidate(1, f"{CLAIM_MARK}Bob) Alice is 30", kind=ChunkKind.LONG_TERM),
            ranking(),
            CLAIM_FACTOR,
        ),
        (
            QUESTIONS,
            candidate(1, "Mia: tea?", kind=ChunkKind.MESSAGE),
            ranking(question_factor=0.6),
            0.6,
        ),
        (QUESTIONS, candidate(1, "Mia: tea.", kind=ChunkKind.MESSAGE), ranking(), 1.0),
        (HEADINGS, candidate(1, "# 2026-03-02 tea"), ranking(), HEADING_FACTOR),
        (
            ANSWER,
            candidate(1, "on 2026-03-02"),
            replace(ranking(answer_boost=0.5), answer=AnswerKind.DATE),
            1.5,
        ),
        (
            ANSWER,
            candidate(1, "# 2026-03-02"),
            replace(ranking(answer_boost=0.5), answer=AnswerKind.DATE),
            1.0,
        ),
    ],
)
def test_a_factor_step_multiplies_the_factor(
    step: Step, c: Candidate, r: Ranking, factor: float
) -> None:
    c.factor = 2.0
    step.apply(weighed([c], r))
    assert c.factor == pytest.approx(2.0 * factor)


def test_other_speakers_weigh_the_unnamed_speakers_turns() -> None:
    nate = candidate(1, "Nate: I play games", kind=ChunkKind.MESSAGE)
    joanna = candidate(2, "Joanna: games, Nate", kind=ChunkKind.MESSAGE)
    r = ranking("nate games", other_speaker_factor=0.7)
    r.speaker_terms = frozenset({"nate"})
    OTHER_SPEAKERS.apply(weighed([nate, joanna], r))
    assert (nate.factor, joanna.factor) == (1.0, 0.7)


def test_weigh_multiplies_the_score_by_the_factor_once() -> None:
    c = candidate(1, "tea")
    c.score, c.factor = 2.0, 1.5
    WEIGH.apply(weighed([c]))
    assert c.score == 3.0


def test_entries_rise_above_the_turn_that_says_them() -> None:
    entry = candidate(1, "staging server 10.0.0.7", kind=ChunkKind.LONG_TERM)
    turn = candidate(2, "Mia: the staging server is 10.0.0.7", kind=ChunkKind.MESSAGE)
    entry.score, turn.score = 1.0, 3.0
    ENTRIES.apply(weighed([entry, turn]))
    assert entry.score > turn.score


def test_duplicates_leave_out_a_near_copy() -> None:
    a, b, c = (
        candidate(1, "green tea daily"),
        candidate(2, "green tea daily"),
        candidate(3, "coffee"),
    )
    a.score, b.score, c.score = 3.0, 2.0, 1.0
    run = weighed([c, b, a])
    DUPLICATES.apply(run)
    assert run.chosen == [a, c]


def test_an_explained_rank_records_each_steps_contribution() -> None:
    a = candidate(1, "Mia: green tea?", kind=ChunkKind.MESSAGE, lexical=2.0, created_at=MARCH)
    r = ranking(window=(TODAY, TODAY), time_boost=0.5, recency_boost=0.0, question_factor=0.5)
    [hit] = rank({1: a}, r, limit=1, explain=True)
    assert [(c.step, c.how) for c in hit.steps] == [
        (WORDS, "+"),
        ("exchange", "+"),
        ("time", "×"),
        ("questions", "×"),
    ]
    words, exchange, time, question = (c.value for c in hit.steps)
    assert (time, question) == (1.5, 0.5)
    assert hit.score == pytest.approx((words + exchange) * time * question)
    [plain] = rank({1: replace(a, neighbours=[])}, r, limit=1)
    assert plain.steps == () and plain.score == hit.score
