"""Finding what was said: chunks of the files and messages, the per-scope index and its
ranking (`index/`), the file-only fallback, the question's terms and time window,
the injection block, memory_get's reads, and the `Finder` and `IndexGuard` over them."""
