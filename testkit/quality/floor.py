"""The plain-BM25 floor: what textbook BM25 finds over exactly the chunks chatmem stored.

chatmem's ranking must never lose to the simplest thing a reader could build from the
same stored turns (issue 35): jieba's precise mode (`jieba.lcut`), lower-cased,
punctuation dropped, the Chinese and English stopword lists, and the testkit's reference
Okapi scorer (k1 1.2, b 0.75) over every chunk the scope holds (turns, archived turns,
long-term entries, notes; not the hidden daily summaries a monthly one replaces). The
question is tokenized the same way and the top k chunks are returned as hits anchored on
themselves, so each harness counts them exactly as it counts the product's.

Nothing here uses chatmem's tokenizer or ranking: the floor reads the stored rows and
the stopword files, and nothing more.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from memory_core.base.chunks import ChunkKind
from memory_core.base.records import Hit
from memory_core.base.scope import ScopeKey
from memory_core.engine import MemoryCore
from testkit.reference_bm25 import ReferenceBM25

K1 = 1.2
B = 0.75
STOPWORDS = Path(__file__).resolve().parents[2] / "memory_core" / "base" / "data"
_PREFIX = re.compile(r"^\d{2}:\d{2}(?::\d{2})? ")
"""An archived turn's 'HH:MM:SS ' before its speaker: the time is no word of the turn."""


@cache
def stopwords() -> frozenset[str]:
    """Chinese + English stopwords, one a line ('#' comments)."""
    words: set[str] = set()
    for name in ("stopwords_zh.txt", "stopwords_en.txt"):
        for line in (STOPWORDS / name).read_text(encoding="utf-8").splitlines():
            word = line.split("#", 1)[0].strip().lower()
            if word:
                words.add(word)
    return frozenset(words)


@cache
def _jieba() -> Any:
    import jieba  # the bench extra: imported only when the floor runs

    jieba.setLogLevel(logging.WARNING)
    return jieba


def tokenize(text: str) -> list[str]:
    """jieba precise-mode words, lower-cased, without punctuation, spaces or stopwords."""
    stop = stopwords()
    words = (w.strip().lower() for w in _jieba().lcut(text))
    return [w for w in words if w and any(c.isalnum() for c in w) and w not in stop]


def top(scores: Sequence[float], k: int) -> list[int]:
    """Indexes of the k best scores, best first; a zero (no query term) is never ranked,
    ties keep stored order."""
    return sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], i))[:k]


def rank(documents: Sequence[Sequence[str]], query: Sequence[str], k: int) -> list[int]:
    """Indexes of the k best documents for the query by reference BM25, best first."""
    if not documents or not query or k <= 0:
        return []
    scorer = ReferenceBM25([list(d) for d in documents], k1=K1, b=B)
    return top(list(scorer.get_scores(list(query))), k)


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """One row of the index, as much of it as a hit needs."""

    path: str
    line_from: int
    line_to: int
    kind: ChunkKind
    created_at: datetime | None
    ref: str | None
    text: str

    def words(self) -> str:
        """The text without an archived turn's time prefix."""
        return _PREFIX.sub("", self.text, count=1)

    def hit(self, score: float) -> Hit:
        return Hit(
            path=self.path,
            line_from=self.line_from,
            line_to=self.line_to,
            score=score,
            text=self.text,
            kind=self.kind,
            created_at=self.created_at,
            ref=self.ref,
        )


_ROWS = """
    SELECT c.path, c.line_from, c.line_to, c.kind, c.created_at, c.ref, c.text
    FROM chunks c JOIN scopes s ON s.id = c.scope_id
    WHERE s.key = ? AND c.hidden = 0
    ORDER BY c.id
"""


async def stored_chunks(core: MemoryCore, scope: ScopeKey) -> list[StoredChunk]:
    """Every chunk the scope's index holds now (SQLite workspace database)."""

    def read(conn: Any) -> list[tuple[Any, ...]]:
        return list(conn.execute(_ROWS, (scope.value,)).fetchall())

    rows = await core.database.read(read)
    return [
        StoredChunk(
            path=str(path),
            line_from=int(first),
            line_to=int(last),
            kind=ChunkKind(kind),
            created_at=datetime.fromisoformat(at) if at else None,
            ref=ref,
            text=str(text),
        )
        for path, first, last, kind, at, ref, text in rows
    ]


class Floor:
    """A scope's stored chunks, tokenized once, ranked per question."""

    def __init__(self, chunks: Sequence[StoredChunk]) -> None:
        self.chunks = list(chunks)
        self.documents = [tokenize(c.words()) for c in self.chunks]
        self._scorer = (
            ReferenceBM25([list(d) for d in self.documents], k1=K1, b=B) if self.documents else None
        )

    @classmethod
    async def of(cls, core: MemoryCore, scope: ScopeKey) -> Floor:
        return cls(await stored_chunks(core, scope))

    def search(self, question: str, limit: int = 10) -> list[Hit]:
        query = tokenize(question)
        if self._scorer is None or not query:
            return []
        scores = [float(s) for s in self._scorer.get_scores(query)]
        return [self.chunks[i].hit(scores[i]) for i in top(scores, limit)]
