"""bench/results.py: a recorded section says the revision, the date, the load average at
the bench's start and end, and the revisions it compared against."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

import pytest

from testkit import bench_results
from testkit.bench_results import (
    Conditions,
    compared_revisions,
    load_option,
    recorded,
    recorded_main,
    section,
)

ROOT = Path(__file__).resolve().parents[2]


def test_a_section_names_the_load_and_the_compared_revisions() -> None:
    made = section(
        "cli_bench",
        "figures\n",
        "abc1234",
        dt.date(2026, 11, 29),
        Conditions(1.5, 6.25, 2, ("b42d7a9 (b42d7a9f...)",)),
    )
    lines = made.splitlines()
    assert lines[0] == "<!-- results:cli_bench -->" and lines[-1] == "<!-- /results:cli_bench -->"
    assert lines[3] == (
        "Recorded by `python bench/cli_bench.py --record` at abc1234, 2026-11-29."
        " Load average 1.50 at the start, 6.25 at the end (2 cores)."
        " Compared with b42d7a9 (b42d7a9f...)."
    )
    assert "```\nfigures\n```" in made


def test_the_compare_arguments_are_resolved_to_commits() -> None:
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    found = compared_revisions(["--runs", "3", "--compare", "HEAD", "--compare=HEAD", "--x"])
    assert found == (f"HEAD ({head})",)  # once, though given twice
    assert compared_revisions(["--compare", head[:7]]) == (head,)
    assert compared_revisions(["--compare", "/some/dir"]) == ("/some/dir",)
    assert compared_revisions(["--quick"]) == ()


def test_a_recorded_run_writes_its_section_with_the_conditions(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text(
        "# Benchmark results\n\n<!-- results:other -->\nkept\n<!-- /results:other -->\n"
    )
    with recorded("tiny_bench", True, ("b42d7a9",), path=results):
        print("figure 1")
    text = results.read_text()
    assert "<!-- results:other -->\nkept\n<!-- /results:other -->" in text
    assert "Load average " in text and "Compared with b42d7a9." in text
    assert "```\nfigure 1\n```" in text


def test_a_run_under_added_load_is_recorded_beside_the_quiet_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--load N` figures go to a section of their own (`NAME-loadN`, with the command
    that made them): recording them keeps the quiet figures the issue asks for too."""
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n")
    monkeypatch.setattr(bench_results, "RESULTS", results)
    for argv, figure in ((["--runs", "2"], "quiet"), (["--load", "5", "--runs", "2"], "loaded")):
        monkeypatch.setattr(sys, "argv", ["tiny_bench.py", *argv, "--record"])
        with recorded_main("tiny_bench"):
            print(figure)
    text = results.read_text()
    assert "<!-- results:tiny_bench -->" in text and "```\nquiet\n```" in text
    assert "<!-- results:tiny_bench-load5 -->" in text and "```\nloaded\n```" in text
    assert "Recorded by `python bench/tiny_bench.py --load 5 --record`" in text
    assert load_option(["--load=3"]) == 3 and load_option(["--load", "0"]) == 0
