"""The largest inputs chatmem accepts, each in a process of its own, with the vector extra:
the driver tests/reliability/test_big_inputs.py asserts a memory bound on and
bench/big_inputs_bench.py prints the figures of.

Each case runs in a child (`python -m testkit.big_inputs --child CASE ...`) on a fresh
workspace: it opens a core (vectors on when the local model is installed), does one small
capture, search and chat turn (the model loaded, every cache warm: the process's idle
state), then the case's input:

* `capture`: a capture just under `long_term.max_capture_bytes` (4 MiB), written
  through to MEMORY.md and the index, and its vector made;
* `query`: a search and an automatic recall with a 10 MB question (what an MCP
  `memory_search` may send);
* `chat`: the longest chat line a turn takes (`chat.MAX_MESSAGE_CHARS`) through the
  router, as `chatmem chat` hands it on, its vector made;
* `long-chat`: a 10 MB chat line, which is answered with a refusal.

Its report: the process's peak RSS before (`idle_kib`) and after the input
(`ru_maxrss`) and the seconds the input took.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASES = ("capture", "query", "chat", "long-chat")
QUERY_BYTES = 10 * 1024 * 1024
"""A question as large as a client may send (an MCP call, a pasted file)."""


def big_text(size: int) -> str:
    """`size` characters of varied words (ASCII, so as many UTF-8 bytes): a long paste
    with some lines, not one repeated word the tokenizers would make light work of. Made
    from one block repeated, so making it costs the process little beyond the text."""
    words = [f"w{n:x}" for n in range(5000)] + ["tea", "alice", "garden", "project"]
    block = "".join(
        words[(n * 7919) % len(words)] + ("\n" if n % 40 == 39 else " ") for n in range(12000)
    )
    return (block * (size // len(block) + 1))[:size]


def peak_kib() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def workspace_bytes(workspace: Path) -> int:
    """Bytes of every file under the workspace (the database's write-ahead log too):
    what an input costs the disk until the next checkpoint."""
    return sum(p.stat().st_size for p in workspace.rglob("*") if p.is_file())


async def run_case(case: str, workspace: Path, size: int, env: dict[str, str]) -> dict[str, object]:
    """In the child: warm up, note the idle peak, then feed the case's input."""
    from adapters.console import console_message
    from adapters.router import MessageRouter
    from memory_core.base.scope import ScopeKey
    from memory_core.config import load_config
    from memory_core.engine import MemoryCore

    config = load_config(None, env=env, workspace=workspace)
    scope = ScopeKey("main")
    replied = ""
    async with MemoryCore.open(config) as core:
        index = core.guard.index
        dense = index is not None and index.vectors is not None
        router = MessageRouter(core)
        await core.memories.capture(scope, "Alice likes green tea from the garden")
        await core.memories.flush()
        await core.vectors_ready()
        await core.finder.search(scope, "what tea does alice like")
        await core.finder.recall(scope, "what tea does alice like")
        await router.handle(console_message("hello, remember the tea?", "me", None, 1))
        idle = peak_kib()
        stored_before = await asyncio.to_thread(workspace_bytes, workspace)
        text = big_text(size)
        started = time.perf_counter()
        if case == "capture":
            await core.memories.capture(scope, text)
            await core.memories.flush()
            await core.vectors_ready()
        elif case == "query":
            await core.finder.search(scope, text)
            await core.finder.recall(scope, text)
        else:
            reply = await router.handle(console_message(text, "me", None, 2))
            replied = reply.text if reply is not None else ""
            await core.vectors_ready()
        seconds = time.perf_counter() - started
        del text
        grew = await asyncio.to_thread(workspace_bytes, workspace) - stored_before
    return {
        "case": case,
        "dense": dense,
        "bytes": size,
        "idle_kib": idle,
        "peak_kib": peak_kib(),
        "seconds": round(seconds, 2),
        "grew_bytes": grew,
        "reply": replied[:200],
    }


def measure(case: str, size: int, env: dict[str, str] | None = None) -> dict[str, object]:
    """One case in a fresh child process on a fresh workspace; its report."""
    with tempfile.TemporaryDirectory(prefix="chatmem-big-") as tmp:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "testkit.big_inputs",
                "--child",
                case,
                "--workspace",
                tmp,
                "--size",
                str(size),
                "--env",
                json.dumps(env or {}),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"{case} failed ({done.returncode}): {done.stderr[-2000:]}")
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def largest_capture_bytes() -> int:
    from memory_core.config import load_config

    with tempfile.TemporaryDirectory() as tmp:
        limit = load_config(None, env={}, workspace=Path(tmp)).long_term.max_capture_bytes
    return limit - 1024  # room for what the file adds around the text


def sizes() -> dict[str, int]:
    """Each case's input size: the largest each entry point accepts, and 10 MB where it
    accepts any (a question is read within `query.MAX_QUERY_CHARS`) or refuses."""
    from memory_core.conversation.chat import MAX_MESSAGE_CHARS

    return {
        "capture": largest_capture_bytes(),
        "query": QUERY_BYTES,
        "chat": MAX_MESSAGE_CHARS,
        "long-chat": QUERY_BYTES,
    }


def child() -> None:
    """The child's entry point: one case, its report as the last line of stdout."""
    parser = argparse.ArgumentParser(description="one case of testkit.big_inputs")
    parser.add_argument("--child", choices=CASES, required=True)
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--env", default="{}")
    args = parser.parse_args()
    report = asyncio.run(run_case(args.child, args.workspace, args.size, json.loads(args.env)))
    print(json.dumps(report), flush=True)
    os._exit(0)


if __name__ == "__main__":
    child()
