"""Long-term memory, MEMORY.md: its format (parser, renderer), the pure rules (scoring,
merge, matching, decay, entities, the prompt block), the store and the staged captures
that write it, the forgotten file, and `LongTermMemory` over them."""
