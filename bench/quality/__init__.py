"""The recall quality harness (`bench/recall_quality.py`): labelled sets, MADial-Bench and
the published MADial-Bench baselines, scored by the same pure functions (`metrics`)."""
