"""The configuration a harness core runs with: the product's defaults, the variant's
overrides, and what the harness itself needs (a workspace, per-peer scopes, a zone)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path

from memory_core.base.scope import DmScope, InboundContext, ScopeKey, resolve_scope
from memory_core.config import Config
from memory_core.config.checks import Invalid, build
from memory_core.config.fields import Section, values_of

Overrides = Mapping[str, Mapping[str, object]]
"""config section -> {key: value}"""

RAW_FOREVER = 100_000
"""`archive.raw_days` that keeps every archived turn verbatim (no summaries)."""


def parse_set(text: str) -> tuple[str, str, object]:
    """'section.key=value' (value read as JSON when it parses, else as a string)."""
    name, sep, raw = text.partition("=")
    section, dot, key = name.strip().partition(".")
    if not sep or not dot or not section or not key:
        raise ValueError(f"--set {text!r}: expected section.key=value")
    try:
        value: object = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return section, key, value


def merge_overrides(*layers: Overrides) -> dict[str, dict[str, object]]:
    """Later layers win, key by key."""
    out: dict[str, dict[str, object]] = {}
    for layer in layers:
        for section, values in layer.items():
            out.setdefault(section, {}).update(values)
    return out


def sets_to_overrides(items: Iterable[str]) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for item in items:
        section, key, value = parse_set(item)
        out.setdefault(section, {})[key] = value
    return out


def apply_overrides(config: Config, overrides: Overrides) -> Config:
    """Each section validated as the config file would be (unknown keys are errors)."""
    update: dict[str, object] = {}
    for section, values in overrides.items():
        current = getattr(config, section, None)
        if not isinstance(current, Section):
            raise ValueError(f"unknown config section {section!r}")
        try:
            update[section] = build(type(current), {**values_of(current), **values}, (section,))
        except Invalid as exc:
            raise ValueError(f"config {'.'.join(map(str, exc.loc))}: {exc}") from None
    return config.model_copy(update=update)


def zone_of(when: datetime) -> str:
    """An IANA name for a timestamp's fixed offset ('UTC', 'Etc/GMT-8' for +08:00), so
    the core's days are the conversation's days."""
    offset = when.utcoffset() or timedelta(0)
    hours, rest = divmod(int(offset.total_seconds()), 3600)
    if rest or not offset:
        return "UTC"
    return f"Etc/GMT{-hours:+d}"


def bench_config(
    workspace: Path, overrides: Overrides, *, timezone: str = "UTC", raw_days: int | None
) -> Config:
    """Defaults (offline: no model), per-peer scopes, then the harness's archive rule
    (`raw_days`, None for the default), then the variant's overrides."""
    config = Config(workspace=str(workspace), dm_scope="per-peer", timezone=timezone)
    if raw_days is not None:
        config = apply_overrides(config, {"archive": {"raw_days": raw_days}})
    return apply_overrides(config, overrides)


def peer_scope(peer: str) -> ScopeKey:
    """The scope a bot gives a direct chat with `peer` under dm_scope = per-peer."""
    context = InboundContext(
        channel="bench", account_id="bench", peer_id=peer, chat_type="direct", chat_id=peer
    )
    return resolve_scope(context, DmScope.PER_PEER)
