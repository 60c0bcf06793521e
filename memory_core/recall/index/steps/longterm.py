"""Long-term entries: another member's claim ranks below the member's own word
(`CLAIMS`), and an entry ranks above the conversation turns that say what it says
(`ENTRIES`, `rerank.entries_over_turns`)."""

from __future__ import annotations

from memory_core.base.chunks import ChunkKind
from memory_core.base.speaker_label import is_claim_text
from memory_core.longterm.claims import CLAIM_FACTOR
from memory_core.recall.index.rerank import entries_over_turns
from memory_core.recall.index.steps.run import Measure, RankRun, Step


def _claims(run: RankRun) -> None:
    for c in run.weighed:
        if c.kind is ChunkKind.LONG_TERM and is_claim_text(c.text):
            c.factor *= CLAIM_FACTOR


def _entries(run: RankRun) -> None:
    entries_over_turns(run.weighed, run.settings.duplicate_similarity)


CLAIMS = Step("claims", _claims, (), Measure.FACTOR)
ENTRIES = Step("entries over turns", _entries, ("duplicate_similarity",), Measure.SCORE)
