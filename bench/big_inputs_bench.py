"""Peak memory and time of the largest inputs chatmem accepts, with the vector extra.

Run `python bench/big_inputs_bench.py [--cases capture query chat long-chat]`. Each case
runs in a process of its own on a fresh workspace, warmed up first, then fed the largest
input its entry point accepts (testkit/big_inputs.py, the driver
tests/reliability/test_big_inputs.py runs too). It prints, per case, the process's peak
RSS above its idle peak (`ru_maxrss`), the seconds the input took and how much the
workspace's files grew by it.
docs/recall.md ("Big inputs") states the bound these stay within (≤ 300 MB above idle).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testkit.big_inputs import CASES, measure, sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="*", choices=CASES, default=list(CASES))
    args = parser.parse_args()
    header = f"{'case':<10} {'bytes':>10} {'dense':>6} {'idle MB':>8} {'peak MB':>8}"
    print(f"{header} {'above':>7} {'s':>7} {'grew MB':>8}")
    for case in args.cases:
        r = measure(case, sizes()[case])
        idle, peak = int(str(r["idle_kib"])) / 1024, int(str(r["peak_kib"])) / 1024
        print(
            f"{case:<10} {r['bytes']:>10} {r['dense']!s:>6} {idle:>8.0f} {peak:>8.0f}"
            f" {peak - idle:>7.0f} {r['seconds']:>7} {int(str(r['grew_bytes'])) / 1e6:>8.1f}"
        )


if __name__ == "__main__":
    from results import recorded_main

    with recorded_main("big_inputs_bench"):
        main()
