"""The conversation layer: chat turns, memory tools, extraction, prompting, archiving
and schedules. Built from the memory service, the history store, the LLM client and the
config; it never sees `MemoryCore`."""
