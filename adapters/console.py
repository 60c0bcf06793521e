"""`chatmem chat`: the same core in a terminal, for trying chatmem without any token.

`--as USER` and `--group ID` play several people and chats. When stdin is not a terminal
it reads one message per line, prints each reply on one line (a newline inside a reply is
written as `\\n`, a backslash as `\\\\`), and exits at end of input.

Ctrl-C quits at once with status 130: at the prompt, and while a reply is under way (the
turn is cancelled). Stdin is read by a daemon thread of our own, not `asyncio.to_thread`:
a read blocked in the default executor kept `asyncio.run` from returning after Ctrl-C
until the person pressed Enter, since it waits for that executor's threads.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import sys
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from itertools import count
from typing import Any, TypeVar

from adapters.inbound import InboundMessage
from adapters.router import MessageRouter, Reply
from memory_core.base.clock import system_clock
from memory_core.base.errors import ChatmemError
from memory_core.engine import MemoryCore

PROMPT = "you> "
EXIT_INTERRUPTED = 130
"""128 + SIGINT, what a shell reports for a program stopped by Ctrl-C."""
READ_SIZE = 1 << 16

T = TypeVar("T")


def console_message(text: str, user: str, group: str | None, message_id: str) -> InboundMessage:
    """A line typed at the console as the router takes it. `message_id` must never repeat
    in the workspace (`run_ids`): the deliveries table keeps every id it saw for days."""
    return InboundMessage(
        channel="console",
        account_id="local",
        sender_id=user,
        sender_name=user,
        chat_type="group" if group else "direct",
        chat_id=group or user,
        text=text,
        message_id=message_id,
        timestamp=system_clock(),
        mentioned=True,
    )


def run_ids() -> Iterator[str]:
    """Message ids unique to this run: its own random prefix and a line number. Numbers
    alone started at 1 in every run, and the deliveries table, which remembers ids for
    days, took a later run's first lines for redeliveries and dropped them unanswered."""
    run = uuid.uuid4().hex
    return (f"{run}-{number}" for number in count(1))


class Interrupted(Exception):
    """Ctrl-C while waiting for input or for a reply."""


async def run_console(core: MemoryCore, *, user: str = "me", group: str | None = None) -> int:
    router = MessageRouter(core)
    interactive = sys.stdin.isatty()
    message_ids = run_ids()
    scope = router.scope_of(console_message("", user, group, ""))
    lines = StdinLines()
    interrupted = asyncio.Event()
    catching = _catch_interrupt(interrupted)

    def stop_turn() -> int:
        return core.conversation.chat.interrupt(scope)

    try:
        if interactive:
            model = core.config.llm.model or "no model (offline)"
            print(f"chatmem — scope {scope}, {model}. /help for commands, Ctrl-D to quit.")
        while True:
            if interactive:
                print(PROMPT, end="", flush=True)
            line = await _unless_interrupted(interrupted, lines.readline())
            if line is None:
                if interactive:
                    print()  # the shell's prompt starts on a line of its own
                break
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
            message = console_message(text, user, group, next(message_ids))
            try:
                reply = await _unless_interrupted(interrupted, router.handle(message), stop_turn)
            except ChatmemError as exc:
                reply = Reply(f"error: {exc}", scope)
            if reply is not None:
                print(f"bot> {reply.text}" if interactive else one_line(reply.text), flush=True)
    except Interrupted:
        if interactive:
            print()
        return EXIT_INTERRUPTED
    finally:
        if catching:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)
    return 0


def _catch_interrupt(interrupted: asyncio.Event) -> bool:
    """Ctrl-C sets `interrupted` instead of raising KeyboardInterrupt wherever the loop is."""
    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, interrupted.set)
    except (NotImplementedError, RuntimeError, ValueError):
        return False
    return True


async def _unless_interrupted(
    interrupted: asyncio.Event, work: Awaitable[T], stop_turn: Callable[[], int] | None = None
) -> T:
    """`work`'s result, or Interrupted once Ctrl-C is pressed, after `work` has ended.

    A turn is stopped through the core (`stop_turn`): the core runs it in a task of its
    own, shielded, so cancelling our wait alone would leave it running while the core
    closes. Work the core does not know of (a search) is cancelled here. Where no signal
    handler could be installed (not POSIX), `asyncio.run` cancels us on Ctrl-C instead:
    the work is stopped the same way before the cancellation goes on."""
    task = asyncio.ensure_future(work)
    stop = asyncio.ensure_future(interrupted.wait())
    try:
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        await _stop(task, stop_turn)
        raise
    finally:
        stop.cancel()
    if task.done():
        return task.result()
    await _stop(task, stop_turn)
    raise Interrupted


async def _stop(task: asyncio.Future[Any], stop_turn: Callable[[], int] | None) -> None:
    if stop_turn is None or stop_turn() == 0:
        task.cancel()
    await asyncio.wait({task})


def one_line(text: str) -> str:
    """A reply as exactly one line, reversibly: scripts pair replies with input lines."""
    return text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")


class StdinLines:
    """Lines of stdin, read on request by a daemon thread.

    Why not `asyncio.to_thread(input)`: a read blocked in the default executor made
    `asyncio.run` wait for it after Ctrl-C (it shuts that executor down), so the program
    only quit once Enter was pressed. A daemon thread is not waited for. It reads the file
    descriptor with `os.read`, not `sys.stdin`: a daemon thread holding the buffered
    reader's lock at exit makes the interpreter abort ("could not acquire lock").
    """

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[
            tuple[asyncio.AbstractEventLoop, asyncio.Future[str | None]]
        ] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._buffer = b""
        self._eof = False

    async def readline(self) -> str | None:
        """The next line (without its newline), or None at end of input."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str | None] = loop.create_future()
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="stdin", daemon=True)
            self._thread.start()
        self._requests.put((loop, future))
        return await future

    def _serve(self) -> None:
        while True:
            loop, future = self._requests.get()
            try:
                line: str | None = self._next_line()
            except (OSError, ValueError) as exc:
                outcome: tuple[str | None, BaseException | None] = (None, exc)
            else:
                outcome = (line, None)
            try:
                loop.call_soon_threadsafe(_settle, future, *outcome)
            except RuntimeError:
                return  # the loop is closed: nobody is reading any more

    def _next_line(self) -> str | None:
        while b"\n" not in self._buffer and not self._eof:
            chunk = _read_stdin()
            self._eof = not chunk
            self._buffer += chunk
        if not self._buffer:
            return None
        raw, newline, self._buffer = self._buffer.partition(b"\n")
        if not newline:
            self._buffer = b""
        encoding = getattr(sys.stdin, "encoding", None) or "utf-8"
        # Splitting bytes at b"\n" is safe in every encoding a terminal uses (UTF-8, GBK:
        # no multi-byte character contains 0x0A). An undecodable byte becomes a lone
        # surrogate, as in a command line's arguments: the core refuses that line with
        # one error instead of storing a changed text, and the chat goes on.
        return raw.decode(encoding, errors="surrogateescape").removesuffix("\r")


def _read_stdin() -> bytes:
    stdin = sys.stdin
    if stdin is None:
        return b""
    try:
        fd = stdin.fileno()
    except (OSError, ValueError):
        return stdin.readline().encode("utf-8")  # no descriptor (a test's StringIO)
    return os.read(fd, READ_SIZE)


def _settle(
    future: asyncio.Future[str | None], line: str | None, error: BaseException | None
) -> None:
    if future.done():
        return  # given up on (Ctrl-C)
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(line)
