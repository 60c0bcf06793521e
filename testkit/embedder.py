"""A deterministic embedder without a model: texts meaning the same thing point the same
way because a small table says so.

Each word (a latin word lowercased, each Han character alone) that the table knows adds
one to its concept's slot; other words are ignored, so a text with no known word is the
zero vector (similar to nothing). "where do I live" and "我住在杭州" share the concept
`home` and nothing else, so only vectors can bring them together: a test can tell whether
the ranking used vectors, and which text is nearest, by reading the table.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from memory_core.embedding.base import normalised

CONCEPTS: Mapping[str, str] = {
    "live": "home",
    "lives": "home",
    "home": "home",
    "flat": "home",
    "住": "home",
    "家": "home",
    "hangzhou": "hangzhou",
    "杭": "hangzhou",
    "server": "server",
    "box": "server",
    "machine": "server",
    "服": "server",
    "job": "work",
    "work": "work",
    "engineer": "work",
    "工": "work",
}
_WORD = re.compile(r"[^\W\d_]+|\d+")
_HAN = re.compile(r"[\u3400-\u9fff]")


def concept_vector(text: str, concepts: Mapping[str, str] = CONCEPTS) -> list[float]:
    """Counts of the text's known concepts, one slot per concept, unnormalised."""
    slots = sorted(set(concepts.values()))
    vec = [0.0] * len(slots)
    words = [w.lower() for w in _WORD.findall(text) if not _HAN.search(w)]
    words += _HAN.findall(text)
    for word in words:
        concept = concepts.get(word)
        if concept is not None:
            vec[slots.index(concept)] += 1.0
    return vec


class ConceptEmbedder:
    """An `Embedder` over `CONCEPTS`. `delay` is how long embedding chunks takes (a model
    is not instant, and a search must wait for it); queries take no time."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.embedded: list[str] = []
        """Every chunk text embedded, in order (queries not included)."""

    @property
    def name(self) -> str:
        return "fake:concepts"

    @property
    def dim(self) -> int:
        return len(set(CONCEPTS.values()))

    async def embed(self, texts: Sequence[str], *, query: bool = False) -> npt.NDArray[np.float32]:
        if not query:
            await asyncio.sleep(self.delay)
            self.embedded.extend(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalised([concept_vector(text) for text in texts])

    async def close(self) -> None:
        return None
