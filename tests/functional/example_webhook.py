"""A tiny signed-webhook front end, written as a newcomer adds one (docs/architecture.md,
"A new front end"): a settings section, a `Platform` for adapters/webhook's
`WebhookServer`, nothing in memory_core. Not a product feature: the tests drive it to
show the toolkit carries a front end on its own.

The platform it speaks: a POST of JSON `{"chat": ..., "user": ..., "text": ...}` with
headers `X-Timestamp` (ms since the epoch) and `X-Signature`,
base64(HMAC-SHA256(secret, timestamp + "." + body)); a bad, stale or replayed
signature is 401. Replies are POSTed as `{"chat": ..., "text": ...}` to `callback_url`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from yarl import URL

from adapters.inbound import InboundMessage
from adapters.settings import AppConfig
from adapters.webhook.server import WebhookServer
from adapters.webhook.signing import ReplayWindow, SignedPair, hmac_sha256_b64, same_sign
from memory_core.base.clock import Clock, Sleep
from memory_core.base.errors import InboundRejected
from memory_core.config.fields import Section, at_least, part, setting
from memory_core.engine import MemoryCore


class ExampleSettings(Section):
    """The example signed webhook (tests/functional/example_webhook.py)."""

    secret: str = setting(
        "", "Shared secret that signs requests.", env="EXAMPLE_WEBHOOK_SECRET", secret=True
    )
    callback_url: str = setting("", "Where replies are posted.")
    path: str = setting("/example/webhook", "URL path of the webhook.")
    max_body_bytes: int = setting(64 * 1024, "Largest body read (bytes).", check=at_least(1024))
    signature_max_age_seconds: int = setting(
        300, "How old a signed timestamp may be.", check=at_least(1)
    )


class ExampleConfig(AppConfig):
    """chatmem.toml with the example's `[example]` table."""

    example: ExampleSettings = part(ExampleSettings)


def signature(secret: str, timestamp: str, body: bytes) -> str:
    return hmac_sha256_b64(secret, timestamp.encode("ascii") + b"." + body)


@dataclass(frozen=True, slots=True)
class ExampleRequest:
    message: InboundMessage


class ExamplePlatform:
    name = "example"
    signs_body = True
    bad_signature_status = 401

    def __init__(self, settings: ExampleSettings, clock: Clock) -> None:
        self.settings = settings
        self._clock = clock

    def signed_pair(self, headers: Mapping[str, str]) -> SignedPair | None:
        return SignedPair.of(headers.get("X-Timestamp"), headers.get("X-Signature"))

    def verify(self, pair: SignedPair, body: bytes) -> bool:
        return same_sign(signature(self.settings.secret, pair.timestamp, body), pair.sign)

    def parse(self, body: bytes) -> ExampleRequest:
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            raise InboundRejected("body is not JSON") from None
        values = data if isinstance(data, dict) else {}
        chat, user, text = (values.get(key) for key in ("chat", "user", "text"))
        if not (isinstance(chat, str) and chat and isinstance(user, str) and user):
            raise InboundRejected("body needs a chat, a user and a text (strings)")
        if not isinstance(text, str):
            raise InboundRejected("body needs a chat, a user and a text (strings)")
        message = InboundMessage(
            channel="example",
            account_id="example",
            sender_id=user,
            sender_name=user,
            chat_type="group",
            chat_id=chat,
            text=text.strip(),
            message_id="",
            timestamp=self._clock(),
            mentioned=True,
        )
        return ExampleRequest(message)

    def ignored(self, request: ExampleRequest) -> str | None:
        return None

    def destination(self, request: ExampleRequest) -> URL | None:
        return URL(self.settings.callback_url)

    def reply_body(self, request: ExampleRequest, text: str) -> dict[str, Any]:
        return {"chat": request.message.chat_id, "text": text}

    def delivered(self, status: int, answer: object) -> bool:
        return 200 <= status < 300


def example_server(
    core: MemoryCore, settings: ExampleSettings, clock: Clock, sleep: Sleep
) -> WebhookServer[ExampleRequest]:
    return WebhookServer(
        core,
        ExamplePlatform(settings, clock),
        ReplayWindow(settings.signature_max_age_seconds, clock),
        path=settings.path,
        max_body_bytes=settings.max_body_bytes,
        sleep=sleep,
    )
