"""Project exceptions. Each message names the bad value and what would be accepted."""

from __future__ import annotations

import difflib
from typing import Iterable, Mapping


class CoalitionGymError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(CoalitionGymError, ValueError):
    """A configuration value is malformed or out of range."""


def close_names(name: str, known: Iterable[str]) -> list[str]:
    """Up to three names of ``known`` that ``name`` is probably a typo of."""
    return difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.5)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` Did you mean 'x'?`` for a close name, else nothing: the hint every unknown-name error gives."""
    close = close_names(name, known)
    return f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def setting_hint(name: str, known: Iterable[str], synonyms: Mapping[str, str] | None = None) -> str:
    """What an unknown-setting error adds after the bad name: the closest valid names (first the one that
    ``synonyms`` maps ``name`` to, e.g. another library's ``learning_rate`` to ``lr``) and the full list."""
    known = sorted(set(known))
    same = (synonyms or {}).get(name)
    close = ([same] if same in known else []) + [c for c in close_names(name, known) if c != same]
    hint = f" Did you mean {', '.join(repr(c) for c in close[:3])}?" if close else ""
    return f".{hint} Valid settings: {', '.join(known)}"


class UnknownNameError(CoalitionGymError, KeyError):
    """An id, preset or name that is not registered."""

    def __init__(self, kind: str, name: str, known: Iterable[str]):
        known = sorted(known)
        close = close_names(name, known)
        hint = did_you_mean(name, known)
        listing = ", ".join(known) if len(known) <= 20 else ", ".join(known[:20]) + ", ..."
        self.kind, self.name, self.suggestions = kind, name, close
        super().__init__(f"unknown {kind} {name!r}.{hint} Known: {listing}")

    def __str__(self) -> str:  # KeyError would otherwise quote the whole message
        return self.args[0]


class EmptyCoalitionError(ConfigError):
    """A protocol was asked to run with no members."""


class BackendError(CoalitionGymError, RuntimeError):
    """A generator failed or returned something unusable."""


class PromptTooLongError(BackendError):
    """A prompt that alone fills the model's context: nothing is left to generate (never cut to fit)."""


class PartialBatchError(BackendError):
    """Some Asks of a batch failed on their own and the rest succeeded.

    ``results`` holds, per Ask in order, its Sample or the exception that ended it; the runner uses
    the Samples as they are, so a request that succeeded is never sent again.
    """

    def __init__(self, message: str, results: list):
        super().__init__(message)
        self.results = results


class EpisodeStateError(CoalitionGymError, RuntimeError):
    """An environment was used out of order (step before reset, step after the end)."""


class ActionError(CoalitionGymError, TypeError):
    """An action that is not what the action space accepts."""
