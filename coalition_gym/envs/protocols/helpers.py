"""Moved to ``coalition_gym.envs.protocols.utils`` (old path kept for one release)."""

from ..._compat import moved

moved(__name__, "coalition_gym.envs.protocols.utils")
