"""Load beside a bench: N CPU-bound processes, so figures can be given at a stated load.

The issue asks for every target at load <= 3 (nothing added: `--load 0`) and at load ~6
(`--load 2` on a machine already at ~4; `--load 5` on a quiet 2-core one). The processes
are `testkit/burners.py`'s (each in a session of its own; tests reach them there). Benches
print `load_now()` at their start and end, so every figure is read beside the load it had.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # testkit/ is dev-only: found beside bench/, not installed

from testkit.burners import SETTLE_SECONDS, burners, settled  # noqa: E402

__all__ = ["SETTLE_SECONDS", "add_load_argument", "burners", "load_now", "settled"]


def load_now() -> str:
    """The three load averages and the core count, as a bench prints them."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def add_load_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--load",
        type=int,
        default=0,
        metavar="N",
        help="run N CPU-bound processes beside the bench (default 0: none; 5 for the "
        "issue's 'load ~6' on a quiet 2-core machine)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=SETTLE_SECONDS,
        metavar="S",
        help="with --load, wait at most S seconds for the 1-minute load average to rise "
        f"(default {SETTLE_SECONDS:.0f})",
    )
