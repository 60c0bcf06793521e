"""Throughput and turn latencies of the bot under load: 100 chats x 20 messages through the
fake Telegram Bot API, the real python-telegram-bot client, the real core and the fake
model, all on 127.0.0.1.

The driver is the one the load test runs (`testkit/load.py::run_load`), so every
promise it checks (each message answered once, in its own chat, with nothing of
another chat in any prompt) holds for the run these figures come from. Not a test.

    python bench/load_bench.py [--private N] [--groups N] [--messages N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testkit.bot import BOT_USERNAME, TOKEN
from testkit.load import GROUP_CHATS, MESSAGES_PER_CHAT, PRIVATE_CHATS, run_load
from testkit.openai_server import FakeOpenAI
from testkit.telegram_api import FakeTelegramAPI


async def bench(private: int, groups: int, messages: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="chatmem-load-bench-"))
    try:
        async with (
            FakeTelegramAPI(token=TOKEN, bot_username=BOT_USERNAME) as fake_tg,
            FakeOpenAI() as fake_llm,
        ):
            return await run_load(
                root,
                fake_tg,
                fake_llm,
                private_chats=private,
                group_chats=groups,
                messages_per_chat=messages,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--private", type=int, default=PRIVATE_CHATS, help="direct chats")
    parser.add_argument("--groups", type=int, default=GROUP_CHATS, help="group chats")
    parser.add_argument(
        "--messages", type=int, default=MESSAGES_PER_CHAT, help="messages per chat (>= 2)"
    )
    args = parser.parse_args()
    # As the tests run them: PTB durations as timedeltas, and no proxy for the fakes.
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
    figures = asyncio.run(bench(args.private, args.groups, args.messages))
    print(f"load: {args.private + args.groups} chats x {args.messages} messages")
    for name, value in figures.items():
        print(f"  {name}: {value:.1f}")


if __name__ == "__main__":
    from results import recorded_main

    with recorded_main("load_bench"):
        main()
