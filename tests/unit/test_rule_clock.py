"""House rules on time: product code reads the time and sleeps only through the injected
clock (memory_core/base/clock.py), and tests wait for a state, never for a length of
time. Each failure names the file and line."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("memory_core", "adapters", "tui")
CLOCK = Path("memory_core/base/clock.py")
"""The one module that reads the system's time and sleeps on it."""
FIXED_ELSEWHERE = {
    # `today or datetime.now()`: the value objects of issue 37 remove these two; the
    # set is emptied once they are merged.
    Path("memory_core/recall/index/search_index.py"),
    Path("memory_core/recall/fallback.py"),
}
WAITING_HELPER = Path("testkit/waiting.py")
"""The one place a test pauses between two looks at a state."""

TIME_READ = re.compile(
    r"\b(?:datetime\.(?:now|utcnow|today)|date\.today|time\.(?:time|time_ns|monotonic))\("
    r"|\b(?:asyncio|time)\.sleep\((?!\s*0\s*\))"
    r"|^\s*from (?:time|asyncio) import .*\b(?:sleep|time|monotonic)\b"
)
"""A read of the system's time, or a sleep other than `sleep(0)` (a yield, not a wait)."""
FIXED_PAUSE = re.compile(r"\btime\.sleep\(\s*[\d.]|\basyncio\.sleep\(\s*(?!0\s*\))[\d.]")
"""A test pausing for a number of seconds: `time.sleep(0.1)`, `asyncio.sleep(0.05)`."""


def python_files(*folders: str) -> list[Path]:
    return sorted(
        path.relative_to(ROOT) for folder in folders for path in (ROOT / folder).rglob("*.py")
    )


def hits(files: list[Path], pattern: re.Pattern[str]) -> list[str]:
    found = []
    for path in files:
        for number, line in enumerate((ROOT / path).read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if pattern.search(code):
                found.append(f"{path}:{number}: {line.strip()}")
    return found


def test_product_code_reads_time_only_through_the_clock() -> None:
    files = [
        path for path in python_files(*PRODUCT) if path != CLOCK and path not in FIXED_ELSEWHERE
    ]
    assert len(files) > 100
    found = hits(files, TIME_READ)
    assert not found, "read the time or sleep through memory_core/base/clock.py:\n" + "\n".join(
        found
    )


def test_tests_wait_for_a_state_not_for_seconds() -> None:
    files = [
        path
        for path in python_files("tests", "testkit")
        if path not in {WAITING_HELPER, Path(__file__).resolve().relative_to(ROOT)}
    ]
    assert len(files) > 100
    found = hits(files, FIXED_PAUSE)
    assert not found, "wait for a state (testkit/waiting.py), not for seconds:\n" + "\n".join(found)


def test_the_rules_see_what_they_forbid() -> None:
    """The patterns catch the forms they are for, and leave a yield alone."""
    for line in (
        "x = datetime.now(UTC)",
        "day = date.today()",
        "t = time.monotonic()",
        "t = time.time()",
        "await asyncio.sleep(wait)",
        "time.sleep(0.5)",
        "from time import monotonic",
        "from asyncio import gather, sleep",
    ):
        assert TIME_READ.search(line), line
    for line in (
        "await asyncio.sleep(0)",
        "time.sleep(0)",
        "monotonic: Monotonic = time.monotonic",
    ):
        assert not TIME_READ.search(line), line
    for line in ("time.sleep(0.02)", "await asyncio.sleep(0.1)", "time.sleep(0.01 * n)"):
        assert FIXED_PAUSE.search(line), line
    for line in ("await asyncio.sleep(0)", "await asyncio.sleep(self.delay)"):
        assert not FIXED_PAUSE.search(line), line
