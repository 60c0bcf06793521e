"""The convention every settings section follows: a field carries its documentation (from
which `config.example.toml` is generated), the environment variable that overrides it and
whether it is a secret; a section is frozen, strict and refuses unknown keys. Apart from
the sections themselves so both families of sections (config/memory.py, config/services.py)
and the loader (config/__init__.py) share one definition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.fields import FieldInfo


def setting(default: Any, doc: str, *, env: str | None = None, secret: bool = False) -> Any:
    """A documented field (the docs also make config.example.toml). `env` names the variable
    that overrides it; a secret stays out of repr, so a logged config never leaks it.
    (Field descriptions, not attribute docstrings: those cost ~50 ms of source parsing at
    import. Mutable defaults are fine: pydantic copies them per instance.)"""
    extra: dict[str, Any] = {"env": env} if env else {}
    if secret:
        extra["secret"] = True
    return Field(default, description=doc, repr=not secret, json_schema_extra=extra)


def field_extra(info: FieldInfo) -> Mapping[str, Any]:
    """What `setting` recorded beside the description: "env" and "secret" when given."""
    return info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}


M = TypeVar("M", bound=BaseModel)


def defaults_of(cls: type[M]) -> M:
    """`cls()` built without validating: its defaults are values the code itself wrote
    (test_config checks that they validate and equal `cls()`), and validating them first
    builds the validator of the class and of every section in it, tens of milliseconds
    of a command's start (bench/cli_bench.py) for nothing to check."""
    sections: dict[str, Any] = {}
    for name, info in cls.model_fields.items():
        factory = info.default_factory
        if isinstance(factory, type) and issubclass(factory, BaseModel):
            sections[name] = defaults_of(factory)
    return cls.model_construct(_fields_set=set(), **sections)


class Section(BaseModel):
    """One `[section]` of chatmem.toml."""

    # defer_build: schemas are built on first use, so `chatmem --help` does not pay for them.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)
