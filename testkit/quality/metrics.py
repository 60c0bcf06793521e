"""Pure scoring of ranked hits: which labelled items each hit finds, and the metrics.

A question has a set of wanted items (evidence turns, or relevant memory ids); a ranked
list of hits is first turned into `found`: for each rank, the set of wanted items that
hit finds. Every metric is computed from `found` and the number of wanted items, so the
labelled sets, MADial-Bench and the published baselines are scored by the same code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

Found = Sequence[frozenset[int]]
"""For each rank (best first), the indexes of the wanted items that hit finds."""

MIN_FRAGMENT = 20
"""A hit shorter than this is not taken for a fragment of a turn: short text ("ok",
"yes, Friday") occurs inside many turns."""

_SPACE = re.compile(r"\s+")
_PREFIX = re.compile(r"^(?:\d{2}:\d{2}(?::\d{2})? )?[^:\n]{1,64}: ")
"""'Maya: …' (a session message) or '18:52:00 Maya: …' (an archived raw turn)."""
_BULLET = re.compile(r"^[-*] ")
"""'- …': a line of an extractive summary (the user's own line, shortened)."""


def collapse(text: str) -> str:
    """Whitespace collapsed, as archive files store a turn."""
    return _SPACE.sub(" ", text).strip()


def hit_lines(text: str) -> list[str]:
    """The lines of a hit, each without its speaker (and time) prefix or bullet.

    A hit is often an exchange of two or three turns, one per line, each written with
    its speaker; the turn's own text is what a label can be compared with.
    """
    lines = []
    for raw in text.splitlines():
        line = collapse(raw)
        if not line:
            continue
        line = _BULLET.sub("", line)
        line = _PREFIX.sub("", line, count=1)
        lines.append(line)
    return lines


def finds(turn: str, hit_text: str) -> bool:
    """Whether a hit shows an evidence turn: the whole turn is inside the hit, or a line
    of the hit (at least `MIN_FRAGMENT` characters) is inside the turn (a long turn is
    cut into several chunks, or a summary keeps only its start)."""
    wanted = collapse(turn)
    if not wanted:
        return False
    lines = hit_lines(hit_text)
    if any(wanted in line for line in lines) or wanted in " ".join(lines):
        return True
    return any(len(line) >= MIN_FRAGMENT and line in wanted for line in lines)


def found_turns(turns: Sequence[str], hits: Iterable[str]) -> list[frozenset[int]]:
    """`found` of a question whose wanted items are turn texts."""
    return [frozenset(i for i, turn in enumerate(turns) if finds(turn, hit)) for hit in hits]


def found_ids(relevant: Iterable[object], ranked: Iterable[object]) -> list[frozenset[int]]:
    """`found` of a question whose wanted items are ids (MADial-Bench memories); an id
    ranked twice counts once, at its better rank."""
    index = {item: i for i, item in enumerate(dict.fromkeys(relevant))}
    seen: set[object] = set()
    out = []
    for item in ranked:
        hit = item in index and item not in seen
        seen.add(item)
        out.append(frozenset({index[item]}) if hit else frozenset())
    return out


def frac_at(found: Found, wanted: int, k: int) -> float:
    """Share of the wanted items found by the top k."""
    if wanted <= 0:
        return 0.0
    got: set[int] = set()
    for items in found[:k]:
        got |= items
    return len(got) / wanted


def recall_at(found: Found, k: int) -> float:
    """1 when the top k find at least one wanted item."""
    return 1.0 if any(found[:k]) else 0.0


def ndcg_at(found: Found, wanted: int, k: int) -> float:
    """Binary gains: a hit is relevant when it finds a wanted item no better hit found;
    the ideal ranking puts min(k, wanted) relevant hits first."""
    if wanted <= 0:
        return 0.0
    got: set[int] = set()
    dcg = 0.0
    for rank, items in enumerate(found[:k]):
        if items - got:
            dcg += 1.0 / math.log2(rank + 2)
        got |= items
    ideal = sum(1.0 / math.log2(rank + 2) for rank in range(min(k, wanted)))
    return dcg / ideal


@dataclass(frozen=True, slots=True)
class Scores:
    """One question's scores (each 0..1)."""

    recall5: float
    ndcg5: float
    frac5: float
    frac10: float
    shown5: float
    """Share of the wanted items shown anywhere in the first 5 hits' text (a turn beside
    the one a hit ranks counts here, never in frac@k): a diagnostic."""


def score(found: Found, wanted: int, shown: Found | None = None) -> Scores:
    """`found` holds what each hit is anchored on; `shown` what each hit displays
    (`found` when they are the same thing, as for memory ids)."""
    return Scores(
        recall5=recall_at(found, 5),
        ndcg5=ndcg_at(found, wanted, 5),
        frac5=frac_at(found, wanted, 5),
        frac10=frac_at(found, wanted, 10),
        shown5=frac_at(found if shown is None else shown, wanted, 5),
    )


@dataclass(frozen=True, slots=True)
class Summary:
    n: int
    recall5: float
    ndcg5: float
    frac5: float
    frac10: float
    shown5: float


def summarise(scores: Sequence[Scores]) -> Summary:
    """Means over questions (0 for none)."""
    n = len(scores)

    def mean(get: Callable[[Scores], float]) -> float:
        return sum(get(s) for s in scores) / n if n else 0.0

    return Summary(
        n=n,
        recall5=mean(lambda s: s.recall5),
        ndcg5=mean(lambda s: s.ndcg5),
        frac5=mean(lambda s: s.frac5),
        frac10=mean(lambda s: s.frac10),
        shown5=mean(lambda s: s.shown5),
    )
