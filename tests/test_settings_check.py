"""Settings declared on dataclass fields (``setting(...)``) and checked in one place (``check_settings``)."""

import dataclasses
import math
from dataclasses import dataclass

import pytest

from coalition_gym.errors import ConfigError
from coalition_gym.settings_check import Bounds, check_settings, check_values, describe_setting, setting


@dataclass
class Knobs:
    name = "knobs"

    count: int = setting(3, ge=1)
    share: float = setting(0.5, gt=0, le=1)
    mode: str = setting("fast", choices=("fast", "slow"))
    limit: float | None = setting(None, ge=0)
    free: object = None  # a rich annotation: left to the class's own checks

    def __post_init__(self):
        check_settings(self)


@pytest.mark.parametrize("bounds, text", [
    (Bounds(ge=1), ">= 1"), (Bounds(gt=0), "> 0"), (Bounds(le=1), "<= 1"),
    (Bounds(ge=0, le=1), "in [0, 1]"), (Bounds(gt=0, le=1), "in (0, 1]"),
    (Bounds(choices=("a", "b")), "one of a, b"), (Bounds(), ""),
])
def test_bounds_read_as_listings_show_them(bounds, text):
    assert bounds.describe() == text


@pytest.mark.parametrize("values, message", [
    ({"count": 0}, "knobs: count=0 must be >= 1"),
    ({"count": "two"}, "knobs: count='two' must be an integer >= 1"),
    ({"count": True}, "knobs: count=True must be an integer >= 1"),  # a bool is no number
    ({"share": 0}, r"knobs: share=0 must be in \(0, 1\]"),
    ({"share": math.nan}, r"knobs: share=nan must be in \(0, 1\]"),  # NaN fails every bound
    ({"mode": "medium"}, "knobs: mode='medium'; use one of fast, slow"),
    ({"limit": -1.0}, "knobs: limit=-1.0 must be >= 0"),
    ({"limit": "x"}, "knobs: limit='x' must be a number >= 0 or none"),
])
def test_a_bad_value_is_refused_naming_the_field_and_what_it_takes(values, message):
    with pytest.raises(ConfigError, match=f"^{message}$"):
        Knobs(**values)


def test_good_values_pass_and_none_passes_an_optional_fields_bounds():
    knobs = Knobs(count=1, share=1, mode="slow", limit=None, free=[1])
    assert (knobs.count, knobs.share, knobs.limit) == (1, 1, None)
    check_values(Knobs, {"count": 2}, "given")  # only the given keys are checked
    with pytest.raises(ConfigError, match="^given: count=0 must be >= 1$"):
        check_values(Knobs, {"count": 0}, "given")


def test_a_setting_is_described_with_its_default_and_bounds():
    from dataclasses import fields

    shown = [describe_setting(f, getattr(Knobs(), f.name)) for f in fields(Knobs)]
    assert shown == ["count=3 (>= 1)", "share=0.5 (in (0, 1])", "mode='fast' (one of fast, slow)",
                     "limit=None (>= 0)", "free=None"]


def _registered_settings_classes():
    """Every settings class a registry holds: recipes' settings, backends' options, protocols, simulated
    agents' profiles."""
    import coalition_gym  # noqa: F401  (registers everything)
    from coalition_gym.agents.backends import BACKENDS
    from coalition_gym.agents.simulated import AgentProfile
    from coalition_gym.envs.protocols import PROTOCOLS
    from coalition_gym.training.recipes import RECIPES

    classes = [r.settings for r in RECIPES.values()] + list(PROTOCOLS.values()) + [AgentProfile]
    return classes + [b.options for b in BACKENDS.values() if isinstance(b.options, type)]


#: plain-string fields that name something (a model, task, pool, folder ...) rather than pick from a list
FREE_TEXT = {"name", "protocol", "task", "collaborators", "device", "out", "lora_target", "method", "policy",
             "policy_name", "revision", "base_url", "api_key_env", "error_group", "ranker", "fuser", "aggregator",
             "summariser", "router", "profile", "policy_weights"}


def test_every_numeric_setting_has_bounds_and_every_enumerated_one_choices():
    import dataclasses

    from coalition_gym.settings_check import _hints, _plain_types, bounds_of

    loose = []
    for cls in _registered_settings_classes():
        for f in dataclasses.fields(cls):
            plain = _plain_types(_hints(cls).get(f.name))
            if plain is None or bool in plain[0]:
                continue
            bounds = bounds_of(f)
            if {int, float} & set(plain[0]) and (bounds is None or not bounds.describe()):
                loose.append(f"{cls.__name__}.{f.name}")
            if str in plain[0] and f.name not in FREE_TEXT and (bounds is None or bounds.choices is None):
                loose.append(f"{cls.__name__}.{f.name}")
    assert not loose, f"settings without bounds or choices: {sorted(set(loose))}"


def test_a_redeclared_field_keeps_its_bounds():
    """A subclass that changes a field's default declares it with setting(...) again, bounds included
    (DAPO's eps_high = 0.28 once dropped eps_high's ge=0)."""
    import dataclasses

    from coalition_gym.settings_check import bounds_of
    from coalition_gym.training.config import make_config

    dropped = []
    for cls in _registered_settings_classes():
        mine = {f.name: f for f in dataclasses.fields(cls)}
        for base in cls.__mro__[1:]:
            if not dataclasses.is_dataclass(base):
                continue
            for f in dataclasses.fields(base):
                if bounds_of(f) is not None and bounds_of(mine[f.name]) is None:
                    dropped.append(f"{cls.__name__}.{f.name} (declared with bounds in {base.__name__})")
    assert not dropped, dropped
    with pytest.raises(ConfigError, match="eps_high=-1 must be >= 0"):
        make_config("dapo-indiv", eps_high=-1)
    with pytest.raises(ConfigError, match="aggregation='sum'; use one of"):
        make_config("grpo-indiv", aggregation="sum")


def test_every_number_of_every_settings_class_is_bounded():
    """A settings class (a dataclass with declared settings, or named ...Config/Options/Settings/Spec) in the
    package: each int or float field (optional or not) declares bounds or choices, so a bad value is refused
    where it is given and listings can say what it takes."""
    import importlib
    import inspect
    import pkgutil
    import typing

    import coalition_gym
    from coalition_gym.settings_check import bounds_of

    classes = {}
    for info in pkgutil.walk_packages(coalition_gym.__path__, "coalition_gym."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra not installed
            continue
        for obj in vars(module).values():
            if inspect.isclass(obj) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__:
                classes[f"{obj.__module__}.{obj.__qualname__}"] = obj
    unbounded, checked = [], 0
    for name, cls in sorted(classes.items()):
        fields = dataclasses.fields(cls)
        if not (any(bounds_of(f) for f in fields) or cls.__name__.endswith(("Config", "Options", "Settings", "Spec"))):
            continue
        hints = typing.get_type_hints(cls)
        for f in fields:
            kinds = [a for a in (typing.get_args(hints[f.name]) or (hints[f.name],)) if a is not type(None)]
            if kinds not in ([int], [float]):
                continue
            checked += 1
            b = bounds_of(f)
            if b is None or (b.ge, b.gt, b.le, b.choices) == (None, None, None, None):
                unbounded.append(f"{name}.{f.name}")
    assert checked > 100 and unbounded == [], unbounded
