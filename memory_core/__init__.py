"""chatmem's memory core: scoped, scored, file-backed long-term memory for chat bots.

The core never imports a front end (Telegram, DingTalk, Textual); front ends import it,
and only the modules of `PUBLIC_API`.
"""

__version__ = "0.1.0"

PUBLIC_API = frozenset(
    {
        # the facade
        "memory_core.engine",
        "memory_core.config",
        "memory_core.config.services",
        "memory_core.config.fields",  # a front end's own settings section (adapters/settings.py)
        "memory_core.base.errors",
        "memory_core.llm.client",
        # values it takes and returns
        "memory_core.base.records",
        "memory_core.base.scope",
        "memory_core.base.entries",
        "memory_core.base.chunks",
        "memory_core.recall.chunking",
        "memory_core.recall.request",  # a search's options (SearchRequest)
        "memory_core.base.clock",
        "memory_core.base.workspace",
        "memory_core.notes.event_log",
        "memory_core.snapshot.builder",
        "memory_core.longterm.entities",
        "memory_core.consolidation.phases",
        "memory_core.consolidation.phase_names",
        "memory_core.base.inputs",
        "memory_core.base.meter",
        "memory_core.base.retry",  # the one retry schedule (adapters/webhook's replies)
        "memory_core.health",
        # pure rules a front end shows or previews
        "memory_core.base.policy",
        "memory_core.longterm.scoring",
        "memory_core.longterm.merge",
        "memory_core.longterm.claims",
        "memory_core.base.merge_values",
        "memory_core.recall.injection",
        "memory_core.recall.index.steps",  # the ranking's steps, named by --explain and the TUI
        "memory_core.base.text",
        "memory_core.base.wording",
        # what an operator asks (`chatmem --version`, `chatmem doctor`)
        "memory_core.ops",
        "memory_core.ops.versions",
        "memory_core.ops.report",
        "memory_core.ops.checks",
        "memory_core.ops.database",
        "memory_core.storage.dialects",  # whether a configured backend is a server
        "memory_core.ops.live",
    }
)
"""The modules front ends (adapters/, tui/, scripts/) may import. Everything else (table
owners, the index, the memory and conversation layers) is reached through `MemoryCore`."""
