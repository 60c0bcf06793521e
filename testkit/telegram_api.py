"""A fake Telegram Bot API server for driving the *real* python-telegram-bot client.

Why a server and not a mocked `Bot`: the adapter's correctness depends on what PTB does
on the wire (form-encoded bodies, long polling, offset confirmation, HTTP-status to
exception mapping), so the fake speaks HTTP on 127.0.0.1 and PTB runs unmodified::

    async with FakeTelegramAPI(token="123:ABC", bot_username="chatmem_bot") as fake:
        app = (Application.builder().token(fake.token).base_url(fake.base_url)
               .base_file_url(fake.base_file_url).build())
        fake.add_private_message(42, "/start")
        ...
        sent = await fake.wait_for_sent(1)

Photos and documents carry files the client fetches like from Telegram (getFile, then a
GET under `/file/bot<token>/`): `fake.add_private_photo(42, jpeg_bytes, caption=...)`.

Only the behaviour chatmem relies on is emulated; anything else can be added per test
with `FakeTelegramAPI.on`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Self

from aiohttp import web

from testkit.telegram_updates import TelegramUpdates

JSONDict = dict[str, Any]
FailureMode = Literal["error", "network", "disconnect", "hang"]

# PTB form-encodes everything: numbers arrive as strings and structures as JSON strings.
# fmt: off
_INT_PARAMS = frozenset({
    "chat_id", "from_chat_id", "message_id", "message_thread_id", "reply_to_message_id",
    "user_id", "offset", "limit", "timeout", "cache_time", "max_connections",
})
_JSON_PARAMS = frozenset({
    "reply_markup", "reply_parameters", "entities", "caption_entities", "commands", "scope",
    "allowed_updates", "link_preview_options", "media", "reaction",
})
_BOOL_PARAMS = frozenset({
    "disable_notification", "protect_content", "drop_pending_updates", "show_alert",
    "allow_sending_without_reply", "disable_web_page_preview", "is_big",
})
# fmt: on
_DEFAULT_DESCRIPTIONS = {
    400: "Bad Request: chat not found",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: "Conflict: terminated by other getUpdates request",
    429: "Too Many Requests: retry after {retry_after}",
    502: "Bad Gateway",
}
MAX_MESSAGE_LENGTH = 4096
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024
"""The cloud Bot API's getFile limit; larger files answer "file is too big"."""


@dataclass(frozen=True)
class ApiCall:
    """One request as the fake understood it (params already coerced to Python types)."""

    method: str
    params: JSONDict
    error_code: int | None = None


@dataclass(frozen=True)
class SentMessage:
    """A successful sendMessage, flattened for easy assertions; `message` is what PTB got."""

    chat_id: int | str
    text: str
    message_id: int
    message_thread_id: int | None
    parse_mode: str | None
    reply_markup: Any
    reply_to_message_id: int | None
    params: JSONDict
    message: JSONDict


@dataclass(frozen=True)
class ChatAction:
    chat_id: int | str
    action: str
    message_thread_id: int | None


@dataclass
class _Failure:
    error_code: int
    description: str
    parameters: JSONDict | None
    mode: FailureMode
    remaining: int


class ApiError(Exception):
    """Raise from a method handler (built-in or `FakeTelegramAPI.on`) to answer
    `{"ok": false, "error_code": code, "description": ...}` like Telegram does."""

    def __init__(self, code: int, description: str, parameters: JSONDict | None = None) -> None:
        super().__init__(description)
        self.code, self.description, self.parameters = code, description, parameters


