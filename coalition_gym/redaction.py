"""Moved to ``coalition_gym.result_files`` (old path kept for one release)."""

from ._compat import moved

moved(__name__, "coalition_gym.result_files")
