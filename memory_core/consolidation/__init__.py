"""The consolidation phases: the pure decisions (`phases.py`) and the resumable
run with its per-scope state (`consolidator.py`)."""
