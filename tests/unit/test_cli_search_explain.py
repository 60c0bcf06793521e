"""`chatmem search --explain`: under each hit, what each ranking step contributed, on a
real workspace through the real command."""

from __future__ import annotations

from typing import Any

import pytest

from memory_core.recall.index.steps import RANK_STEPS
from memory_core.recall.index.steps.run import WORDS
from tests.unit.cli_support import Run, _clean_env, cli_fixture, ws_fixture  # noqa: F401  (fixtures)

NOTES = (
    "I love green tea in the morning",
    "Mia said green tea keeps her awake",
    "we had pizza for lunch",
    "tea with Tom at the station cafe, green and strong",
)


def replay(steps: list[dict[str, Any]]) -> float:
    """A hit's score from its explanation: the added scores, times the factors once they
    were all given (`weigh`), then what was added after."""
    total, factor, weighed = 0.0, 1.0, False
    for step in steps:
        if step["how"] == "×":
            factor *= step["value"]
            continue
        if factor != 1.0 and not weighed:
            total, weighed = total * factor, True
        total += step["value"]
    return total if weighed else total * factor


@pytest.fixture
def noted(cli: Run) -> Run:
    for note in NOTES:
        code, _, err = cli("append", note)
        assert code == 0, err
    return cli


def test_search_explain_prints_each_hits_steps_under_it(noted: Run) -> None:
    code, plain, _ = noted("search", "green tea")
    assert code == 0
    code, explained, _ = noted("search", "green tea", "--explain")
    assert code == 0
    lines = explained.splitlines()
    steps = [line.strip() for line in lines if line.strip().startswith("steps: ")]
    assert len(steps) == 3  # three notes hold the words
    assert all(s.startswith(f"steps: {WORDS} +") for s in steps)
    # Without --explain the output is what it was: the same lines, less the steps.
    assert [line for line in lines if not line.strip().startswith("steps: ")] == (
        plain.splitlines()
    )
    assert "steps:" not in plain


def test_search_explain_json_adds_the_steps_that_make_each_score(noted: Run) -> None:
    hits = noted.json("search", "green tea", "--explain")
    assert hits and all(h["steps"] for h in hits)
    names = [WORDS, *(s.name for s in RANK_STEPS)]
    for hit in hits:
        made = [s["step"] for s in hit["steps"]]
        assert made == sorted(made, key=names.index)  # in the order the steps ran
        assert replay(hit["steps"]) == pytest.approx(hit["score"], abs=1e-3)
    assert all("steps" not in h for h in noted.json("search", "green tea"))
