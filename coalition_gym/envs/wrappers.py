"""Wrappers that turn a text environment into one numeric RL libraries accept (Stable-Baselines3).

``DiscreteChoiceWrapper`` is for decision points where the choice is among a finite set: which
member to route to, which candidate to forward, which system prompt to use. The observation becomes
a feature vector of the prompt text (hashed n-grams by default, or any featurizer such as a local
sentence encoder); the action is an index into the choices, turned into the text the seat replies.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np

from ..errors import ActionError, ConfigError
from ..types import Ask


class HashedNgrams:
    """Signed feature hashing of word n-grams (and character trigrams), L2-normalised, so every
    value lies in [-1, 1]. Deterministic across processes (blake2b, not Python's hash)."""

    def __init__(self, dim: int = 256, word_ngrams: Sequence[int] = (1, 2), char_ngrams: int = 3):
        if dim < 2:
            raise ConfigError(f"HashedNgrams: dim={dim} must be >= 2")
        self.dim, self.word_ngrams, self.char_ngrams = dim, tuple(word_ngrams), char_ngrams

    def grams(self, text: str) -> list[str]:
        words = re.findall(r"\w+|[^\w\s]", text.lower())
        out = [" ".join(words[i:i + n]) for n in self.word_ngrams for i in range(len(words) - n + 1)]
        if self.char_ngrams:
            squashed = " ".join(words)
            out += ["#" + squashed[i:i + self.char_ngrams] for i in range(len(squashed) - self.char_ngrams + 1)]
        return out

    def __call__(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for gram in self.grams(text):
            h = int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "big")
            vec[h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm > 0 else vec


Choices = Sequence[str] | Callable[[Ask], Sequence[str]]


class DiscreteChoiceWrapper(gym.Wrapper):
    """``Discrete(n)`` actions mapped to replies; ``Box`` observations from a featurizer.

    ``choices`` is a fixed list of replies, or a function of the pending Ask returning ``n`` replies
    (e.g. the current candidates' texts). ``text_of`` picks the text to featurize from the pending
    Ask (default: the item's question, which is what a router should look at).
    """

    def __init__(self, env: gym.Env, choices: Choices, n_choices: int | None = None,
                 featurizer: Callable[[str], np.ndarray] | None = None,
                 text_of: Callable[[Ask], str] | None = None):
        super().__init__(env)
        if callable(choices) and n_choices is None:
            raise ConfigError("DiscreteChoiceWrapper: give n_choices when choices is a function")
        self.choices = choices
        self.n = n_choices if n_choices is not None else len(choices)  # type: ignore[arg-type]
        if self.n < 1:
            raise ConfigError("DiscreteChoiceWrapper needs at least one choice")
        self.featurizer = featurizer or HashedNgrams()
        self.text_of = text_of or (lambda ask: ask.item.question if ask.item is not None else "")
        probe = np.asarray(self.featurizer("probe"), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(self.n)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=probe.shape, dtype=np.float32)

    def _features(self) -> np.ndarray:
        ask = self.env.get_wrapper_attr("pending_ask")
        text = self.text_of(ask) if ask is not None else ""
        obs = np.asarray(self.featurizer(text), dtype=np.float32)
        if obs.shape != self.observation_space.shape or not np.all(np.isfinite(obs)) \
                or obs.min(initial=0.0) < -1.0 or obs.max(initial=0.0) > 1.0:
            raise ConfigError(f"featurizer output of shape {obs.shape} with range "
                              f"[{obs.min(initial=0.0):.3g}, {obs.max(initial=0.0):.3g}] does not fit "
                              f"{self.observation_space}; scale it into [-1, 1] with a fixed shape")
        return obs

    def reply_for(self, action: Any) -> str:
        if isinstance(action, np.ndarray) and action.size == 1:
            action = action.item()
        if isinstance(action, bool) or not isinstance(action, (int, np.integer)) or not 0 <= int(action) < self.n:
            raise ActionError(f"action {action!r} is not an index in [0, {self.n})")
        choices = self.choices(self.env.get_wrapper_attr("pending_ask")) if callable(self.choices) else self.choices
        if len(choices) != self.n:
            raise ConfigError(f"choices gave {len(choices)} replies, expected n_choices={self.n}")
        return choices[int(action)]

    def reset(self, **kwargs: Any):
        _, info = self.env.reset(**kwargs)
        return self._features(), info

    def step(self, action: Any):
        _, reward, terminated, truncated, info = self.env.step(self.reply_for(action))
        obs = np.zeros(self.observation_space.shape or (), dtype=np.float32) if terminated else self._features()
        return obs, reward, terminated, truncated, info
