"""Start-up time of the `chatmem` command: what a person waits for at every call.

Times `chatmem --help` and `chatmem status` on a small workspace as separate processes
(wall time, so the interpreter's start and every import count), after one warm-up run
each so the file cache is warm. Not a test: figures vary with the machine.

    python bench/cli_bench.py [--runs N] [--tree DIR]

`--tree` runs the code of another checkout (e.g. `git archive` of an older commit
unpacked in DIR) with this environment's packages: how the "before" figures were taken.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def chatmem_command() -> list[str]:
    """The installed console script beside this interpreter, else `python -m adapters.cli`."""
    script = Path(sys.executable).with_name("chatmem")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "adapters.cli"]


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, cwd=cwd, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="timed runs per command")
    parser.add_argument("--tree", type=Path, help="source tree to run instead of this one")
    args = parser.parse_args()

    chatmem = chatmem_command()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATMEM_", "OPENAI_"))}
    if args.tree is not None:
        # PYTHONPATH comes before the editable install's finder.
        env["PYTHONPATH"] = str(args.tree.resolve())
    root = Path(tempfile.mkdtemp(prefix="chatmem-cli-bench-"))
    try:
        ws = str(root / "ws")
        timed([*chatmem, "init", "--workspace", ws], env, root)
        for i in range(20):
            timed([*chatmem, "capture", f"bench memory {i}", "--workspace", ws], env, root)
        commands = {
            "chatmem --help": [*chatmem, "--help"],
            "chatmem status": [*chatmem, "status", "--workspace", ws],
        }
        print(f"{args.runs} runs each, wall time of the whole process ({' '.join(chatmem)})")
        for name, argv in commands.items():
            timed(argv, env, root)  # warm-up
            runs = [timed(argv, env, root) for _ in range(args.runs)]
            print(
                f"  {name:<16} median {1000 * statistics.median(runs):7.1f} ms"
                f"   min {1000 * min(runs):7.1f} ms   max {1000 * max(runs):7.1f} ms"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
