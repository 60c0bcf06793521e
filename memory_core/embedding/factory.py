"""The embedder the settings ask for, or None for BM25 alone."""

from __future__ import annotations

import logging

from memory_core.base.errors import ConfigError, install_hint
from memory_core.config.services import EmbeddingSettings
from memory_core.embedding.base import Embedder
from memory_core.embedding.local import LOCAL_MODELS, local_model_available

log = logging.getLogger(__name__)


def build_embedder(settings: EmbeddingSettings, *, http_client: object = None) -> Embedder | None:
    """Nothing is loaded or contacted here: a local model loads at its first use, a
    server is first called by the first embedding.

    "auto" never fails for a missing optional package (it means BM25 alone); "local"
    and "openai" say in one line what is missing, since the person asked for them.
    `http_client` is handed to the openai client (tests point it at a fake server).
    """
    provider = settings.provider
    if provider == "none":
        return None
    if provider == "openai":
        if not _numpy_installed():
            raise ConfigError(
                f"embedding.provider = 'openai' needs numpy: {install_hint('vector')}"
            )
        from memory_core.embedding.remote import OpenAIEmbedder

        return OpenAIEmbedder(
            settings.model,
            base_url=settings.base_url,
            api_key=settings.api_key,
            dimensions=settings.dimensions,
            batch_size=settings.batch_size,
            timeout_seconds=settings.timeout_seconds,
            max_retries=settings.max_retries,
            http_client=http_client,
        )
    if settings.model and settings.model not in LOCAL_MODELS:
        known = ", ".join(sorted(LOCAL_MODELS))
        raise ConfigError(f"embedding.model {settings.model!r} is no local model (known: {known})")
    if not local_model_available(settings.model):
        if provider == "auto":
            log.debug("no local embedding model installed: recall by words alone")
            return None
        raise ConfigError(
            "embedding.provider = 'local' needs the local model package: " + install_hint("vector")
        )
    from memory_core.embedding.local import LocalEmbedder

    return LocalEmbedder(settings.model, cache=settings.model_cache)


def _numpy_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("numpy") is not None


def why_no_embedder(settings: EmbeddingSettings) -> str:
    """Why `build_embedder` gave none, and how to have one, in a clause a command's
    "searched by words only: …" line ends with."""
    if settings.provider == "none":
        return (
            "embedding.provider is 'none' (set it to 'auto', with the vector extra "
            "installed, to search by meaning too)"
        )
    if settings.provider in ("auto", "local") and not local_model_available(settings.model):
        return (
            f"no embedding model is installed ({install_hint('vector')} to search by meaning too)"
        )
    return "no embedder is configured"
