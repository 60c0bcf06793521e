"""The consolidation phases by name, in the order a run takes them.

Apart from their rules (phases.py, which re-exports them) so a front end can offer them
(`chatmem consolidate --phase NAME`) without importing the rules and what they need: the
command line's parser is built for `chatmem --help` too, which must answer at once.
"""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    DECAY = "decay"
    FILTER = "filter"
    EXTRACT = "extract"
    VERIFY = "verify"
    SUMMARIZE = "summarize"
    SNAPSHOT = "snapshot"


PHASES: tuple[Phase, ...] = tuple(Phase)