def _coerce(key: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if key in _JSON_PARAMS:
        try:
            return json.loads(value)
        except ValueError:
            return value
    if key in _INT_PARAMS:
        try:
            number = float(value)
        except ValueError:
            return value  # e.g. chat_id="@channelname"
        return int(number) if number.is_integer() else number
    if key in _BOOL_PARAMS and value in ("true", "false"):
        return value == "true"
    return value


async def _read_params(request: web.Request) -> JSONDict:
    raw: JSONDict = dict(request.query)
    if request.can_read_body:
        if request.content_type == "application/json":
            raw.update(await request.json())
        else:
            for key, value in (await request.post()).items():
                if isinstance(value, web.FileField):
                    raw[key] = {"filename": value.filename, "content": value.file.read()}
                else:
                    raw[key] = value
    return {key: _coerce(key, value) for key, value in raw.items()}


def _json_response(body: JSONDict, status: int = 200) -> web.Response:
    return web.json_response(body, status=status, dumps=lambda o: json.dumps(o, ensure_ascii=False))


class FakeTelegramAPI(TelegramUpdates):
    """In-process Telegram Bot API on a random 127.0.0.1 port; see the module docstring."""

    def __init__(
        self,
        token: str = "123:ABC",
        *,
        bot_username: str = "chatmem_bot",
        bot_first_name: str = "ChatMem",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._token = token
        self.bot_id = int(token.split(":", 1)[0])
        self.bot_username = bot_username
        self.bot_user: JSONDict = {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": bot_first_name,
            "username": bot_username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        self._clock = clock
        self.calls: list[ApiCall] = []
        self.unknown_calls: list[ApiCall] = []
        self.sent_messages: list[SentMessage] = []
        self.chat_actions: list[ChatAction] = []
        self.webhook_url = ""
        self.confirmed_offset = 0
        self.held_polls = 0
        """getUpdates calls being held open right now (waiting for an update)."""
        self._commands: dict[tuple[str, str], list[JSONDict]] = {}
        self._pending: deque[JSONDict] = deque()
        self._last_update_id = 0
        self._last_message_id: dict[int | str, int] = {}
        self._messages: dict[tuple[int | str, int], JSONDict] = {}
        self._chats: dict[int | str, JSONDict] = {}
        self._failures: dict[str, deque[_Failure]] = {}
        self._custom: dict[str, Callable[[JSONDict], Any]] = {}
        self._files: dict[str, tuple[str, bytes]] = {}
        self.downloads: list[str] = []
        """file_path of every file the client downloaded, in order."""
        self._changed = asyncio.Event()
        self._closing = False
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._methods: dict[str, Callable[[JSONDict], Any]] = {
            "getme": lambda p: self.bot_user,
            "getupdates": self._get_updates,
            "sendmessage": self._send_message,
            "sendchataction": self._send_chat_action,
            "setmycommands": self._set_my_commands,
            "getmycommands": lambda p: self._commands.get(self._scope_key(p), []),
            "deletemycommands": lambda p: self._commands.pop(self._scope_key(p), None) or True,
            "deletewebhook": self._delete_webhook,
            "setwebhook": self._set_webhook,
            "getwebhookinfo": lambda p: {
                "url": self.webhook_url,
                "has_custom_certificate": False,
                "pending_update_count": len(self._pending),
            },
            "close": lambda p: True,
            "logout": lambda p: True,
            "answercallbackquery": lambda p: True,
            "editmessagetext": self._edit_message_text,
            "deletemessage": self._delete_message,
            "getchat": lambda p: self._chat_for(p.get("chat_id")),
            "getfile": self._get_file,
        }

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> Self:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{file_path:.+}", self._download)
        # shutdown_timeout bounds how long stop() waits for requests still in flight.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        """Release held long polls first, otherwise cleanup would wait for them to time out."""
        self._closing = True
        self._notify()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def token(self) -> str:
        return self._token

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/bot"

    @property
    def base_file_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/file/bot"

    # ------------------------------------------------------------------ test controls
    def fail_next(
        self,
        method: str,
        *,
        error_code: int | None = None,
        description: str | None = None,
        retry_after: int | None = None,
        parameters: JSONDict | None = None,
        times: int = 1,
        mode: FailureMode = "error",
    ) -> None:
        """Make the next `times` calls of `method` fail. `mode`: "error" answers
        Telegram's JSON error (429 + retry_after -> RetryAfter, 403 -> Forbidden,
        400 -> BadRequest); "network" answers a bare 502 (NetworkError); "disconnect"
        drops the connection (NetworkError); "hang" never answers (TimedOut). The failed
        call is recorded with `error_code` (default 429; 502 for network/disconnect, 504
        for hang)."""
        if error_code is None:
            error_code = {"error": 429, "hang": 504}.get(mode, 502)
        if error_code == 429 and retry_after is None:
            retry_after = 1
        if retry_after is not None:
            parameters = {**(parameters or {}), "retry_after": retry_after}
        default = _DEFAULT_DESCRIPTIONS.get(error_code, f"Error {error_code}")
        text = description or default.format(retry_after=retry_after)
        failure = _Failure(error_code, text, parameters, mode, times)
        self._failures.setdefault(method.lower(), deque()).append(failure)

    def on(self, method: str, handler: Callable[[JSONDict], Any]) -> None:
        """Answer `method` with `handler(params)` (sync or async; raise `ApiError`
        to fail). Overrides the built-in behaviour, e.g. for getChatMember or sendPhoto."""
        self._custom[method.lower()] = handler

    # ------------------------------------------------------------------ inspection

    def pending_updates(self) -> list[JSONDict]:
        """Updates not yet confirmed by an `offset` (delivered-but-unconfirmed included)."""
        return list(self._pending)

    def sent_to(self, chat_id: int | str) -> list[SentMessage]:
        return [m for m in self.sent_messages if m.chat_id == chat_id]

    def calls_to(self, method: str) -> list[ApiCall]:
        return [c for c in self.calls if c.method.lower() == method.lower()]

    @property
    def commands(self) -> list[JSONDict]:
        """Commands set for the default scope and language."""
        return self._commands.get(("default", ""), [])

    async def wait_for_sent(
        self,
        count: int,
        timeout: float = 5.0,  # noqa: ASYNC109 - a plain deadline reads best in tests
        *,
        chat_id: int | str | None = None,
    ) -> list[SentMessage]:
        """Wait until at least `count` messages were sent (to `chat_id` if given)."""

        def sent() -> list[SentMessage]:
            return self.sent_messages if chat_id is None else self.sent_to(chat_id)

        await self._wait_until(
            lambda: len(sent()) >= count,
            timeout,
            lambda: (
                f"expected {count} sent messages, got {len(sent())}: "
                f"{[(m.chat_id, m.text) for m in sent()]!r}"
            ),
        )
        return list(sent())

    async def wait_for_calls(
        self,
        method: str,
        count: int = 1,
        timeout: float = 5.0,  # noqa: ASYNC109
    ) -> list[ApiCall]:
        await self._wait_until(
            lambda: len(self.calls_to(method)) >= count,
            timeout,
            lambda: f"expected {count} {method} calls, got {self.calls_to(method)!r}",
        )
        return self.calls_to(method)

    async def wait_for_held_poll(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Wait until a long poll (getUpdates with a timeout) is held open by the fake."""
        await self._wait_until(
            lambda: self.held_polls > 0, timeout, lambda: "no long poll was held open"
        )

    # ------------------------------------------------------------------ HTTP plumbing
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self._token:
            return _json_response(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, 401
            )
        method = request.match_info["method"]
        params = await _read_params(request)
        failure = self._take_failure(method)
        if failure is not None:
            self._record(ApiCall(method, params, failure.error_code))
            return await self._fail(request, failure)
        handler = self._custom.get(method.lower()) or self._methods.get(method.lower())
        if handler is None:
            call = ApiCall(method, params, 404)
            self._record(call)
            self.unknown_calls.append(call)
            return self._error(ApiError(404, "Not Found: method not found"))
        try:
            result = handler(params)
            if asyncio.iscoroutine(result):
                result = await result
        except ApiError as exc:
            self._record(ApiCall(method, params, exc.code))
            return self._error(exc)
        self._record(ApiCall(method, params))
        return _json_response({"ok": True, "result": result})

    @staticmethod
    def _error(exc: ApiError) -> web.Response:
        body: JSONDict = {"ok": False, "error_code": exc.code, "description": exc.description}
        if exc.parameters:
            body["parameters"] = exc.parameters
        return _json_response(body, exc.code)

    async def _fail(self, request: web.Request, failure: _Failure) -> web.StreamResponse:
        if failure.mode == "network":
            return web.Response(status=502, text="<html>502 Bad Gateway</html>")
        if failure.mode == "disconnect":
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=502)  # never reaches the client
        if failure.mode == "hang":
            await self._wait_until(lambda: self._closing, 3600.0, str)
            return web.Response(status=504)
        return self._error(ApiError(failure.error_code, failure.description, failure.parameters))

    def _take_failure(self, method: str) -> _Failure | None:
        queue = self._failures.get(method.lower())
        if not queue:
            return None
        failure = queue[0]
        failure.remaining -= 1
        if failure.remaining <= 0:
            queue.popleft()
        return failure

    def _record(self, call: ApiCall) -> None:
        self.calls.append(call)
        self._notify()

    def _notify(self) -> None:
        """Wake every waiter (long polls, wait_for_*); each re-checks its own condition.
        Swapping the event keeps this synchronous so test code can call add_* without await."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_until(
        self,
        predicate: Callable[[], bool],
        timeout: float,  # noqa: ASYNC109 - a deadline that also ends long polls early
        describe: Callable[[], str],
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(describe())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

    # ------------------------------------------------------------------ Bot API methods
    async def _get_updates(self, params: JSONDict) -> list[JSONDict]:
        if self.webhook_url:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        offset = params.get("offset")
        if offset is not None:
            self._confirm(int(offset))
        limit = min(max(int(params.get("limit") or 100), 1), 100)
        allowed = params.get("allowed_updates") or []

        def visible() -> list[JSONDict]:
            return [u for u in self._pending if not allowed or any(k in u for k in allowed)]

        timeout = max(float(params.get("timeout") or 0), 0.0)
        if self._closing or visible() or not timeout:
            return visible()[:limit]
        self.held_polls += 1
        self._notify()
        try:
            with contextlib.suppress(TimeoutError):
                await self._wait_until(lambda: self._closing or bool(visible()), timeout, str)
        finally:
            self.held_polls -= 1
        return visible()[:limit]

    def _confirm(self, offset: int) -> None:
        if offset < 0:  # "-N": keep only the last N updates
            while len(self._pending) > -offset:
                self._pending.popleft()
        else:
            while self._pending and self._pending[0]["update_id"] < offset:
                self._pending.popleft()
        self.confirmed_offset = max(self.confirmed_offset, offset)

    def _send_message(self, params: JSONDict) -> JSONDict:
        chat_id, text = params.get("chat_id"), params.get("text") or ""
        if chat_id in (None, ""):
            raise ApiError(400, "Bad Request: chat_id is empty")
        if not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if params.get("parse_mode") is None and len(text) > MAX_MESSAGE_LENGTH:
            raise ApiError(400, "Bad Request: message is too long")
        thread_id = params.get("message_thread_id")
        reply_to = (params.get("reply_parameters") or {}).get("message_id")
        reply_to = reply_to or params.get("reply_to_message_id")
        message = self._new_message(self._chat_for(chat_id), self.bot_user, text, thread_id)
        if thread_id is not None:
            message["is_topic_message"] = True
        if reply_to is not None and (original := self._messages.get((chat_id, reply_to))):
            message["reply_to_message"] = original
        markup = params.get("reply_markup")
        if isinstance(markup, dict) and "inline_keyboard" in markup:
            message["reply_markup"] = markup
        self._remember(message)
        self.sent_messages.append(
            SentMessage(
                chat_id=chat_id,
                text=text,
                message_id=message["message_id"],
                message_thread_id=thread_id,
                parse_mode=params.get("parse_mode"),
                reply_markup=markup,
                reply_to_message_id=reply_to,
                params=params,
                message=message,
            )
        )
        return message

    def _get_file(self, params: JSONDict) -> JSONDict:
        file_id = str(params.get("file_id") or "")
        if file_id not in self._files:
            raise ApiError(400, "Bad Request: invalid file_id")
        file_path, content = self._files[file_id]
        if len(content) > MAX_DOWNLOAD_BYTES:
            raise ApiError(400, "Bad Request: file is too big")
        return {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_size": len(content),
            "file_path": file_path,
        }

    async def _download(self, request: web.Request) -> web.StreamResponse:
        """GET /file/bot<token>/<file_path>: the bytes, like api.telegram.org serves them.
        `fail_next("download", ...)` makes it fail like a Bot API method."""
        if request.match_info["token"] != self._token:
            return web.Response(status=401, text="Unauthorized")
        file_path = request.match_info["file_path"]
        failure = self._take_failure("download")
        if failure is not None:
            self._record(ApiCall("download", {"file_path": file_path}, failure.error_code))
            return await self._fail(request, failure)
        for path, content in self._files.values():
            if path == file_path:
                self.downloads.append(file_path)
                self._record(ApiCall("download", {"file_path": file_path}))
                return web.Response(body=content, content_type="application/octet-stream")
        self._record(ApiCall("download", {"file_path": file_path}, 404))
        return _json_response({"ok": False, "error_code": 404, "description": "Not Found"}, 404)

    def _send_chat_action(self, params: JSONDict) -> bool:
        self.chat_actions.append(
            ChatAction(params["chat_id"], params["action"], params.get("message_thread_id"))
        )
        return True

    @staticmethod
    def _scope_key(params: JSONDict) -> tuple[str, str]:
        scope = params.get("scope") or {}
        return scope.get("type", "default"), params.get("language_code") or ""

    def _set_my_commands(self, params: JSONDict) -> bool:
        self._commands[self._scope_key(params)] = list(params.get("commands") or [])
        return True

    def _delete_webhook(self, params: JSONDict) -> bool:
        self.webhook_url = ""
        if params.get("drop_pending_updates"):
            self._pending.clear()
        return True

    def _set_webhook(self, params: JSONDict) -> bool:
        self.webhook_url = params.get("url") or ""
        if params.get("drop_pending_updates"):
            self._pending.clear()
        return True

    def _edit_message_text(self, params: JSONDict) -> JSONDict | bool:
        if params.get("inline_message_id"):
            return True
        key = (params.get("chat_id"), params.get("message_id"))
        original = self._messages.get(key)  # type: ignore[arg-type]
        if original is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        markup = params.get("reply_markup")
        if original.get("text") == params.get("text") and original.get("reply_markup") == markup:
            raise ApiError(
                400,
                "Bad Request: message is not modified: specified new message "
                "content and reply markup are exactly the same as a current "
                "content and reply markup of the message",
            )
        edited = {**original, "text": params.get("text"), "edit_date": self._now()}
        edited.pop("reply_markup", None)
        if isinstance(markup, dict):
            edited["reply_markup"] = markup
        self._messages[key] = edited  # type: ignore[index]
        return edited

    def _delete_message(self, params: JSONDict) -> bool:
        if self._messages.pop((params.get("chat_id"), params.get("message_id")), None) is None:  # type: ignore[arg-type]
            raise ApiError(400, "Bad Request: message to delete not found")
        return True
