"""One whole process timed as a person's command: wall time, CPU time and peak memory.

Shared by the benches that drive installed trees through their CLI
(`bench/many_scopes_bench.py`, `bench/big_workspace_bench.py`) and the tests that check
what it measures.

The figures the issue asks of a command (`chatmem search` as a process: wall, CPU, peak
RSS) are the kernel's, read by `os.wait4` for that one child (user + system CPU, its
largest resident set), so they hold for any tree's `chatmem`, installed anywhere. A run
past its timeout is killed and says so instead of holding the bench for an hour.

The peak counts the resident set the child had before its exec, a copy of the caller's:
a bench that measures peaks keeps its own process small (it generates data in a child).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path


@dataclass(frozen=True)
class Run:
    """What one process cost. `timed_out` runs were killed at the timeout."""

    wall: float
    cpu: float
    peak_mb: float
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    waits: int = 0
    """Voluntary context switches: the process waited (I/O, a lock, a sleep)."""
    preempted: int = 0
    """Involuntary context switches: the process could run but another had the CPU."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


@dataclass(frozen=True)
class _Usage:
    code: int
    cpu: float
    peak_mb: float
    waits: int
    preempted: int


def _reap(proc: subprocess.Popen[bytes]) -> _Usage:
    """Wait for `proc` through wait4: its exit code and what the kernel counted."""
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code  # reaped here: Popen must not wait for it again
    return _Usage(
        code=code,
        cpu=usage.ru_utime + usage.ru_stime,
        peak_mb=usage.ru_maxrss / 1024.0,
        waits=usage.ru_nvcsw,
        preempted=usage.ru_nivcsw,
    )


def run(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    timeout: float,
    cwd: Path | None = None,
    stdin: str | None = None,
) -> Run:
    """Run `argv` to its end (or `timeout`, then kill it) and measure it."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            if stdin is not None and proc.stdin is not None:
                with contextlib.suppress(BrokenPipeError):
                    proc.stdin.write(stdin.encode())
                    proc.stdin.close()
            usage = _reap(proc)
        finally:
            timer.cancel()
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        return Run(
            wall=wall,
            cpu=usage.cpu,
            peak_mb=usage.peak_mb,
            returncode=usage.code,
            stdout=out.read().decode(errors="replace"),
            stderr=err.read().decode(errors="replace"),
            timed_out=killed.is_set(),
            waits=usage.waits,
            preempted=usage.preempted,
        )


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


def mcp_answers(url: str, timeout: float = 2.0) -> bool:
    """Whether an MCP streamable-HTTP server at `url` answers `initialize` (HTTP 200)."""
    request = urllib.request.Request(
        url,
        data=json.dumps(INITIALIZE).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status) == 200
    except (OSError, urllib.error.URLError):
        return False


def serving_start(
    argv: Sequence[str],
    env: Mapping[str, str],
    url: str,
    *,
    timeout: float,
    cwd: Path | None = None,
    poll_seconds: float = 0.02,
) -> Run:
    """Start a server and time it until `url` answers; `wall` is that time, `cpu` and
    `peak_mb` the whole process's once it is stopped (SIGTERM, as a supervisor stops it)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
        answered: float | None = None
        deadline = started + timeout
        while time.perf_counter() < deadline and proc.poll() is None:
            if mcp_answers(url, timeout=max(0.1, min(2.0, deadline - time.perf_counter()))):
                answered = time.perf_counter() - started
                break
            time.sleep(poll_seconds)
        early_exit = proc.returncode
        if early_exit is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM if answered is not None else signal.SIGKILL)
            # A server that ignores SIGTERM is killed after a while.
            stopper = threading.Timer(20.0, _suppress_kill, args=(proc.pid,))
            stopper.start()
            try:
                usage = _reap(proc)
            finally:
                stopper.cancel()
            usage = replace(usage, code=0 if answered is not None else 1)
        else:
            usage = _Usage(early_exit, 0.0, 0.0, 0, 0)
        out.seek(0)
        err.seek(0)
        return Run(
            wall=answered if answered is not None else time.perf_counter() - started,
            cpu=usage.cpu,
            peak_mb=usage.peak_mb,
            returncode=usage.code,
            waits=usage.waits,
            preempted=usage.preempted,
            stdout=out.read().decode(errors="replace"),
            stderr=err.read().decode(errors="replace"),
            timed_out=answered is None and early_exit is None,
        )


def _suppress_kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def free_port() -> int:
    """A TCP port free on loopback now (the server binds it a moment later)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
