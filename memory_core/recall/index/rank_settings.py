"""The ranking's constants, read from `[recall]` in one place.

A ranking knob is a setting of `[recall]` (memory_core/config/memory.py writes its
default and its documentation once); `RankSettings` names the ones the ranking steps read,
typed, and `rank_settings` copies them from a `RecallSettings` by name. A knob is thus
written in the config and in the field list here, never as a second default or a
second copy by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from memory_core.config.memory import RecallSettings

_DEFAULTS = RecallSettings()
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class _Knob:
    """Placeholder of a field whose default is `[recall]`'s (see `_from_recall`)."""

    source: str | None = None
    convert: Callable[[Any], Any] | None = None


def knob(source: str | None = None, convert: Callable[[Any], Any] | None = None) -> Any:
    """A field read from `[recall]`: the setting of the same name (or `source`), its value
    passed through `convert` (a list becomes a tuple: settings stay hashable)."""
    return _Knob(source, convert)


_SOURCES: dict[str, tuple[str, Callable[[Any], Any] | None]] = {}
"""RankSettings field -> (its `[recall]` setting, conversion)."""


def _from_recall(cls: type[_T]) -> type[_T]:
    """Give each `knob()` field its `[recall]` default, and note where it is read from."""
    for name in cls.__annotations__:
        declared = cls.__dict__.get(name)
        if isinstance(declared, _Knob):
            source = declared.source or name
            _SOURCES[name] = (source, declared.convert)
            setattr(cls, name, _read(_DEFAULTS, source, declared.convert))
    return cls


def _read(recall: RecallSettings, source: str, convert: Callable[[Any], Any] | None) -> Any:
    value = getattr(recall, source)
    return convert(value) if convert is not None else value


@dataclass(frozen=True, slots=True)
@_from_recall
class RankSettings:
    """What the ranking steps read; the defaults are `[recall]`'s (see the setting of the
    same name in config/memory.py for what each does). The last two are no settings."""

    context_weights: tuple[float, ...] = knob("context_window", tuple)
    fusion: str = knob()
    dense_weight: float = knob()
    turn_dense_floor: float = knob()
    turn_dense_weight: float = knob()
    turn_window_max: bool = knob()
    dense_feedback: int = knob()
    dense_feedback_weight: float = knob()
    lexical_feedback: int = knob()
    time_boost: float = knob()
    spoken_time_boost: float = knob()
    long_term_boost: float = knob()
    summary_factor: float = knob()
    recency_boost: float = knob()
    recency_half_life_days: float = knob()
    duplicate_similarity: float = knob()
    speaker_weight: float = knob()
    exchange_documents: bool = knob()
    speaker_names: bool = knob()
    reply_anchors: bool = knob()
    answer_boost: float = knob()
    question_factor: float = knob()
    other_speaker_factor: float = knob()
    session_repeat: float = knob()
    rrf_k: int = 60
    """Reciprocal-rank fusion's k ('rrf')."""
    time_near_days: int = 3
    """Within this many days of the window, half the boost (dates are remembered loosely)."""


def rank_settings(recall: RecallSettings) -> RankSettings:
    """The ranking's constants from the `[recall]` section: the one place they are read."""
    return RankSettings(
        **{name: _read(recall, source, convert) for name, (source, convert) in _SOURCES.items()}
    )
