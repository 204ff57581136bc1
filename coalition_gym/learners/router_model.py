"""Learners for the trained router: from dev questions and each member's dev outcomes, a function that
scores every member on a new question (higher = more likely to answer it correctly).

A *learner* is any callable ``learner(questions, outcomes) -> predict`` where ``outcomes`` is an
``(n_questions, n_members)`` array of dev scores in [0, 1] and ``predict(question)`` returns one
score per member, in the same column order. The default, ``logistic_learner``, is one-vs-rest
logistic regression (numpy only, full-batch gradient descent, L2 penalty) on hashed word n-grams of
the question; ``best_member_learner`` ignores the question and always prefers the member with the
best dev accuracy (a baseline).
"""

from __future__ import annotations

import hashlib
import re
from typing import Callable, Sequence

import numpy as np

from ..errors import ConfigError

Predictor = Callable[[str], np.ndarray]
Learner = Callable[[Sequence[str], np.ndarray], Predictor]

_WORD = re.compile(r"[a-z]+|\d+|[^\sa-z\d]", re.I)


def _bucket(token: str, n_features: int) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "big") % n_features


def hashed_ngrams(text: str, n_features: int = 4096, max_n: int = 2) -> np.ndarray:
    """L2-normalised log counts of the question's word 1..max_n-grams, hashed into ``n_features``
    buckets. Digit runs become "0" so that a task's template, not its numbers, drives the features."""
    words = ["0" if w.isdigit() else w.lower() for w in _WORD.findall(text or "")]
    vec = np.zeros(n_features)
    for n in range(1, max_n + 1):
        for k in range(len(words) - n + 1):
            vec[_bucket(" ".join(words[k:k + n]), n_features)] += 1.0
    vec = np.log1p(vec)
    norm = np.linalg.norm(vec)
    return vec / norm if norm > 0 else vec


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-2, epochs: int = 300,
                 learning_rate: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """One-vs-rest logistic regression: weights ``(d, m)`` and biases ``(m,)`` minimising the mean
    log-loss of every column of ``y`` (soft labels allowed) plus ``l2/2 * |w|^2``. Deterministic."""
    n, d = x.shape
    m = y.shape[1]
    rate = np.clip(y.mean(axis=0), 1e-3, 1 - 1e-3)
    bias = np.log(rate / (1 - rate))  # start at each member's base rate
    # A feature absent from every example keeps weight 0, so only the used columns are fitted.
    used = np.flatnonzero(np.any(x != 0, axis=0))
    xs, ws = x[:, used], np.zeros((len(used), m))
    for _ in range(epochs):
        p = 1.0 / (1.0 + np.exp(-(xs @ ws + bias)))
        grad = p - y
        ws -= learning_rate * (xs.T @ grad / n + l2 * ws)
        bias -= learning_rate * grad.mean(axis=0)
    weights = np.zeros((d, m))
    weights[used] = ws
    return weights, bias


def logistic_learner(questions: Sequence[str], outcomes: np.ndarray, n_features: int = 4096, max_n: int = 2,
                     l2: float = 1e-2, epochs: int = 300) -> Predictor:
    y = _checked(questions, outcomes)
    x = np.stack([hashed_ngrams(q, n_features, max_n) for q in questions])
    weights, bias = fit_logistic(x, y, l2=l2, epochs=epochs)

    def predict(question: str) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(hashed_ngrams(question, n_features, max_n) @ weights + bias)))
    return predict


def best_member_learner(questions: Sequence[str], outcomes: np.ndarray) -> Predictor:
    accuracy = _checked(questions, outcomes).mean(axis=0)
    return lambda question: accuracy.copy()


def _checked(questions: Sequence[str], outcomes: np.ndarray) -> np.ndarray:
    y = np.asarray(outcomes, dtype=float)
    if y.ndim != 2 or y.shape[0] != len(questions) or y.shape[0] == 0:
        raise ConfigError(f"router learner: outcomes of shape {y.shape} do not match {len(questions)} questions "
                          "(expected questions x members, at least one question)")
    return np.clip(y, 0.0, 1.0)


