"""The newcomer test: a dummy ranking rule added the way steps/__init__.py's recipe says
(a `Step` with its knobs, one entry in a copy of `RANK_STEPS` before `WEIGH`), touching
no other file; it runs in order and `chatmem search --explain` names it."""

from __future__ import annotations

from datetime import UTC, date

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.text import tokenize
from memory_core.recall.index import steps
from memory_core.recall.index.pipeline import Ranking, rank
from memory_core.recall.index.rank_settings import RankSettings
from memory_core.recall.index.ranking import CorpusStats
from memory_core.recall.index.steps import RANK_STEPS, Measure, RankRun, Step
from memory_core.recall.index.steps.reach import REACH
from memory_core.recall.index.steps.weigh import WEIGH
from tests.support import candidate
from tests.unit.cli_support import Run, _clean_env, cli_fixture, ws_fixture  # noqa: F401  (fixtures)

SEEN: list[int] = []


def _mornings(run: RankRun) -> None:
    """The dummy rule: what speaks of the morning weighs double."""
    SEEN.append(len(run.weighed))
    for c in run.weighed:
        if "morning" in c.text:
            c.factor *= 2.0


MORNINGS = Step("mornings", _mornings, ("question_factor",), Measure.FACTOR)
AT = RANK_STEPS.index(WEIGH)
WITH_MORNINGS = (*RANK_STEPS[:AT], MORNINGS, *RANK_STEPS[AT:])


def ranking() -> Ranking:
    terms = dict.fromkeys(tokenize("green tea"), 1.0)
    stats = CorpusStats(docs=10, avg_len=5.0, doc_freq=dict.fromkeys(terms, 3))
    return Ranking(terms, stats, None, date(2026, 3, 1), UTC, RankSettings(recency_boost=0.0))


def pool() -> dict[int, object]:
    texts = {"green tea in the morning": 1.0, "green tea, strong green tea at night": 1.5}
    return {
        i: candidate(i, t, kind=ChunkKind.DAILY, lexical=score)
        for i, (t, score) in enumerate(texts.items())
    }


def test_a_new_step_runs_in_its_place_and_is_explained() -> None:
    SEEN.clear()
    before = rank(pool(), ranking(), limit=2)  # type: ignore[arg-type]
    after = rank(pool(), ranking(), limit=2, steps=WITH_MORNINGS, explain=True)  # type: ignore[arg-type]
    assert SEEN == [2]  # after REACH chose the weighed, before WEIGH multiplied
    assert RANK_STEPS.index(REACH) < AT
    by_text = {h.text: h for h in after}
    morning = by_text["green tea in the morning"]
    assert ("mornings", "×", 2.0) in [(c.step, c.how, c.value) for c in morning.steps]
    assert morning.score == 2 * {h.text: h for h in before}[morning.text].score
    night = by_text["green tea, strong green tea at night"]
    assert "mornings" not in [c.step for c in night.steps]
    assert after[0].text == morning.text != before[0].text


def test_search_explain_names_the_new_step(cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """The documented hook: `pipeline.rank` reads `steps.RANK_STEPS` at each call."""
    monkeypatch.setattr(steps, "RANK_STEPS", WITH_MORNINGS)
    for note in ("green tea in the morning", "green tea at night"):
        assert cli("append", note)[0] == 0
    [first, second] = cli.json("search", "green tea", "--explain")
    assert first["text"] == "green tea in the morning"
    assert {"step": "mornings", "how": "×", "value": 2.0} in first["steps"]
    assert "mornings" not in [s["step"] for s in second["steps"]]
    code, out, _ = cli("search", "green tea", "--explain")
    assert code == 0 and "mornings ×2" in out
