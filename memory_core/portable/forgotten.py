"""A scope's forgotten entries (kept for `chatmem restore ID`), out as records and in again.

Exported: the entries the scope's forgotten file still keeps (not past
`long_term.forgotten_keep_days`), with all their metadata; `scored_at` is when each was
forgotten, so the days it has left travel with it. Imported: into the scope's forgotten
file through its keeper (under the scope's `forgotten` lock), where `restore` finds it.
An entry whose text the scope keeps forgotten or holds live already is present; one
past its days by now is not written and counted as expired; one whose id the scope uses
for another text gets an id made from both, as a live entry would.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from memory_core.base.scope import ScopeKey
from memory_core.portable.foreign import Placement, place
from memory_core.portable.records import Record, entry_data, entry_from

if TYPE_CHECKING:
    from memory_core.longterm.long_term import LongTermMemory


async def forgotten_records(memories: LongTermMemory, scope: ScopeKey) -> list[Record]:
    kept = await memories.kept.live(scope, memories.now())
    return [Record("forgotten", scope, {"entry": entry_data(e)}) for e in reversed(kept)]


async def import_forgotten(
    memories: LongTermMemory, scope: ScopeKey, records: Sequence[Record], now: datetime
) -> Placement:
    """Keep the records' entries in the scope's forgotten file, as the module says."""
    if not records:
        return Placement()
    incoming = [entry_from(r.data["entry"]) for r in records]
    kept = await memories.kept.live(scope, now)
    live = (await memories.load(scope)).entries
    file = memories.kept.file
    # Under an id neither a kept nor a live entry holds.
    placement = place((*kept, *live), incoming, lambda e: file.expired(e, now))
    if placement.added:
        await memories.kept.keep(scope, placement.added)
    return placement
