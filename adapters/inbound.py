"""The adapter-neutral message: what every front end turns its platform's update into."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from memory_core.base.scope import DmScope, InboundContext, ScopeKey, resolve_scope


@dataclass(frozen=True, slots=True)
class InboundMessage:
    channel: str
    account_id: str
    sender_id: str
    sender_name: str
    chat_type: Literal["direct", "group"]
    chat_id: str
    text: str
    message_id: str
    """The platform's id of the message, never given to another message of the same
    channel, account and chat, whichever process or run receives it: the workspace's
    deliveries table keeps it for days and drops a message whose key it has seen as a
    redelivery. Telegram's message ids (per chat) and DingTalk's msgIds are; the console
    makes its own (`adapters.console.run_ids`). '' when there is no such id: the message
    is then never taken for a redelivery."""
    timestamp: datetime
    thread_id: str | None = None
    mentioned: bool = False
    """The bot was @-mentioned or replied to (always true in direct chats)."""

    def context(self) -> InboundContext:
        return InboundContext(
            channel=self.channel,
            account_id=self.account_id,
            peer_id=self.sender_id,
            chat_type=self.chat_type,
            chat_id=self.chat_id,
            thread_id=self.thread_id,
        )

    def scope(self, dm_scope: DmScope | str, *, topic_scope: bool = False) -> ScopeKey:
        """Resolved once, here at the edge, and passed down unchanged."""
        return resolve_scope(self.context(), dm_scope, topic_scope=topic_scope)