LEARNERS: dict[str, Learner] = {"logistic": logistic_learner, "best_member": best_member_learner}


class RouterKnowledge:
    """What a trained router knows, per dev set (``key``): each member's measured dev outcomes, the
    accuracy assumed for seats that cannot be measured (a policy), and the predictors the learner fits
    on them, one per coalition of measured members. Pure data and numpy: the protocol measures, this
    object remembers and predicts. Hand one object to several TrainedRouter protocols (or keep it
    between runs) to share what was measured."""

    def __init__(self, learner: "str | Learner" = "logistic"):
        if not callable(learner) and learner not in LEARNERS:
            from ..errors import UnknownNameError

            raise UnknownNameError("router learner", str(learner), LEARNERS)
        self.learner: Learner = learner if callable(learner) else LEARNERS[learner]
        self.outcomes: dict[tuple[int, str], np.ndarray] = {}  # (dev set key, member) -> dev scores
        self.assumed: dict[tuple[int, str], float] = {}  # (dev set key, seat) -> assumed dev accuracy
        self.claimed: set[tuple[int, str]] = set()  # being measured by an episode already
        self._predictors: dict[tuple[int, tuple[str, ...]], Predictor] = {}

    def knows(self, key: int, member: str) -> bool:
        return (key, member) in self.outcomes or (key, member) in self.assumed

    def record(self, key: int, member: str, scores: Sequence[float]) -> None:
        self.outcomes.setdefault((key, member), np.asarray(scores, dtype=float))  # first writer wins: same values
        self.claimed.add((key, member))

    def assume(self, key: int, member: str, accuracy: float) -> None:
        if not 0.0 <= accuracy <= 1.0:
            raise ConfigError(f"trained_router: an assumed accuracy must lie in [0, 1], got {accuracy}")
        self.forget([member])
        self.assumed[(key, member)] = float(accuracy)

    def forget(self, members: "Sequence[str] | None" = None) -> None:
        """Drop what is known about ``members`` (all if None); they are measured again when needed."""
        names = None if members is None else set(members)

        def drop(member: str) -> bool:
            return names is None or member in names
        self.outcomes = {k: v for k, v in self.outcomes.items() if not drop(k[1])}
        self.assumed = {k: v for k, v in self.assumed.items() if not drop(k[1])}
        self.claimed = {k for k in self.claimed if not drop(k[1])}
        self._predictors = {k: v for k, v in self._predictors.items() if not any(drop(m) for m in k[1])}

    def measured(self, key: int) -> dict[str, np.ndarray]:
        return {m: v.copy() for (k, m), v in self.outcomes.items() if k == key}

    def scores(self, key: int, members: Sequence[str], dev_questions: Sequence[str],
               question: str) -> tuple[np.ndarray, np.ndarray]:
        """Predicted scores on ``question`` and dev accuracies, per member: the learner's for measured
        members (fitted once per coalition), the assumed accuracy for seats."""
        measured = tuple(m for m in members if (key, m) not in self.assumed)
        if measured and (key, measured) not in self._predictors:
            outcomes = np.column_stack([self.outcomes[(key, m)] for m in measured])
            self._predictors[(key, measured)] = self.learner(dev_questions, outcomes)
        predicted = (np.asarray(self._predictors[(key, measured)](question), dtype=float) if measured
                     else np.zeros(0))
        if predicted.shape != (len(measured),):
            raise ConfigError(f"trained_router: the learner scored {predicted.shape} for {len(measured)} members")
        by_member = dict(zip(measured, predicted))
        scores = np.array([by_member.get(m, self.assumed.get((key, m), 0.0)) for m in members])
        accuracy = np.array([self.assumed[(key, m)] if (key, m) in self.assumed else self.outcomes[(key, m)].mean()
                             for m in members])
        return scores, accuracy
