"""Embeddings from any OpenAI-compatible `/v1/embeddings` server (OpenAI, Ollama, vLLM,
LiteLLM, DashScope's compatible mode), through the `openai` package's own client.

Retries of rate limits and 5xx are the client's; every failure becomes one
`EmbeddingError`. The answer is checked (one vector per text, in order, all of one
size, finite) and normalised here, since not every server normalises.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memory_core.embedding.base import EmbeddingError, normalised

if TYPE_CHECKING:
    import openai

    from memory_core.embedding.base import Vectors

log = logging.getLogger(__name__)

DEFAULT_REMOTE_MODEL = "text-embedding-3-small"
KNOWN_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072}
"""Sizes known before the first answer; any other model's is learnt from it."""


class OpenAIEmbedder:
    def __init__(
        self,
        model: str = "",
        *,
        base_url: str = "",
        api_key: str = "",
        dimensions: int = 0,
        batch_size: int = 64,
        timeout_seconds: float = 30.0,
        max_retries: int = 2,
        http_client: Any = None,
    ) -> None:
        self._model = model or DEFAULT_REMOTE_MODEL
        self._base_url = base_url
        self._api_key = api_key
        self._dimensions = dimensions
        self._batch_size = max(1, batch_size)
        self._timeout = timeout_seconds
        self._max_retries = max_retries
        self._http_client = http_client
        self._client: openai.AsyncOpenAI | None = None
        self._dim = dimensions or KNOWN_DIMS.get(self._model, 0)

    @property
    def name(self) -> str:
        """The model, and the size asked for when one was: text-embedding-3-small at 256
        dimensions gives other vectors than at 1536, so they must not share a cache."""
        suffix = f"@{self._dimensions}" if self._dimensions else ""
        return f"openai:{self._model}{suffix}"

    @property
    def dim(self) -> int:
        return self._dim

    def _get(self) -> openai.AsyncOpenAI:
        # Imported on first use, as the chat client does: the package takes most of a
        # second to import.
        import openai

        if self._client is None:
            self._client = openai.AsyncOpenAI(
                base_url=self._base_url or None,
                # Local servers (Ollama, vLLM) accept any key; the client insists on one.
                api_key=self._api_key or "not-needed",
                timeout=self._timeout,
                max_retries=self._max_retries,
                http_client=self._http_client,
            )
        return self._client

    async def embed(self, texts: Sequence[str], *, query: bool = False) -> Vectors:
        import numpy as np

        batch = list(texts)
        if not batch:
            return np.zeros((0, self._dim), dtype=np.float32)
        parts = [
            await self._embed_batch(batch[start : start + self._batch_size])
            for start in range(0, len(batch), self._batch_size)
        ]
        out = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return out

    async def _embed_batch(self, texts: list[str]) -> Vectors:
        import numpy as np
        import openai

        kwargs: dict[str, Any] = {
            "model": self._model,
            # OpenAI refuses an empty string; one space embeds as "nothing" just as well.
            "input": [text if text.strip() else " " for text in texts],
            "encoding_format": "float",
        }
        if self._dimensions:
            kwargs["dimensions"] = self._dimensions
        try:
            response = await self._get().embeddings.create(**kwargs)
        except openai.APITimeoutError as exc:
            raise EmbeddingError(
                f"the embedding server timed out after {self._timeout:g}s"
            ) from exc
        except openai.APIStatusError as exc:
            raise EmbeddingError(
                f"the embedding server answered HTTP {exc.status_code}: {_short(exc.message)}"
            ) from exc
        except openai.APIError as exc:
            raise EmbeddingError(
                f"the embedding server could not be reached: {_short(str(exc))}"
            ) from exc
        data = sorted(response.data, key=lambda item: item.index)
        if [item.index for item in data] != list(range(len(texts))):
            raise EmbeddingError(
                f"the embedding server returned {len(data)} vectors for {len(texts)} texts"
            )
        sizes = {len(item.embedding) for item in data}
        if len(sizes) != 1 or 0 in sizes:
            raise EmbeddingError(f"the embedding server returned vectors of sizes {sorted(sizes)}")
        size = sizes.pop()
        if self._dim and size != self._dim:
            raise EmbeddingError(
                f"the embedding server returned {size}-d vectors, expected {self._dim}"
            )
        self._dim = size
        return normalised(np.array([item.embedding for item in data], dtype=np.float32))

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
