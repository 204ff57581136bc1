"""Settings declared on dataclass fields (``setting(...)``) and checked in one place (``check_settings``)."""

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
