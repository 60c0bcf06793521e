"""Values from a config file or the environment made into sections, strictly: a value of
the wrong type is an error, never coerced (a quoted number, a 1 for true), an unknown
key is an error, and a field's own check (`setting(check=...)`) runs once its type is
right. The types a section may use are the ones TOML gives: str, bool, int, float (an
int is taken as a float), `Literal` strings, `list[...]`, `dict[str, ...]` and sections.

Only a command whose config file or environment sets something runs this (the defaults
need no check: a test checks they pass); pydantic's strict mode did the same for ~75 ms
of every start (config/fields.py).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from memory_core.config.fields import Section, fields

Loc = tuple[str | int, ...]
S = TypeVar("S", bound=Section)

EXPECTED = {
    bool: "true or false",
    int: "a whole number",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "a table",
}


class Invalid(Exception):
    """The first value that does not fit: where (`loc`, keys and list positions), and
    either what was expected of it (`expected`, with the `value` found) or the broken
    rule's `message`; `unknown` for a key no section has."""

    def __init__(
        self,
        loc: Loc,
        *,
        expected: str = "",
        value: Any = None,
        message: str = "",
        unknown: bool = False,
    ) -> None:
        super().__init__(loc, expected or message)
        self.loc = loc
        self.expected = expected
        self.value = value
        self.message = message
        self.unknown = unknown


def build(cls: type[S], data: Any, loc: Loc = ()) -> S:
    """`cls` from a table of values; `Invalid` for the first that does not fit."""
    if not isinstance(data, dict):
        raise Invalid(loc, expected=EXPECTED[dict], value=data)
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for info in fields(cls):
        if info.name not in data:
            continue
        where = (*loc, info.name)
        value = _value(hints[info.name], data[info.name], where)
        check = info.check
        if check is not None and (problem := check(value)):
            raise Invalid(where, message=problem)
        values[info.name] = value
    for key in data:
        if key not in hints:
            raise Invalid((*loc, key), unknown=True)
    return cls(**values)


def _value(kind: Any, value: Any, loc: Loc) -> Any:
    """`value` as a field of type `kind` holds it (an int as a float), else `Invalid`."""
    origin = typing.get_origin(kind)
    if isinstance(kind, type) and issubclass(kind, Section):
        return build(kind, value, loc)
    if origin is Literal:
        choices = typing.get_args(kind)
        if isinstance(value, str) and value in choices:
            return value
        raise Invalid(loc, expected=f"one of {_choices(choices)}", value=value)
    if origin is list:
        if not isinstance(value, list):
            raise Invalid(loc, expected=EXPECTED[list], value=value)
        (item,) = typing.get_args(kind)
        return [_value(item, one, (*loc, i)) for i, one in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise Invalid(loc, expected=EXPECTED[dict], value=value)
        _, item = typing.get_args(kind)
        return {key: _value(item, one, (*loc, key)) for key, one in value.items()}
    if kind is float and type(value) is int:
        return float(value)
    # bool is an int to Python, not to a config: only the exact type passes.
    if type(value) is not kind:
        raise Invalid(loc, expected=EXPECTED[kind], value=value)
    return value


def _choices(choices: tuple[Any, ...]) -> str:
    """'a', 'b' or 'c'."""
    shown = [repr(choice) for choice in choices]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


_HINTS: dict[type, Mapping[str, Any]] = {}


def _hints(cls: type) -> Mapping[str, Any]:
    """The section's field types, its string annotations resolved once."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]
