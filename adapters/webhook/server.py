"""`WebhookServer`: the aiohttp app of a front end whose platform posts signed requests
and takes replies as posts to a URL. A front end writes a `Platform` (how a request is
verified and parsed, where and how its reply goes); the server does the rest, the same
for every platform:

1. the signature and the replay window (`signing`): 403 (or 401) when bad, stale or replayed,
   before the body is read when the platform signs only the timestamp;
2. the body read up to `max_body_bytes` (413 above it, chunked bodies too);
3. the platform's parse, in a worker thread for a large body (400 on `InboundRejected`);
4. answered at once (200); the message is handled afterwards by the router, one chat's
   messages one at a time in arrival order (a lock per chat);
5. the reply posted to the platform's destination, redirects not followed, tried again
   on the waits of `memory_core.base.retry.Backoff` (the sleep is injected).
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections.abc import Mapping
from typing import Any, Generic, Protocol, TypeVar

import aiohttp
from aiohttp import web
from yarl import URL

from adapters.inbound import InboundMessage
from adapters.router import MessageRouter
from adapters.webhook.signing import ReplayWindow, SignedPair
from memory_core.base.clock import Sleep, system_sleep
from memory_core.base.errors import InboundRejected
from memory_core.base.retry import Backoff
from memory_core.engine import MemoryCore

log = logging.getLogger(__name__)

INLINE_PARSE_BYTES = 64 * 1024
"""Bodies up to this size are parsed on the event loop (well under a millisecond); larger
ones in a worker thread."""
SEND_ATTEMPTS = 3
SEND_WAITS = Backoff(first=0.5, most=4.0)
"""Between a reply's attempts: 0.5 s, then 1 s."""
SEND_TIMEOUT_SECONDS = 15.0


class Inbound(Protocol):
    """What a platform's parse returns: at least the message it carries."""

    @property
    def message(self) -> InboundMessage: ...


R = TypeVar("R", bound=Inbound)


class Platform(Protocol[R]):
    """What a webhook front end says about its platform; everything else is the server's.

    `name` starts log lines and names the settings section (`<name>.max_body_bytes`).
    `signs_body`: False when the signature covers only the timestamp, so a bad one is
    refused before the body is read. `bad_signature_status`: the HTTP status of a
    refused signature (403 or 401, as the platform expects)."""

    name: str
    signs_body: bool
    bad_signature_status: int

    def signed_pair(self, headers: Mapping[str, str]) -> SignedPair | None:
        """The request's timestamp and signature; None when either is missing or
        malformed."""
        ...

    def verify(self, pair: SignedPair, body: bytes) -> bool:
        """Whether the signature is the platform's for this timestamp (and body, when
        `signs_body`; else `body` is b"")."""
        ...

    def parse(self, body: bytes) -> R:
        """The request checked as a whole, or `InboundRejected` naming what is wrong."""
        ...

    def ignored(self, request: R) -> str | None:
        """Why a valid request is not for the bot (e.g. "not mentioned"); None to handle it."""
        ...

    def destination(self, request: R) -> URL | None:
        """Where the reply goes, checked when it is ready; None drops it (say why in
        the log)."""
        ...

    def reply_body(self, request: R, text: str) -> dict[str, Any]:
        """The JSON posted to the destination, answering `request`."""
        ...

    def delivered(self, status: int, answer: object) -> bool:
        """Whether the platform took the reply (its HTTP status and its JSON answer,
        None when not JSON); False tries again."""
        ...


