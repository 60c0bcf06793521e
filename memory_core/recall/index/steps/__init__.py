"""The ranking as a list of named steps, run in order by `pipeline.rank`.

Adding a ranking rule (the whole recipe):
1. Write memory_core/recall/index/steps/<rule>.py: a function `apply(run: RankRun)` (no
   I/O) that changes the candidates (`run.weighed` for a factor: `c.factor *= ...`), and a
   `Step("<name>", apply, knobs, Measure.FACTOR)` naming the `RankSettings` fields it reads.
2. Add the step to `RANK_STEPS` below, where it belongs (a factor goes before `WEIGH`).
   A new knob is one `[recall]` setting (config/memory.py) and one `knob()` field of
   `RankSettings` (recall/index/rank_settings.py).
3. Test it in tests/unit/test_rank_steps.py on hand-made candidates (`pipeline.rank`
   takes `steps=`); `chatmem search --explain` then shows what it did to each hit
   (tests/unit/test_rule_rank_recipe.py follows this recipe with a dummy rule).

Each step sees the `RankRun`: the candidate pool, the query's `Ranking` and what the
steps before it kept. The order matters: the factor steps multiply `c.factor` in the order
listed and `WEIGH` multiplies the score by it once, which keeps the scores exact.
"""

from __future__ import annotations

from memory_core.recall.index.steps.answer import ANSWER, HEADINGS
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
from memory_core.recall.index.steps.reach import REACH
from memory_core.recall.index.steps.replies import REPLIES
from memory_core.recall.index.steps.run import (
    Measure,
    Ranking,
    RankRun,
    Step,
    explain_asked,
    explaining,
)
from memory_core.recall.index.steps.speakers import OTHER_SPEAKERS, SPEAKER_NAMES
from memory_core.recall.index.steps.weigh import WEIGH

RANK_STEPS: tuple[Step, ...] = (
    SPEAKER_NAMES,  # a name asked about is a turn's speaker, not a word
    EXCHANGE,  # a turn scored as one document with its neighbours
    FUSION,  # words and vectors as one score (the dense gate)
    DATED_ONLY,  # a question of a time alone: every turn scores the same
    CONTEXT,  # shares of the neighbours' scores
    REPLIES,  # a question's score goes to its reply
    EVIDENCE,  # too little evidence: out; the rest best first
    RARE_TERMS,  # the holders of a rare term of the question
    TIME,  # factor: inside the time the question names
    REACH,  # only those that can still reach the results are weighed
    PRIORS,  # factor: kind of memory and recency
    CLAIMS,  # factor: another member's claim
    QUESTIONS,  # factor: a turn that asks
    OTHER_SPEAKERS,  # factor: a turn of someone the question does not name
    HEADINGS,  # factor: a heading alone
    ANSWER,  # factor: holds the kind of answer asked for
    WEIGH,  # score × factor
    ENTRIES,  # long-term entries above the turns that say them
    DUPLICATES,  # near-copies and repeated sessions out; the best `limit`
    EXACT_TERMS,  # the rare terms' holders keep their places
)
"""The ranking, in order (`pipeline.rank` runs it; `--explain` and the TUI name it)."""

__all__ = [
    "RANK_STEPS",
    "Measure",
    "RankRun",
    "Ranking",
    "Step",
    "explain_asked",
    "explaining",
]
