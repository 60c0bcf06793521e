"""The largest inputs chatmem accepts stay within a stated memory bound with the vector
extra: a capture just under `long_term.max_capture_bytes`, a 10 MB question, the longest
chat line a turn takes, and a 10 MB chat line (refused in one line).

Each runs in a process of its own (testkit/big_inputs.py), which warms up first (model
loaded, one capture, search and turn done) and reports its peak RSS (`ru_maxrss`) before
and after the input. The bound is on memory, not on time: the seconds are only printed."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from memory_core.conversation.chat import MAX_MESSAGE_CHARS
from testkit.big_inputs import measure, sizes

BOUND_MIB = 300
"""Peak RSS above the process's idle peak for the largest accepted input
(docs/recall.md, "Big inputs")."""

pytestmark = [pytest.mark.storage, pytest.mark.dense, pytest.mark.timeout(900)]


@pytest.mark.parametrize("case", ["capture", "query", "chat", "long-chat"])
def test_the_largest_accepted_input_stays_within_the_memory_bound(
    case: str, storage_env: Mapping[str, str]
) -> None:
    report = measure(case, sizes()[case], dict(storage_env))
    idle, peak = int(str(report["idle_kib"])) // 1024, int(str(report["peak_kib"])) // 1024
    print(
        f"{case}: {report['bytes']} bytes, peak {peak} MiB, idle {idle} MiB, {report['seconds']} s"
    )
    assert report["dense"], "the vector extra is installed: vectors must be on"
    assert peak - idle <= BOUND_MIB, report
    if case == "long-chat":
        assert "too long" in str(report["reply"]) and str(MAX_MESSAGE_CHARS) in str(report["reply"])
    if case == "chat":
        assert "too long" not in str(report["reply"])
