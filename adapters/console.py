"""`chatmem chat`: the same core in a terminal, for trying chatmem without any token.

`--as USER` and `--group ID` play several people and chats. When stdin is not a terminal
it reads one message per line, prints each reply on one line (a newline inside a reply is
written as `\\n`, a backslash as `\\\\`), and exits at end of input.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from itertools import count

from adapters.inbound import InboundMessage
from adapters.router import MessageRouter
from memory_core.engine import MemoryCore

PROMPT = "you> "


def console_message(text: str, user: str, group: str | None, number: int) -> InboundMessage:
    return InboundMessage(
        channel="console",
        account_id="local",
        sender_id=user,
        sender_name=user,
        chat_type="group" if group else "direct",
        chat_id=group or user,
        text=text,
        message_id=str(number),
        timestamp=datetime.now(UTC),
        mentioned=True,
    )


async def run_console(core: MemoryCore, *, user: str = "me", group: str | None = None) -> int:
    router = MessageRouter(core)
    interactive = sys.stdin.isatty()
    numbers = count(1)
    if interactive:
        scope = router.scope_of(console_message("", user, group, 0))
        model = core.config.llm.model or "no model (offline)"
        print(f"chatmem — scope {scope}, {model}. /help for commands, Ctrl-D to quit.")
    while True:
        line = await asyncio.to_thread(_read_line, PROMPT if interactive else "")
        if line is None:
            break
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit"):
            break
        reply = await router.handle(console_message(text, user, group, next(numbers)))
        if reply is not None:
            print(f"bot> {reply.text}" if interactive else one_line(reply.text), flush=True)
    return 0


def one_line(text: str) -> str:
    """A reply as exactly one line, reversibly: scripts pair replies with input lines."""
    return text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")


def _read_line(prompt: str) -> str | None:
    try:
        return input(prompt) if prompt else sys.stdin.readline() or None
    except EOFError:
        return None
