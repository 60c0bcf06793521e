"""Benchmark figures recorded in `bench/RESULTS.md`, one section per bench: what a bench
run with `--record` prints replaces its section, with the revision, the date, the load
average at its start and end and the revisions it compared with (testkit/bench_results.py,
where tests reach it).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # testkit/ is dev-only: found beside bench/, not installed

from testkit.bench_results import (  # noqa: E402
    RESULTS,
    Conditions,
    add_record_flag,
    begin_marker,
    compared_revisions,
    end_marker,
    record,
    recorded,
    recorded_main,
    replace_section,
    revision,
    section,
)

__all__ = [
    "RESULTS",
    "Conditions",
    "add_record_flag",
    "begin_marker",
    "compared_revisions",
    "end_marker",
    "record",
    "recorded",
    "recorded_main",
    "replace_section",
    "revision",
    "section",
]
