"""testkit/burners.py: the processes a bench runs beside itself for figures "at load ~6"
(`bench/load.py`)."""

from __future__ import annotations

import os

from testkit.burners import burners, settled
from testkit.waiting import until_sync


def test_the_load_has_followed_once_it_rose_by_most_of_the_burners() -> None:
    assert settled(0.5, 0.5, 0)
    assert not settled(0.5, 1.5, 2)
    assert settled(0.5, 1.7, 2)


def test_each_burner_runs_in_a_session_of_its_own_and_stops_with_the_bench() -> None:
    """With autogroup scheduling a session shares the CPU as one: burners in the bench's
    session would weigh as one program against the command measured, in its own."""
    with burners(2, settle_seconds=0) as procs:
        pids = [proc.pid for proc in procs]
        assert all(pid is not None for pid in pids)
        until_sync(
            lambda: all(os.getsid(pid) == pid for pid in pids if pid is not None),
            what="each burner in a session of its own",
        )
        assert os.getsid(0) not in pids
    assert not any(proc.is_alive() for proc in procs)
