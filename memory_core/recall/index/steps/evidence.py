"""Evidence: a candidate stays only with lexical evidence of its own or of its
neighbours (at least `min_score`), a likely vector hit, or inside the time a question of
a time alone names; the kept are ordered best first."""

from __future__ import annotations

from memory_core.recall.index.steps.dates import dated_only
from memory_core.recall.index.steps.run import RankRun, Step, dense_confidence


def _evidence(run: RankRun) -> None:
    pool = run.pool
    weights = run.settings.context_weights
    only_dated = dated_only(run.ranking)
    for c in run.candidates:
        lexical = c.lexical
        for d, o in c.neighbours:
            if d <= len(weights):
                lexical += weights[d - 1] * pool[o].lexical
        likely = dense_confidence(c.dense) > 0.0
        if not (likely or only_dated) and (lexical < run.min_score or lexical <= 0):
            continue
        run.evidence[c.id] = lexical
        run.kept.append(c)
    run.kept.sort(key=lambda c: (-c.score, c.id))


EVIDENCE = Step("evidence", _evidence, ("context_weights",))
