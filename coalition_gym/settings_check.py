"""Settings declared once, checked in one place.

A settings class is a dataclass whose fields say what they accept::

    @dataclass
    class Debate(Protocol):
        rounds: int = setting(3, ge=1, doc="debate rounds, the first included")
        history: str = setting("previous", choices=("previous", "full"))

:func:`check_settings` (called from the settings class's ``__post_init__``; every protocol gets it from
``Protocol``) refuses a value of the wrong type or outside its bounds or choices, naming the class, the
field and what it takes (``debate: rounds=0 must be >= 1``). Type checks read the annotation: a plain
type (``int``, ``float``, ``str``, ``bool``, or one of them ``| None``) must get a value of that type (an
int is a fine float, a bool is not a number); richer annotations (mappings, sequences, ``Any``) are left
to the class's own checks, as is a rule between two fields. ``None`` passes the bounds of a field that
allows it. :func:`describe_setting` gives the same facts as listings (``cgym protocols``) show them.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
import types
import typing
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .errors import ConfigError

_PLAIN = {int: "an integer", float: "a number", str: "a string", bool: "true or false", list: "a list",
          dict: "a mapping"}
_KEY = "coalition_gym.setting"


@dataclass(frozen=True)
class Bounds:
    """What one setting accepts beyond its type: numeric bounds and/or a list of choices."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    choices: tuple[Any, ...] | None = None
    doc: str = ""

    def describe(self) -> str:
        """``>= 1``, ``in (0, 1]``, ``one of a, b``, or '' when nothing beyond the type is asked."""
        if self.choices is not None:
            return "one of " + ", ".join(str(c) for c in self.choices)
        low = (f"[{self.ge}" if self.ge is not None else f"({self.gt}" if self.gt is not None else None)
        high = f"{self.le}]" if self.le is not None else None
        if low and high:
            return f"in {low}, {high}"
        if low:
            return (">= " if self.ge is not None else "> ") + low[1:]
        if high:
            return "<= " + high[:-1]
        return ""

    def allows(self, value: Any) -> bool:
        if self.choices is not None:
            return value in self.choices
        try:  # written as `not value >= ge` so that NaN fails every bound
            return not ((self.ge is not None and not value >= self.ge) or (self.gt is not None and not value > self.gt)
                        or (self.le is not None and not value <= self.le))
        except TypeError:  # a value the type check let through (a rich annotation) that cannot be compared
            return False


def setting(default: Any = dataclasses.MISSING, *, ge: float | None = None, gt: float | None = None,
            le: float | None = None, choices: Sequence[Any] | None = None, doc: str = "", **field_options: Any) -> Any:
    """A dataclass field whose bounds and choices :func:`check_settings` enforces and listings show: ``ge``
    (>=), ``gt`` (>) and ``le`` (<=) bound a number, ``choices`` lists the values allowed, ``doc`` says what
    it is. ``field_options`` go to :func:`dataclasses.field` (``default_factory``, ``compare`` ...)."""
    bounds = Bounds(ge, gt, le, tuple(choices) if choices is not None else None, doc)
    return dataclasses.field(default=default, metadata={_KEY: bounds}, **field_options)


def bounds_of(field: dataclasses.Field) -> Bounds | None:
    return field.metadata.get(_KEY)


def _accepts(kind: type, value: Any) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind is float:
        return isinstance(value, numbers.Real)
    if kind is int:
        return isinstance(value, numbers.Integral)
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


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except (NameError, TypeError):  # a user's class with an annotation that cannot be resolved: no type checks
        return {}


def _type_problem(cls: type, name: str, value: Any, bounds: Bounds | None = None) -> str | None:
    """What the field takes (``an integer >= 1``), when ``value`` is not of its type; else None."""
    plain = _plain_types(_hints(cls).get(name))
    if plain is None or (value is None and plain[1]) or any(_accepts(k, value) for k in plain[0]):
        return None
    within = bounds.describe() if bounds is not None and bounds.choices is None else ""
    return (" or ".join(_PLAIN[k] for k in plain[0]) + (f" {within}" if within else "")
            + (" or none" if plain[1] else ""))


def check_setting_types(cls: type, values: Mapping[str, Any], where: str) -> None:
    """Refuse a value whose type its field does not allow, naming the field and what it takes (for values
    not yet in an object, e.g. options read from a file)."""
    for field in dataclasses.fields(cls):
        if field.name in values:
            wanted = _type_problem(cls, field.name, values[field.name], bounds_of(field))
            if wanted is not None:
                raise ConfigError(f"{where}: {field.name}={values[field.name]!r} must be {wanted}")


def check_values(cls: type, values: Mapping[str, Any], where: str) -> None:
    """The one check: every value given for a field of the settings class ``cls`` (in field order) has its
    type and is within its bounds and choices. Fields not in ``values`` are not checked."""
    for field in dataclasses.fields(cls):
        if field.name not in values:
            continue
        value, bounds = values[field.name], bounds_of(field)
        wanted = _type_problem(cls, field.name, value, bounds)
        if wanted is not None:
            raise ConfigError(f"{where}: {field.name}={value!r} must be {wanted}")
        if bounds is None or value is None or bounds.allows(value):
            continue
        if bounds.choices is not None:
            raise ConfigError(f"{where}: {field.name}={value!r}; use {bounds.describe()}")
        raise ConfigError(f"{where}: {field.name}={value} must be {bounds.describe()}")


def check_settings(obj: Any, where: str | None = None) -> None:
    """The one check of a settings object: every field's type, bounds and choices, in field order.
    ``where`` (default: the object's ``name``, else its class name) starts the message."""
    where = where or getattr(obj, "name", None) or type(obj).__name__
    check_values(type(obj), {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}, where)


def describe_setting(field: dataclasses.Field, default: Any = dataclasses.MISSING) -> str:
    """``rounds=3 (>= 1)``: a setting with its default (when given) and what it accepts, as listings show it."""
    bounds = bounds_of(field)
    accepts = bounds.describe() if bounds is not None else ""
    shown = field.name if default is dataclasses.MISSING else f"{field.name}={default!r}"
    return shown + (f" ({accepts})" if accepts else "")


def setting_names(cls: type) -> list[str]:
    """The settings (init fields) of a settings class, in declaration order."""
    return [f.name for f in dataclasses.fields(cls) if f.init]
