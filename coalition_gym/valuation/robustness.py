"""Moved to ``coalition_gym.reports.robustness`` (old path kept for one release)."""

from .._compat import moved

moved(__name__, "coalition_gym.reports.robustness")
