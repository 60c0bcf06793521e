"""The recall quality harness that `bench/recall_quality.py` runs: labelled sets, LoCoMo,
MADial-Bench and the published MADial-Bench baselines, scored by the same pure functions
(`metrics`). Here and not in bench/ because tests/unit/test_recall_quality_metrics.py
checks it, and tests/ never imports bench/."""
