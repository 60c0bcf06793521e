"""The fake Telegram Bot API's users' side: the updates, messages, photos, documents and
callback queries a test queues for the bot, shaped as Telegram sends them (entities in
UTF-16 units, a message id per chat, files fetched through getFile).

`FakeTelegramAPI` (testkit/telegram_api.py) mixes `TelegramUpdates` in and holds the
state; this module only builds what users send.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

JSONDict = dict[str, Any]

_COMMAND_RE = re.compile(r"/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?")
_MENTION_RE = re.compile(r"(?<![A-Za-z0-9_@/])@[A-Za-z][A-Za-z0-9_]{4,31}(?![A-Za-z0-9_])")


def utf16_len(text: str) -> int:
    """Telegram measures entity offsets/lengths in UTF-16 code units, not code points."""
    return len(text.encode("utf-16-le")) // 2


def build_entities(text: str) -> list[JSONDict]:
    """The entities Telegram attaches to plain user text: a leading `bot_command` and
    every `@username` mention, so PTB's CommandHandler and mention filters see real data."""
    entities: list[JSONDict] = []
    if match := _COMMAND_RE.match(text):
        entities.append({"type": "bot_command", "offset": 0, "length": utf16_len(match.group())})
    for match in _MENTION_RE.finditer(text):
        entities.append(
            {
                "type": "mention",
                "offset": utf16_len(text[: match.start()]),
                "length": utf16_len(match.group()),
            }
        )
    return entities


