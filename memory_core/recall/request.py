"""One search's question and options, as one value: `SearchRequest`.

Every searcher takes it unchanged (`Finder.search`, `SearchIndex.search` behind
`IndexBackend.search`, and `fallback.search_files` when the index cannot be used), so an
option is written here once and reaches each of them, instead of a long keyword list
copied into four signatures that had to be kept alike by hand. Pure, and in the recall
layer because a query may be a ready `Query`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from memory_core.base.chunks import ChunkKind
from memory_core.recall.query import Query

QueryInput = str | Sequence[str] | Query
"""Text (read as a question), pre-made terms (weight 1 each), or a built `Query`."""


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """What to find in a scope, and how many; the scope itself is the searcher's other
    argument (it decides where, this what)."""

    query: QueryInput
    limit: int = 10
    kinds: Sequence[ChunkKind | str] | None = None
    """Only these kinds of chunk (None: every kind; empty: nothing matches)."""
    since: datetime | None = None
    """A hard filter: chunks created at or after it (an undated chunk is left out)."""
    until: datetime | None = None
    """A hard filter: chunks created before it."""
    min_score: float = 0.0
    """Weak matches left out: a recall's floor (explicit searches show every match)."""
    exclude_paths: Sequence[str] = ()
    """Whole files or sessions left out (a recall's own session, already in the prompt)."""
    today: date | None = None
    """The day the question is asked on, in the memory's zone ("last week" counts back
    from it); None: the day of the searcher's injected clock."""

    def __post_init__(self) -> None:
        # Kept as tuples: an iterator given here would be used up by its first reader.
        if self.kinds is not None and not isinstance(self.kinds, tuple):
            object.__setattr__(self, "kinds", tuple(self.kinds))
        if not isinstance(self.exclude_paths, tuple):
            object.__setattr__(self, "exclude_paths", tuple(self.exclude_paths))

    @classmethod
    def of(cls, asked: SearchRequest | QueryInput) -> SearchRequest:
        """`asked` itself, or a plain query with every option at its default."""
        return asked if isinstance(asked, SearchRequest) else cls(asked)
