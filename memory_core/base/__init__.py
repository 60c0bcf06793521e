"""The vocabulary and tools every layer shares: scopes, entries and the values a merge
returns, chunks, records, clocks, errors, text, dates, paths, locks, atomic writes, the
scoring policy's numbers. It imports nothing else of the core."""