class TelegramUpdates:
    """Builders of what users send: each queues an update for the bot and returns it."""

    bot_user: JSONDict
    _clock: Callable[[], datetime] | None
    _pending: deque[JSONDict]
    _last_update_id: int
    _last_message_id: dict[int | str, int]
    _messages: dict[tuple[int | str, int], JSONDict]
    _chats: dict[int | str, JSONDict]
    _files: dict[str, tuple[str, bytes]]

    def _notify(self) -> None:
        raise NotImplementedError  # the server wakes its long polls

    def add_update(self, update: JSONDict) -> JSONDict:
        """Queue a raw update (an `update_id` is assigned when missing) and wake long polls."""
        if "update_id" not in update:
            update = {"update_id": self._last_update_id + 1, **update}
        self._last_update_id = max(self._last_update_id, update["update_id"])
        message = update.get("message") or update.get("edited_message")
        if message is not None:
            self._remember(message)
        self._pending.append(update)
        self._notify()
        return update

    def add_private_message(
        self,
        user_id: int,
        text: str,
        *,
        first_name: str = "Alice",
        username: str | None = None,
        language_code: str | None = None,
        message_id: int | None = None,
        reply_to_bot: bool = False,
        entities: list[JSONDict] | None = None,
    ) -> JSONDict:
        user = self._user(user_id, first_name, username, language_code)
        chat = {k: v for k, v in user.items() if k in ("id", "first_name", "username")}
        chat["type"] = "private"
        message = self._user_message(
            chat, user, text, message_id, None, False, reply_to_bot, entities
        )
        return self.add_update({"message": message})

    def add_file(self, content: bytes, *, file_path: str | None = None) -> JSONDict:
        """A file the client can fetch (getFile, then download); returns the id fields
        (file_id, file_unique_id, file_size) a PhotoSize or Document carries."""
        number = len(self._files) + 1
        file_id = f"file-{number}-{len(content)}"
        self._files[file_id] = (file_path or f"documents/file_{number}", content)
        return {"file_id": file_id, "file_unique_id": f"u{number}", "file_size": len(content)}

    def photo_sizes(self, image: bytes, *, width: int = 1280, height: int = 960) -> list[JSONDict]:
        """Sizes of one photo, smallest first, as Telegram sends them: a thumbnail (its own
        bytes, so a test can tell which size was downloaded) and the full image."""
        number = len(self._files) + 1
        thumb = b"thumbnail of " + image[:32]
        return [
            {**self.add_file(thumb, file_path=f"photos/file_{number}_s.jpg"), "width": 90,
             "height": 90 * height // width},
            {**self.add_file(image, file_path=f"photos/file_{number}.jpg"), "width": width,
             "height": height},
        ]  # fmt: skip

    def document(self, content: bytes, *, file_name: str, mime_type: str) -> JSONDict:
        """A Document object for a file sent "as a file" (no recompression)."""
        fields = self.add_file(content, file_path=f"documents/{file_name}")
        return {**fields, "file_name": file_name, "mime_type": mime_type}

    def add_private_photo(
        self,
        user_id: int,
        image: bytes,
        *,
        caption: str | None = None,
        first_name: str = "Alice",
        message_id: int | None = None,
        sizes: list[JSONDict] | None = None,
    ) -> JSONDict:
        """A photo in a private chat; `sizes` replaces the PhotoSize list (e.g. with a
        `file_size` that lies, or a single size)."""
        media = {"photo": sizes if sizes is not None else self.photo_sizes(image)}
        return self._add_private_media(user_id, media, caption, first_name, message_id)

    def add_private_document(
        self,
        user_id: int,
        content: bytes,
        *,
        file_name: str,
        mime_type: str = "application/octet-stream",
        caption: str | None = None,
        first_name: str = "Alice",
        message_id: int | None = None,
    ) -> JSONDict:
        media = {"document": self.document(content, file_name=file_name, mime_type=mime_type)}
        return self._add_private_media(user_id, media, caption, first_name, message_id)

    def add_group_photo(
        self,
        chat_id: int,
        user_id: int,
        image: bytes,
        *,
        caption: str | None = None,
        reply_to_bot: bool = False,
        first_name: str = "Alice",
        title: str = "Team",
    ) -> JSONDict:
        chat: JSONDict = {"id": chat_id, "type": "supergroup", "title": title}
        user = self._user(user_id, first_name, None, None)
        message = self._user_message(chat, user, "", None, None, False, reply_to_bot, [])
        media = {"photo": self.photo_sizes(image)}
        return self.add_update({"message": self._as_media(message, media, caption)})

    def _add_private_media(
        self,
        user_id: int,
        media: JSONDict,
        caption: str | None,
        first_name: str,
        message_id: int | None,
    ) -> JSONDict:
        user = self._user(user_id, first_name, None, None)
        chat = {"id": user_id, "first_name": first_name, "type": "private"}
        message = self._user_message(chat, user, "", message_id, None, False, False, [])
        return self.add_update({"message": self._as_media(message, media, caption)})

    @staticmethod
    def _as_media(message: JSONDict, media: JSONDict, caption: str | None) -> JSONDict:
        """A text message turned into a media one: no text, the media fields, and the
        caption with its own entities (mentions in captions are caption_entities)."""
        message = {k: v for k, v in message.items() if k not in ("text", "entities")}
        message.update(media)
        if caption is not None:
            message["caption"] = caption
            if entities := build_entities(caption):
                message["caption_entities"] = entities
        return message

    def add_group_message(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        chat_type: Literal["group", "supergroup"] = "supergroup",
        title: str = "Team",
        thread_id: int | None = None,
        is_topic_message: bool | None = None,
        reply_to_bot: bool = False,
        first_name: str = "Alice",
        username: str | None = None,
        language_code: str | None = None,
        message_id: int | None = None,
        entities: list[JSONDict] | None = None,
    ) -> JSONDict:
        """A group message. With `thread_id` in a supergroup it is a forum-topic message
        (`is_topic_message` defaults to True) and, like real Telegram, its
        `reply_to_message` is the topic's creation message unless it replies to the bot."""
        if is_topic_message is None:
            is_topic_message = thread_id is not None and chat_type == "supergroup"
        chat: JSONDict = {"id": chat_id, "type": chat_type, "title": title}
        if is_topic_message:
            chat["is_forum"] = True
        user = self._user(user_id, first_name, username, language_code)
        message = self._user_message(
            chat, user, text, message_id, thread_id, is_topic_message, reply_to_bot, entities
        )
        return self.add_update({"message": message})

    def add_callback_query(
        self, user_id: int, data: str, *, message: JSONDict, first_name: str = "Alice"
    ) -> JSONDict:
        """A button press on `message` (e.g. `fake.sent_messages[-1].message`)."""
        query = {
            "id": f"cq{self._last_update_id + 1}",
            "from": self._user(user_id, first_name, None, None),
            "chat_instance": f"ci{message['chat']['id']}",
            "data": data,
            "message": message,
        }
        return self.add_update({"callback_query": query})

    def _now(self) -> int:
        return int(self._clock().timestamp()) if self._clock else int(time.time())

    @staticmethod
    def _user(user_id: int, first_name: str, username: str | None, lang: str | None) -> JSONDict:
        user: JSONDict = {"id": user_id, "is_bot": False, "first_name": first_name}
        if username:
            user["username"] = username
        if lang:
            user["language_code"] = lang
        return user

    def _chat_for(self, chat_id: Any) -> JSONDict:
        if chat_id in self._chats:
            return self._chats[chat_id]
        if isinstance(chat_id, int) and chat_id > 0:
            return {"id": chat_id, "type": "private", "first_name": "User"}
        return {"id": chat_id, "type": "supergroup", "title": "Group"}

    def _next_message_id(self, chat_id: int | str) -> int:
        self._last_message_id[chat_id] = self._last_message_id.get(chat_id, 0) + 1
        return self._last_message_id[chat_id]

    def _new_message(
        self,
        chat: JSONDict,
        sender: JSONDict,
        text: str,
        thread_id: int | None,
        message_id: int | None = None,
    ) -> JSONDict:
        message: JSONDict = {
            "message_id": message_id or self._next_message_id(chat["id"]),
            "date": self._now(),
            "chat": chat,
            "from": sender,
            "text": text,
        }
        if thread_id is not None:
            message["message_thread_id"] = thread_id
        return message

    def _user_message(
        self,
        chat: JSONDict,
        user: JSONDict,
        text: str,
        message_id: int | None,
        thread_id: int | None,
        is_topic: bool,
        reply_to_bot: bool,
        entities: list[JSONDict] | None,
    ) -> JSONDict:
        self._chats.setdefault(chat["id"], chat)
        if thread_id is not None:  # messages in a thread come after its root message
            last = self._last_message_id.get(chat["id"], 0)
            self._last_message_id[chat["id"]] = max(last, thread_id)
        reply_to: JSONDict | None = None
        if reply_to_bot:
            reply_to = self._new_message(chat, self.bot_user, "(earlier bot reply)", thread_id)
            if is_topic:
                reply_to["is_topic_message"] = True
            self._remember(reply_to)
        elif is_topic:  # the topic's creation message, as Telegram reports it
            reply_to = self._new_message(chat, user, "", thread_id, message_id=thread_id)
            del reply_to["text"]
            reply_to["forum_topic_created"] = {"name": "Topic", "icon_color": 7322096}
        message = self._new_message(chat, user, text, thread_id, message_id)
        if message_id is not None:  # later generated ids stay above explicit ones
            last = self._last_message_id.get(chat["id"], 0)
            self._last_message_id[chat["id"]] = max(last, message_id)
        if is_topic:
            message["is_topic_message"] = True
        if reply_to is not None:
            message["reply_to_message"] = reply_to
        found = build_entities(text) if entities is None else entities
        if found:
            message["entities"] = found
        return message

    def _remember(self, message: JSONDict) -> None:
        self._messages[(message["chat"]["id"], message["message_id"])] = message
