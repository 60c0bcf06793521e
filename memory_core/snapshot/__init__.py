"""Layer 1: each scope's SNAPSHOT.md, built by pure rules (`builder.py`) from the
long-term entries, the archive's summaries and the event log, and written atomically
(`snapshots.py`)."""
