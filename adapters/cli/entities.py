"""`chatmem entities`: the people, pets, places, workplaces and projects a scope's memories
name."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from adapters.cli import Output, command
from memory_core.base.wording import counted

if TYPE_CHECKING:
    from memory_core.engine import MemoryCore


@command(
    "entities",
    "list the people, pets, places, workplaces and projects the scope's memories name",
    reads_only=True,
)
class Entities:
    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        found = await core.memories.entities(args.scope_key)
        data = [
            {
                "name": e.name,
                "kind": e.kind.value,
                "aliases": list(e.aliases),
                "relations": list(e.relations),
                "memories": list(e.facts),
            }
            for e in found
        ]
        lines = [f"{counted(len(found), 'entity')} in scope {args.scope_key}"]
        for e in found:
            also = f" (also: {', '.join(e.aliases)})" if e.aliases else ""
            about = f"; {', '.join(e.relations)}" if e.relations else ""
            lines.append(
                f"  {e.name} [{e.kind.value}]{also}{about}: {counted(len(e.facts), 'memory')}"
            )
        Output(args.json).emit(data, "\n".join(lines))
        return 0
