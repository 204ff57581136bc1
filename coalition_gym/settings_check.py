"""Type checks for settings given as text (``--set key=value``, YAML, gym.make keywords).

A dataclass field annotated with a plain type (``int``, ``float``, ``str``, ``bool``, or one of
them ``| None``) must get a value of that type: an int is a fine float, a bool is not a number.
Richer annotations (mappings, sequences, ``Any``) are left to the class's own checks.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Mapping

from .errors import ConfigError

_PLAIN = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _accepts(kind: type, value: Any) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def _plain_types(annotation: Any) -> tuple[list[type], bool] | None:
    """The plain types an annotation allows and whether None is allowed; None for anything richer."""
    if annotation in _PLAIN:
        return [annotation], False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        kinds = [a for a in args if a is not type(None)]
        if all(k in _PLAIN for k in kinds):
            return kinds, len(kinds) < len(args)
    return None


def check_setting_types(cls: type, values: Mapping[str, Any], where: str) -> None:
    """Refuse a value whose type its field does not allow, naming the field and what it takes."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if field.name not in values:
            continue
        plain = _plain_types(hints.get(field.name))
        value = values[field.name]
        if plain is None or (value is None and plain[1]) or any(_accepts(k, value) for k in plain[0]):
            continue
        wanted = " or ".join(_PLAIN[k] for k in plain[0]) + (" or none" if plain[1] else "")
        raise ConfigError(f"{where}: {field.name}={value!r} must be {wanted}")
