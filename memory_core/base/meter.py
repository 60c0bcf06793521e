"""What the core tells a metrics exporter about its work, at its edges.

One `Meter` per core (`MemoryCore.open(meter=...)`), called where the work is done once
for everyone: a chat turn (conversation runtime), a search and a recall (`Finder`), a
model call (`LLMClient`), a capture (`LongTermMemory.capture`), a consolidation run, an
index rebuild (the facade). The base class records nothing: a core without metrics pays
one method call. A front end subclasses it (adapters/metrics.py: Prometheus).

The hooks take only numbers and fixed words (`Outcome`, `CAPTURE_ACTIONS`), never a scope
or a text, so nothing a person said or who said it can reach a metric's labels.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

Outcome = Literal["ok", "error"]
CaptureAction = Literal["new", "updated", "reinforced"]
CAPTURE_ACTIONS: tuple[CaptureAction, ...] = ("new", "updated", "reinforced")
"""How a capture was kept (`merge_values.Kept`: saved is "new")."""


class Meter:
    """Does nothing; a subclass records (its methods are called on the event loop and
    must not block)."""

    def __init__(self, monotonic: Callable[[], float] = time.perf_counter) -> None:
        self.monotonic = monotonic

    def turn(self, seconds: float, outcome: Outcome) -> None:
        """One chat turn answered (or failed)."""

    def recall(self, seconds: float, hits: int) -> None:
        """One recall for a prompt and the hits it put in the block."""

    def search(self, seconds: float, hits: int) -> None:
        """One ranked search (a recall's included) and the hits it returned."""

    def llm_call(self, seconds: float, outcome: Outcome) -> None:
        """One chat-completions call to the model."""

    def capture(self, action: CaptureAction) -> None:
        """One memory captured: new, updated an alike one, or reinforced a repeat."""

    def index_rebuild(self) -> None:
        """The search index rebuilt from the files (reindex, purge)."""

    def consolidation(self, outcome: Outcome) -> None:
        """One consolidation run of a scope, whole or failed."""

    @contextmanager
    def timed(self, done: Callable[[float, Outcome], None]) -> Iterator[None]:
        """Time the block and report it to `done(seconds, outcome)`, "error" when it
        raised (the exception goes on)."""
        started = self.monotonic()
        try:
            yield
        except Exception:  # a cancelled call is not an error, nor an answer: not reported
            done(self.monotonic() - started, "error")
            raise
        done(self.monotonic() - started, "ok")


NO_METER = Meter()
"""The default of every part: records nothing."""
