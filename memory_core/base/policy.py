"""The scoring policy: the numbers of a memory's lifecycle
(docs/decisions/0006-scoring-and-decay.md).

Settings, not rules: the `[scoring]` section takes its defaults from `DEFAULT_POLICY`,
and the pure rules (`longterm/scoring.py`) take a policy. Kept apart from those rules so
that the configuration, which every layer reads, depends on no layer above it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

from memory_core.base.entries import MemoryClass, MemoryEntry, class_of

CLASS_DECAY: dict[str, float] = {
    MemoryClass.FACT: 0.008,
    MemoryClass.BELIEF: 0.07,
    MemoryClass.SUMMARY: 0.025,
    MemoryClass.EVENT: 0.15,
}
"""The per-class daily decay constants: a day multiplies the score by exp(-lambda)."""


class DecayMode(StrEnum):
    CLASS = "class"
    """Each memory class at its own rate."""
    FLAT = "flat"
    """Every entry at `daily_decay`."""


@dataclass(frozen=True, slots=True)
class ScoringPolicy:
    """The numbers of the lifecycle; the defaults are written only here: the
    `[scoring]` section (config/memory.py) takes its defaults from these."""

    reinforce_rate: float = 0.2
    contradict_factor: float = 0.5
    daily_decay: float = 0.99
    grace_days: int = 7
    archive_below: float = 0.2
    forget_below: float = 0.05
    category_decay: dict[str, float] = field(default_factory=dict)
    """Per-category daily factor, for entries whose class comes from their category."""
    decay: str = DecayMode.CLASS
    class_decay: dict[str, float] = field(default_factory=lambda: dict(CLASS_DECAY))
    """Per-class lambda (`exp(-lambda)` a day) in the "class" mode."""
    belief_contradict_factor: float = 0.5
    """A contradicted belief's confidence is multiplied by this."""
    _factors: dict[str, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "_factors", {name: math.exp(-rate) for name, rate in self.class_decay.items()}
        )

    def daily_factor(self, entry: MemoryEntry) -> float:
        """What one day of decay multiplies this entry's score by."""
        if entry.memory_class is None:
            override = self.category_decay.get(entry.category)
            if override is not None:
                return override
        if self.decay == DecayMode.FLAT:
            return self.daily_decay
        return self._factors[class_of(entry)]

    def class_factors(self) -> dict[str, float]:
        """Daily factor per class name (empty in the flat mode), for loops that inline
        `daily_factor`."""
        return {} if self.decay == DecayMode.FLAT else dict(self._factors)


DEFAULT_POLICY = ScoringPolicy()
