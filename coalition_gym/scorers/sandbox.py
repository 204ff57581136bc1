"""Moved to ``coalition_gym.sandbox.launcher`` (old path kept for one release)."""

from .._compat import moved

moved(__name__, "coalition_gym.sandbox.launcher")
