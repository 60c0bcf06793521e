"""Fusion and the dense gate: the lexical and the vector score become one (`rerank.fuse`:
a turn's vector adds only above `turn_dense_floor`); its explanation is what the
vectors added."""

from __future__ import annotations

from memory_core.recall.index.rerank import fuse
from memory_core.recall.index.steps.run import Measure, RankRun, Step


def _fusion(run: RankRun) -> None:
    fuse(run.candidates, run.settings)


FUSION = Step(
    "dense gate",
    _fusion,
    ("fusion", "dense_weight", "turn_dense_floor", "turn_dense_weight", "rrf_k"),
    Measure.BASE,
    since=Measure.WORDS,
)
