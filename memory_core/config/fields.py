"""The convention every settings section follows: a field carries its documentation (from
which `config.example.toml` is generated), the environment variable that overrides it,
whether it is a secret and, for a few, a check of its value; a section is a frozen value
object compared by its fields. Apart from the sections themselves so both families of
sections (config/memory.py, config/services.py), the checks (config/checks.py) and the
loader (config/__init__.py) share one definition.

Not pydantic models, nor even dataclasses: every command builds the config, and pydantic
cost ~75 ms of each start (its import and the models' classes) to hold defaults that
nothing from outside had set; `@dataclass` then cost ~10 ms more, compiling `__init__`,
`__repr__`, `__eq__` and `__setattr__` for each of the 15 sections. `Section` does the
same once for all of them (and, through `dataclass_transform`, type checkers see each
section's fields as a dataclass's). Values from a file or the environment are checked as
strictly as pydantic's strict mode did, by config/checks.py.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import FrozenInstanceError
from functools import partial
from typing import Any, ClassVar, Self, dataclass_transform

Check = Callable[[Any], str | None]
"""A value's own rule past its type: a message (e.g. "must be >= 1") when it breaks it."""


class Field:
    """One field of a section: its name (set when the section class is made), its default
    (`default`, or `factory` for a list, a table or a section) and its conventions. A
    plain class: a dataclass would cost its compiled methods at every start."""

    __slots__ = ("check", "default", "doc", "env", "factory", "name", "secret", "section")

    def __init__(
        self,
        default: Any,
        factory: Callable[[], Any] | None = None,
        *,
        doc: str = "",
        env: str | None = None,
        secret: bool = False,
        check: Check | None = None,
        section: type[Section] | None = None,
    ) -> None:
        self.default = default
        self.factory = factory
        self.doc = doc
        self.env = env
        self.secret = secret
        self.check = check
        self.section = section
        self.name = ""

    @property
    def repr(self) -> bool:
        """Whether the section's repr shows it (a secret never)."""
        return not self.secret

    def make_default(self) -> Any:
        return self.factory() if self.factory is not None else self.default


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
    factory = partial(type(default), default) if isinstance(default, list | dict) else None
    return Field(default, factory, doc=doc, env=env, secret=secret, check=check)


def part(section: type[Section]) -> Any:
    """A field that holds a whole section (a `[table]` of the file), its defaults unless
    given."""
    return Field(None, section, section=section)


def fields(section: type[Section] | Section) -> tuple[Field, ...]:
    """The section's fields, in the order the class declares them."""
    return section.FIELDS


def values_of(section: Section) -> dict[str, Any]:
    """The section's values by name (a nested section stays a section)."""
    return {info.name: getattr(section, info.name) for info in section.FIELDS}


def as_dict(section: Section) -> dict[str, Any]:
    """The section as the tables of a file would give it: nested sections as dicts."""
    return {
        name: as_dict(value) if isinstance(value, Section) else value
        for name, value in values_of(section).items()
    }


def at_least(bound: float) -> Check:
    """Check: the value is >= bound."""
    return lambda value: None if value >= bound else f"must be >= {bound:g}"


def above(bound: float) -> Check:
    """Check: the value is > bound."""
    return lambda value: None if value > bound else f"must be > {bound:g}"


@dataclass_transform(frozen_default=True)
class Section:
    """One `[section]` of chatmem.toml (and the whole file, `Config`): each field declared
    as `name: type = setting(...)` (or `= part(Section)`), made by keyword, frozen,
    compared and hashed by its values, shown without its secrets."""

    FIELDS: ClassVar[tuple[Field, ...]] = ()

    def __init_subclass__(cls, *, before: str | None = None, **kwargs: Any) -> None:
        """`before` names an inherited field the subclass's own fields go in front of (a
        file extended by its caller keeps its tables' order); by default they go last."""
        super().__init_subclass__(**kwargs)
        own: list[Field] = []
        for name in inspect.get_annotations(cls):
            declared = cls.__dict__.get(name)
            if isinstance(declared, Field):
                declared.name = name
                own.append(declared)
                delattr(cls, name)  # the instance holds the value
        inherited = cls.FIELDS
        at = next((i for i, f in enumerate(inherited) if f.name == before), len(inherited))
        if before is not None and at == len(inherited):
            raise TypeError(f"{cls.__name__}: no inherited field {before!r} to go before")
        cls.FIELDS = (*inherited[:at], *own, *inherited[at:])

    def __init__(self, **values: Any) -> None:
        for info in self.FIELDS:
            value = values.pop(info.name) if info.name in values else info.make_default()
            object.__setattr__(self, info.name, value)
        if values:
            unknown = ", ".join(sorted(values))
            raise TypeError(f"{type(self).__name__} has no field {unknown}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in self.FIELDS)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, f.name) for f in self.FIELDS))

    def __repr__(self) -> str:
        shown = (f"{f.name}={getattr(self, f.name)!r}" for f in self.FIELDS if f.repr)
        return f"{type(self).__name__}({', '.join(shown)})"

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Self:
        """A copy with some fields replaced, unchecked, as pydantic's method of this name
        (which callers and tests use) did: the values come from code, not from a file."""
        return type(self)(**{**values_of(self), **(update or {})})
