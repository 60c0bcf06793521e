"""The command router every adapter shares: commands, chat turns, dedupe, one scope.

Adapters only translate their platform's updates into `InboundMessage` and send back the
text this returns; which scope a message belongs to is decided here, once.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from adapters.inbound import InboundMessage
from memory_core.base.errors import ScopeError
from memory_core.base.scope import ScopeKey, normalise_id
from memory_core.base.text import writes_cjk
from memory_core.base.wording import counted
from memory_core.engine import MemoryCore
from memory_core.longterm.claims import shown

log = logging.getLogger(__name__)

DEDUPE_WINDOW = 10_000

COMMANDS: list[tuple[str, str]] = [
    ("new", "close this session and learn from it"),
    ("remember", "remember something: /remember TEXT"),
    ("forget", "forget memories about something: /forget WHAT (asks first)"),
    ("memory", "what I remember in this chat"),
    ("search", "search this chat's memories: /search WORDS"),
    ("scope", "which memory scope this chat uses"),
    ("help", "list commands"),
]

COMMAND_LIST = "\n".join(f"/{name} — {text}" for name, text in COMMANDS)
HELP_TEXT = "I remember what matters in this chat. 我会记住这个对话里重要的事。\n\n" + COMMAND_LIST


@dataclass(frozen=True, slots=True)
class Reply:
    text: str
    scope: ScopeKey


def unknown_command(name: str) -> str:
    return f"Unknown command /{name}. 未知命令。Commands:\n{COMMAND_LIST}"


def split_command(text: str) -> tuple[str, str, str] | None:
    """(name, @target, argument) of a command; None for plain text, including text that
    merely starts with a slash ('/usr/bin is slow', '/ hi', '//'): a command's name has
    no slash in it."""
    stripped = text.strip()
    if not stripped.startswith("/") or not stripped[1:2].strip():
        return None
    head, *rest = stripped[1:].split(None, 1)
    name, _, target = head.partition("@")
    if not name or "/" in name:
        return None
    return name.lower(), target, rest[0].strip() if rest else ""


def parse_command(text: str, bot_username: str | None = None) -> tuple[str, str] | None:
    """('new', '') for '/new', '/new@botname'; None for plain text or another bot's command."""
    parts = split_command(text)
    if parts is None:
        return None
    name, target, argument = parts
    if target and bot_username and target.lower() != bot_username.lower():
        return None
    return name, argument


class MessageRouter:
    def __init__(self, core: MemoryCore, *, bot_username: str | None = None) -> None:
        self.core = core
        self.bot_username = bot_username
        self._seen: OrderedDict[tuple[str, str, str, str], None] = OrderedDict()

    def scope_of(self, message: InboundMessage) -> ScopeKey:
        config = self.core.config
        return message.scope(config.dm_scope_mode, topic_scope=config.topic_scope)

    def is_duplicate(self, message: InboundMessage) -> bool:
        """Platforms redeliver (DingTalk retries, Telegram after a restart): answer once.
        A message without an id cannot be recognised again, so it is never a duplicate."""
        if not message.message_id:
            return False
        key = self._key(message)
        if key in self._seen:
            return True
        self._seen[key] = None
        if len(self._seen) > DEDUPE_WINDOW:
            self._seen.popitem(last=False)
        return False

    @staticmethod
    def _key(message: InboundMessage) -> tuple[str, str, str, str]:
        return (message.channel, message.account_id, message.chat_id, message.message_id)

    async def handle(self, message: InboundMessage) -> Reply | None:
        """The reply for one inbound message, or None (duplicate or empty)."""
        if self.is_duplicate(message) or not message.text.strip():
            return None
        channel = f"{message.channel}:{message.account_id}"
        if message.message_id and not await self.core.claim_delivery(
            channel, message.chat_id, message.message_id
        ):
            # Another process took it. Not remembered here: if that process dies before
            # answering, the platform's next delivery must reach the database's check.
            self._seen.pop(self._key(message), None)
            return None
        reply = await self._reply(message)
        if message.message_id:
            await self.core.delivery_answered(channel, message.chat_id, message.message_id)
        return reply

    async def _reply(self, message: InboundMessage) -> Reply | None:
        scope = self.scope_of(message)
        parts = split_command(message.text)
        if parts is None:
            result = await self.core.conversation.turn(
                scope, message.text, speaker=message.sender_name, speaker_id=sender_id(message)
            )
            return Reply(result.reply, scope)
        # A command is answered, never stored as a message (or indexed as one).
        name, target, argument = parts
        ours = not (target and self.bot_username) or target.lower() == self.bot_username.lower()
        if not ours:
            return None  # "/new@otherbot": another bot's command, not a message to us
        handler = self._handlers().get(name)
        if handler is not None:
            return Reply(await handler(scope, argument, message), scope)
        if message.chat_type == "group" and not target and self.bot_username:
            # Every bot of a Telegram group sees a bare "/cmd": it may be another bot's.
            return None
        return Reply(unknown_command(name), scope)

    def _handlers(self) -> dict[str, Callable[[ScopeKey, str, InboundMessage], Awaitable[str]]]:
        return {
            "new": self._new,
            "start": self._help,
            "help": self._help,
            "remember": self._remember,
            "forget": self._forget,
            "memory": self._memory,
            "search": self._search,
            "scope": self._scope,
        }

    async def _new(self, scope: ScopeKey, argument: str, message: InboundMessage) -> str:
        result = await self.core.conversation.new_session(scope, chinese=writes_cjk(argument))
        return result.reply

    async def _help(self, scope: ScopeKey, argument: str, message: InboundMessage) -> str:
        return HELP_TEXT

    async def _remember(self, scope: ScopeKey, argument: str, message: InboundMessage) -> str:
        if not argument:
            return "Usage: /remember TEXT"
        return await self.core.conversation.chat.remember(
            scope, argument, speaker=message.sender_name, speaker_id=sender_id(message)
        )

    async def _forget(self, scope: ScopeKey, argument: str, message: InboundMessage) -> str:
        if not argument:
            return "Usage: /forget WHAT"
        return await self.core.conversation.chat.ask_forget(scope, argument)

    async def _memory(self, scope: ScopeKey, argument: str, message: InboundMessage) -> str:
        status = await self.core.memories.status(scope)
        if not status.active:
            return "I don't remember anything in this chat yet. 这个对话里我还没有记住任何事。"
        lines = [f"{counted(len(status.active), 'memory')}, best first:"]
        for rank, entry in enumerate(status.active[:10], start=1):
            lines.append(
                f"{rank}. [{entry.category}] {' '.join(shown(entry).split())} ({entry.score:.2f})"
            )
        return "\n".join(lines)

    async def _search(self, scope: ScopeKey, argument: str, message: InboundMessage) -> str:
        if not argument:
            return "Usage: /search WORDS"
        hits = await self.core.finder.search_words(scope, argument, limit=5)
        if not hits:
            return "Nothing found. 没有找到。"
        return "\n".join(
            f"{h.score:.2f} {h.location}: {' '.join(h.text.split())[:200]}" for h in hits
        )

    async def _scope(self, scope: ScopeKey, argument: str, message: InboundMessage) -> str:
        return f"scope: {scope} (dm_scope = {self.core.config.dm_scope})"


def sender_id(message: InboundMessage) -> str | None:
    """The sender's id as scope keys spell it (`normalise_id`), kept beside the name
    the platform showed: `chatmem erase --person` finds a member's group lines by it.
    None when the platform gave none (or one no key could hold)."""
    try:
        return normalise_id(message.sender_id, "a sender's id", allow_empty=True) or None
    except ScopeError:
        return None
