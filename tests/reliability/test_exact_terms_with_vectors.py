"""With vectors on, a question naming an exact term (an id, a made-up word) still finds
the memory that holds it: many captures that read alike, each with a term of its own."""

from __future__ import annotations

import random

import pytest

from memory_core.base.scope import ScopeKey
from memory_core.engine import MemoryCore
from memory_core.recall.request import SearchRequest

pytestmark = pytest.mark.storage

SCOPE = ScopeKey("main")
CAPTURES = 240
TOPICS = [
    "my sister likes hiking in the alps",
    "the car needs new tyres before winter",
    "we watched a film about whales",
    "I should call the dentist on Monday",
    "the garden roses bloomed early",
    "Alice prefers green tea over coffee",
    "the project deadline moved to Friday",
    "we booked a trip to Lisbon",
]


def made_up_terms(count: int) -> list[str]:
    """Distinct words no dictionary holds ('kizaqo') and ids ('mz1y-5921')."""
    rng = random.Random(23)
    terms: set[str] = set()
    while len(terms) < count:
        if len(terms) % 2:
            terms.add("".join(rng.choice("bdfgkmprstvz") + rng.choice("aeiou") for _ in range(3)))
        else:
            terms.add(
                f"{rng.choice('bdfgkm')}{rng.choice('qxz')}{rng.randint(1, 9)}y-{rng.randint(1000, 9999)}"
            )
    return sorted(terms, key=lambda _: rng.random())


@pytest.mark.dense
async def test_every_capture_is_found_by_its_unique_term(core: MemoryCore) -> None:
    """Captures alike but for their topic and their term; each one acknowledged is found by
    "what is the code <term>" among the first 20 hits (the fused ranking once put a capture
    behind chunks that only read alike, and then dropped it as their near-copy)."""
    index = core.guard.index
    assert index is not None and index.vectors is not None, "the local model is installed"
    rng = random.Random(5)
    acknowledged: list[str] = []
    for number, term in enumerate(made_up_terms(CAPTURES)):
        topic, other = rng.sample(TOPICS, 2)
        text = f"Note {number}: the user said that {topic} and {other}; the code is {term}"
        entry, _ = await core.memories.capture(SCOPE, text)
        if term in entry.content:
            acknowledged.append(term)
    assert len(acknowledged) > CAPTURES * 0.9
    await core.memories.flush()
    await core.vectors_ready()
    missed = []
    for term in acknowledged:
        hits = await core.finder.search(SCOPE, SearchRequest(f"what is the code {term}", limit=20))
        if not any(term in hit.text for hit in hits):
            missed.append(term)
    assert not missed, f"{len(missed)} of {len(acknowledged)} captures not found: {missed[:5]}"
