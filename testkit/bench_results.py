"""Benchmark figures recorded in `bench/RESULTS.md`, one section per bench (bench/results.py
re-exports this for the benches; here so tests load it).

The figures a reader is shown live in one file that the benches write themselves, so a
number in the docs is never typed by hand and always says which revision printed it. A
bench run with `--record` prints as usual and, at the end, replaces its own section of
RESULTS.md (between `<!-- results:NAME -->` and `<!-- /results:NAME -->`) with what it
printed, the revision (`git describe`), the date, the load average when it started and
when it ended (figures on a busy machine are read differently), and the revisions it
compared against (its `--compare` arguments, resolved to commits). Other sections are
left as they are.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

RESULTS = Path(__file__).resolve().parent.parent / "bench" / "RESULTS.md"


def begin_marker(name: str) -> str:
    return f"<!-- results:{name} -->"


def end_marker(name: str) -> str:
    return f"<!-- /results:{name} -->"


def revision(root: Path | None = None) -> str:
    """`git describe --always --dirty` of the tree the bench ran from, or "unknown"."""
    where = root or RESULTS.parent.parent
    try:
        done = subprocess.run(
            ["git", "-C", str(where), "describe", "--always", "--dirty", "--tags"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


@dataclass(frozen=True)
class Conditions:
    """What a reader needs beside the figures: the machine's load average (1 min) when
    the bench started and ended, its cores, and the revisions compared against."""

    load_start: float
    load_end: float
    cores: int
    compared: tuple[str, ...] = ()

    def line(self) -> str:
        text = (
            f" Load average {self.load_start:.2f} at the start, {self.load_end:.2f} at the"
            f" end ({self.cores} cores)."
        )
        if self.compared:
            text += f" Compared with {', '.join(self.compared)}."
        return text


def section(
    name: str,
    figures: str,
    rev: str,
    when: dt.date,
    conditions: Conditions | None = None,
    command: str | None = None,
) -> str:
    """The whole marked section for `name`: heading, provenance line (`command`, by
    default the bench's own with `--record`), figures verbatim."""
    body = figures.strip("\n")
    extra = conditions.line() if conditions else ""
    command = command or f"python bench/{name}.py --record"
    return (
        f"{begin_marker(name)}\n"
        f"## {name}\n\n"
        f"Recorded by `{command}` at {rev}, {when.isoformat()}.{extra}\n\n"
        f"```\n{body}\n```\n"
        f"{end_marker(name)}"
    )


def compared_revisions(argv: Sequence[str], root: Path | None = None) -> tuple[str, ...]:
    """The `--compare` arguments of a bench's command line, each as `REV (commit)` when
    git knows it (a directory or an unknown name is kept as given)."""
    found: list[str] = []
    for i, arg in enumerate(argv):
        if arg == "--compare" and i + 1 < len(argv):
            found.append(argv[i + 1])
        elif arg.startswith("--compare="):
            found.append(arg.split("=", 1)[1])
    return tuple(_described(rev, root) for rev in dict.fromkeys(found))


def _described(rev: str, root: Path | None) -> str:
    where = root or RESULTS.parent.parent
    try:
        done = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "--short=12", "--verify", f"{rev}^{{commit}}"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return rev
    short = done.stdout.strip()
    if done.returncode != 0 or not short:
        return rev
    return short if short.startswith(rev) else f"{rev} ({short})"


def load_average() -> float:
    return os.getloadavg()[0]


def replace_section(text: str, name: str, new_section: str) -> str:
    """`text` with the section of `name` replaced by `new_section` (appended when absent).

    Pure, so the rule is tested without a bench run; a begin marker without its end is
    refused rather than guessed at, since everything after it would be lost."""
    begin, end = begin_marker(name), end_marker(name)
    start = text.find(begin)
    if start < 0:
        return text.rstrip("\n") + "\n\n" + new_section + "\n"
    stop = text.find(end, start)
    if stop < 0:
        raise ValueError(f"{RESULTS.name}: {begin} has no {end}")
    return text[:start] + new_section + text[stop + len(end) :]


def record(
    name: str,
    figures: str,
    path: Path | None = None,
    rev: str | None = None,
    conditions: Conditions | None = None,
    command: str | None = None,
) -> None:
    """Write `figures` as bench `name`'s section of `path` (RESULTS.md by default)."""
    path = path or RESULTS
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    made = section(name, figures, rev or revision(), dt.date.today(), conditions, command)
    path.write_text(replace_section(old, name, made), encoding="utf-8")


def add_record_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--record",
        action="store_true",
        help="also write what is printed into bench/RESULTS.md (this bench's section)",
    )


class _Tee(io.TextIOBase):
    """Writes to the terminal and keeps a copy; progress goes on showing as it happens."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.kept = io.StringIO()

    def write(self, text: str) -> int:
        self.out.write(text)
        return self.kept.write(text)

    def flush(self) -> None:
        self.out.flush()


@contextlib.contextmanager
def recorded(
    name: str,
    enabled: bool,
    compared: Sequence[str] = (),
    path: Path | None = None,
    command: str | None = None,
) -> Iterator[None]:
    """Around a bench's run: with `enabled`, what it prints is recorded once it ends well,
    with the load average at its start and end and the revisions it `compared` with."""
    if not enabled:
        yield
        return
    start = load_average()
    rev = revision()  # the tree as the run began: what it installed and measured
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield
    conditions = Conditions(start, load_average(), os.cpu_count() or 1, tuple(compared))
    record(name, tee.kept.getvalue(), path=path, rev=rev, conditions=conditions, command=command)
    print(f"recorded in {path or RESULTS}", file=sys.stderr)


def recorded_main(name: str) -> contextlib.AbstractContextManager[None]:
    """`recorded` for a bench's `__main__` block: on when its command line has `--record`,
    which is taken out of `sys.argv` before the bench parses it, so a bench needs no edit
    of its own parser (one that declares it through `add_record_flag` keeps working)."""
    enabled = "--record" in sys.argv[1:]
    if enabled and not _declares_record():
        sys.argv[1:] = [arg for arg in sys.argv[1:] if arg != "--record"]
    compared = compared_revisions(sys.argv[1:]) if enabled else ()
    load = load_option(sys.argv[1:])
    if not load:
        return recorded(name, enabled, compared)
    # Figures under added load are a section of their own: the quiet ones stay.
    command = f"python bench/{name}.py --load {load} --record"
    return recorded(f"{name}-load{load}", enabled, compared, command=command)


def load_option(argv: Sequence[str]) -> int:
    """The `--load N` of a bench's command line (`bench/load.py`), 0 without one."""
    for i, arg in enumerate(argv):
        value = argv[i + 1] if arg == "--load" and i + 1 < len(argv) else None
        if arg.startswith("--load="):
            value = arg.split("=", 1)[1]
        if value is not None and value.isdigit():
            return int(value)
    return 0


def _declares_record() -> bool:
    main = sys.modules.get("__main__")
    source = getattr(main, "__file__", None)
    if source is None:
        return False
    return "add_record_flag(" in Path(source).read_text(encoding="utf-8")
