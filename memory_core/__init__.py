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
        "memory_core.settings_services",
        "memory_core.errors",
        "memory_core.llm",
        # values it takes and returns
        "memory_core.records",
        "memory_core.scope",
        "memory_core.entries",
        "memory_core.chunking",
        "memory_core.clock",
        "memory_core.workspace",
        "memory_core.event_log",
        "memory_core.snapshot",
        "memory_core.entities",
        "memory_core.consolidation",
        "memory_core.inputs",
        # pure rules a front end shows or previews
        "memory_core.scoring",
        "memory_core.merge",
        "memory_core.merge_values",
        "memory_core.recall",
        "memory_core.text",
        "memory_core.wording",
    }
)
"""The modules front ends (adapters/, tui/, scripts/) may import. Everything else (table
owners, the index, the memory and conversation layers) is reached through `MemoryCore`."""
