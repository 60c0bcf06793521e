"""Photos and files as text: what a chat platform's attachment becomes in memory.

Memory stores and indexes text, so an attachment is stored as one user message that says
what it was, e.g. `[photo] sunset at Qingdao beach — description: ...` or
`[file: report.pdf] Q3 numbers`: "the photo of the sunset I sent you" is then recalled
like any other turn, and the model answering the turn reads the same line. The optional
description comes from an image-capable model on the same OpenAI-compatible server.

Platform code (downloading, picking a photo size) stays in the adapters; this module only
builds text and asks for the description.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass
from typing import Literal

from memory_core.base.text import has_cjk
from memory_core.config.services import LLMSettings
from memory_core.llm.client import LLMClient, Message

MediaKind = Literal["photo", "image", "file"]
"""photo: a platform photo (recompressed JPEG); image: an image sent as a file; file: any
other file (never downloaded)."""

DESCRIBABLE_TYPES = frozenset({"image/jpeg", "image/png", "image/webp", "image/gif"})
"""What OpenAI-compatible vision models accept in an image_url data URI."""

MAX_NAME_CHARS = 120
MAX_DESCRIPTION_CHARS = 400

_LABELS: dict[MediaKind, tuple[str, str]] = {
    "photo": ("photo", "照片"),
    "image": ("image", "图片"),
    "file": ("file", "文件"),
}

DESCRIBE_INSTRUCTION = (
    "Describe this image in one plain sentence of at most 40 words: what it shows and any "
    "clearly readable text. No preamble. Write in the language of the sender's caption "
    "if there is one, else in English."
)


@dataclass(frozen=True, slots=True)
class Attachment:
    kind: MediaKind
    caption: str = ""
    file_name: str = ""
    mime_type: str = ""

    @property
    def describable(self) -> bool:
        """Only images in a format the model reads; other files are named, not opened."""
        if self.kind == "photo":
            return True
        return self.kind == "image" and self.mime_type.lower() in DESCRIBABLE_TYPES

    @property
    def image_type(self) -> str:
        """The data URI's type: platforms recompress photos to JPEG."""
        return "image/jpeg" if self.kind == "photo" else self.mime_type.lower()


def media_text(attachment: Attachment, description: str = "") -> str:
    """The stored message. Chinese labels for a Chinese caption, so a Chinese question
    ("我发的照片") finds it by the label's word as well as by the caption's."""
    caption = attachment.caption.strip()
    chinese = has_cjk(caption) if caption else has_cjk(description)
    label = _LABELS[attachment.kind][1 if chinese else 0]
    name = clean_name(attachment.file_name)
    if attachment.kind != "photo" and name:
        label = f"{label}: {name}"
    text = f"[{label}]"
    if caption:
        text = f"{text} {caption}"
    description = one_sentence(description)
    if description:
        word = "描述：" if chinese else "description: "
        text = f"{text} — {word}{description}" if caption else f"{text} {word}{description}"
    return text


def clean_name(name: str) -> str:
    """A file name on one line and of a sane length (the sender chose it)."""
    name = " ".join(name.replace("[", "(").replace("]", ")").split())
    return name if len(name) <= MAX_NAME_CHARS else name[: MAX_NAME_CHARS - 1] + "…"


def one_sentence(text: str) -> str:
    """The model's answer as one line: models add line breaks, quotes and the odd second
    paragraph even when asked not to."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    sentence = lines[0].strip("\"'“”「」 ")
    if len(sentence) > MAX_DESCRIPTION_CHARS:
        sentence = sentence[: MAX_DESCRIPTION_CHARS - 1].rstrip() + "…"
    return sentence


def data_uri(image: bytes | bytearray, mime_type: str) -> str:
    """Base64 of a multi-megabyte image: run it off the event loop (`asyncio.to_thread`)."""
    return f"data:{mime_type};base64,{base64.b64encode(image).decode('ascii')}"


def describe_messages(image_url: str, caption: str) -> list[Message]:
    """One user message with a text part and an image_url part: the chat-completions
    form every OpenAI-compatible vision server (OpenAI, Ollama, vLLM, DashScope) reads."""
    prompt = DESCRIBE_INSTRUCTION
    if caption.strip():
        prompt += f"\nThe sender's caption: {caption.strip()}"
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": prompt},
                {"type": "image_url", "image_url": {"url": image_url}},
            ],
        }
    ]


async def describe_image(
    settings: LLMSettings,
    model: str,
    image: bytes | bytearray,
    mime_type: str,
    caption: str = "",
    *,
    request_timeout: float,
) -> str:
    """One sentence about the image ('' when the model said nothing usable). Raises
    `LLMError` like every model call; the caller decides that a photo without its
    description is still stored. The server, key and retries are the chat model's; the
    client lives for this one call, since photos are rare and the adapter has no place to
    close a long-lived one."""
    url = await asyncio.to_thread(data_uri, image, mime_type)
    client = LLMClient(
        settings.model_copy(
            update={"model": model, "timeout_seconds": request_timeout, "max_retries": 1}
        )
    )
    try:
        reply = await client.chat(describe_messages(url, caption), temperature=0.0)
    finally:
        await client.close()
    return one_sentence(reply.content or "")
