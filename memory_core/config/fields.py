"""The convention every settings section follows: a field carries its documentation (from
which `config.example.toml` is generated), the environment variable that overrides it,
whether it is a secret and, for a few, a check of its value; a section is a frozen
dataclass. Apart from the sections themselves so both families of sections
(config/memory.py, config/services.py), the checks (config/checks.py) and the loader
(config/__init__.py) share one definition.

Plain dataclasses, not pydantic models: every command builds the config, and pydantic
cost ~75 ms of each start (its import and the models' classes) to hold defaults that
nothing from outside had set. Values from a file or the environment are checked as
strictly as pydantic's strict mode did, by config/checks.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Self

Check = Callable[[Any], str | None]
"""A value's own rule past its type: a message (e.g. "must be >= 1") when it breaks it."""


def setting(
    default: Any,
    doc: str,
    *,
    env: str | None = None,
    secret: bool = False,
    check: Check | None = None,
) -> Any:
    """A documented field (the docs also make config.example.toml). `env` names the variable
    that overrides it; a secret stays out of repr, so a logged config never leaks it;
    `check` is run on a value from a file or the environment once its type is right.
    A list or table default is copied per instance."""
    metadata = {"doc": doc, "env": env, "secret": secret, "check": check}
    if isinstance(default, list | dict):
        return dataclasses.field(
            default_factory=partial(type(default), default), repr=not secret, metadata=metadata
        )
    return dataclasses.field(default=default, repr=not secret, metadata=metadata)


def part(section: type[Section]) -> Any:
    """A field that holds a whole section (a `[table]` of the file), its defaults unless
    given."""
    return dataclasses.field(default_factory=section)


def section_of(info: dataclasses.Field[Any]) -> type[Section] | None:
    """The section class a field holds (`part`), None for a value."""
    factory = info.default_factory
    if isinstance(factory, type) and issubclass(factory, Section):
        return factory
    return None


def doc_of(info: dataclasses.Field[Any]) -> str:
    return str(info.metadata.get("doc", ""))


def env_of(info: dataclasses.Field[Any]) -> str | None:
    """The environment variable that overrides this field, if any."""
    env = info.metadata.get("env")
    return env if isinstance(env, str) else None


def is_secret(info: dataclasses.Field[Any]) -> bool:
    return bool(info.metadata.get("secret"))


def check_of(info: dataclasses.Field[Any]) -> Check | None:
    check = info.metadata.get("check")
    return check if callable(check) else None


def default_of(info: dataclasses.Field[Any]) -> Any:
    """The value the field gets when nothing sets it."""
    if info.default_factory is not dataclasses.MISSING:
        return info.default_factory()
    return info.default


def at_least(bound: float) -> Check:
    """Check: the value is >= bound."""
    return lambda value: None if value >= bound else f"must be >= {bound:g}"


def above(bound: float) -> Check:
    """Check: the value is > bound."""
    return lambda value: None if value > bound else f"must be > {bound:g}"


class Section:
    """One `[section]` of chatmem.toml (and the whole file, `Config`): a frozen dataclass
    (each subclass is decorated with `settings`)."""

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Self:
        """A copy with some fields replaced, unchecked, as pydantic's method of this name
        (which callers and tests use) did: the values come from code, not from a file."""
        return dataclasses.replace(self, **(update or {}))  # type: ignore[type-var]