class WebhookServer(Generic[R]):
    """The aiohttp app serving one platform's webhook on `path`; one instance per process."""

    def __init__(
        self,
        core: MemoryCore,
        platform: Platform[R],
        window: ReplayWindow,
        *,
        path: str,
        max_body_bytes: int,
        sleep: Sleep = system_sleep,
    ) -> None:
        self.core = core
        self.platform = platform
        self.window = window
        self.path = path
        self.max_body_bytes = max_body_bytes
        self.router = MessageRouter(core)
        self._sleep = sleep
        self._tasks: set[asyncio.Task[None]] = set()
        self._session: aiohttp.ClientSession | None = None
        # Requests run as concurrent tasks: one chat's messages are handled and answered
        # one at a time, in arrival order.
        self._chat_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    def app(self) -> web.Application:
        # aiohttp stops reading a body past client_max_size (chunked ones too), with 413.
        app = web.Application(client_max_size=self.max_body_bytes)
        app.router.add_post(self.path, self.handle)
        app.on_cleanup.append(self._cleanup)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        platform = self.platform
        pair = platform.signed_pair(request.headers)
        if pair is None or (not platform.signs_body and not self._verified(pair, b"")):
            return self._bad_signature(request)
        limit = self.max_body_bytes
        too_large = f"body larger than {platform.name}.max_body_bytes ({limit})"
        if (request.content_length or 0) > limit:
            return self._refused(too_large, 413)
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return self._refused(too_large, 413)
        if platform.signs_body and not self._verified(pair, raw):
            return self._bad_signature(request)
        try:
            if len(raw) <= INLINE_PARSE_BYTES:
                parsed = platform.parse(raw)
            else:
                parsed = await asyncio.to_thread(platform.parse, raw)
        except InboundRejected as exc:
            return self._refused(str(exc), 400)
        reason = platform.ignored(parsed)
        if reason is not None:
            return web.json_response({"ignored": reason})
        # Answer at once; the reply goes to the platform's destination later.
        task = asyncio.ensure_future(self._process(parsed))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.json_response({})

    def _verified(self, pair: SignedPair, body: bytes) -> bool:
        """Signed by the platform, within the window, and not seen before (in that order:
        only genuine pairs are remembered)."""
        return (
            self.window.fresh(pair.timestamp_ms)
            and self.platform.verify(pair, body)
            and self.window.take(pair)
        )

    def _bad_signature(self, request: web.Request) -> web.Response:
        log.warning(
            "%s callback with a bad, expired or replayed signature from %s",
            self.platform.name,
            request.remote,
        )
        status = self.platform.bad_signature_status
        return web.json_response({"error": "bad signature"}, status=status)

    def _refused(self, why: str, status: int) -> web.Response:
        log.warning("%s callback refused: %s", self.platform.name, why)
        return web.json_response({"error": why}, status=status)

    async def _process(self, parsed: R) -> None:
        lock = self._chat_locks.setdefault(parsed.message.chat_id, asyncio.Lock())
        async with lock:
            await self._process_in_order(parsed)

    async def _process_in_order(self, parsed: R) -> None:
        message = parsed.message
        try:
            reply = await self.router.handle(message)
        except Exception:
            log.exception("%s message %s failed", self.platform.name, message.message_id)
            return
        if reply is None:
            return
        destination = self.platform.destination(parsed)
        if destination is not None:
            await self.send(destination, self.platform.reply_body(parsed, reply.text))

    async def send(self, destination: URL, body: dict[str, Any]) -> bool:
        """Post a reply, tried again on failure; True once the platform took it.
        Redirects are not followed: the destination that was checked is the only one
        that receives a scope's text."""
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=SEND_TIMEOUT_SECONDS)
            self._session = aiohttp.ClientSession(timeout=timeout)
        waits = SEND_WAITS.waits()
        for attempt in range(1, SEND_ATTEMPTS + 1):
            if attempt > 1:
                await self._sleep(next(waits))
            try:
                async with self._session.post(
                    destination, json=body, allow_redirects=False
                ) as response:
                    answer = _json_or_none(await response.read())
                    if self.platform.delivered(response.status, answer):
                        return True
                    log.warning(
                        "%s webhook answered %s %s", self.platform.name, response.status, answer
                    )
            except (aiohttp.ClientError, TimeoutError) as exc:
                log.warning("%s webhook failed (attempt %d): %s", self.platform.name, attempt, exc)
        return False

    async def drain(self) -> None:
        """Wait for replies still being produced (graceful shutdown)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _cleanup(self, app: web.Application) -> None:
        await self.drain()
        if self._session is not None:
            await self._session.close()
            self._session = None


def _json_or_none(raw: bytes) -> object:
    """A reply's answer as JSON; None when it is not (a platform may answer with text)."""
    try:
        return json.loads(raw.decode("utf-8")) if raw else None
    except (ValueError, RecursionError):
        return None
