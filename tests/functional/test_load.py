"""Load: 100 chats x 20 messages through the fake Bot API, the real PTB client, the real
core and the fake model; every message answered once, in its own chat, with nothing of
another chat in any prompt.

The driver (`testkit.load.run_load`) asserts those; the test prints nothing: the figures
(throughput, turn latencies) are the bench's, `python bench/load_bench.py`, which runs the
same driver.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testkit.load import GROUP_CHATS, MESSAGES_PER_CHAT, PRIVATE_CHATS, run_load
from testkit.openai_server import FakeOpenAI
from testkit.telegram_api import FakeTelegramAPI
from tests.postgres import with_storage


@pytest.mark.load
@pytest.mark.slow
async def test_hundred_chats_twenty_messages_each(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    figures = await run_load(tmp_path, fake_tg, fake_llm, env=with_storage())
    assert figures["model turns"] == (PRIVATE_CHATS + GROUP_CHATS) * (MESSAGES_PER_CHAT - 1)


async def test_a_small_load_end_to_end(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    """The same driver at a size every run affords: 3 direct + 3 group chats x 4 messages."""
    figures = await run_load(
        tmp_path,
        fake_tg,
        fake_llm,
        private_chats=3,
        group_chats=3,
        messages_per_chat=4,
        env=with_storage(),
    )
    assert figures["model turns"] == 6 * 3


def test_the_load_tests_print_nothing_in_a_quiet_run(tmp_path: Path) -> None:
    """`pytest -q` of a load test shows a dot and a summary, not figures: those are the
    bench's. (The small test here; the slow one runs the same driver.) In one process
    (`-n 0`: workers to start for one test cost more than the test) and in this test's
    directory: a session of its own would chmod the shared `/tmp/pytest-of-<user>` to
    0700, which the outer run's PostgreSQL servers (another user) must traverse."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            "--basetemp",
            str(tmp_path / "run"),
            f"{Path(__file__).resolve()}::test_a_small_load_end_to_end",
        ],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert " ms" not in done.stdout and "messages/s" not in done.stdout, done.stdout
