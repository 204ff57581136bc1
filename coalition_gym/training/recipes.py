"""The one registry of training recipes: a name, a settings class and a ``train`` function.

Every recipe is called the same way, whatever it trains: ``train(settings, context)``, with its settings
(an instance of the class it registered) and a :class:`RecipeContext` (where it writes, how it runs,
and, for a coalition, what it trains on). Three kinds share the registry:

- **policy** recipes (C-RL and its baselines) train one policy inside a live system. Their settings are
  :class:`~coalition_gym.training.config.TrainConfig` subclasses and their ``strategy`` (see
  :mod:`.strategies`) says how the trainer's loop rolls out, rewards and updates (``cgym train --method
  NAME``); ``context``: ``out``, ``options`` (``trainer.RunOptions``), ``base_per_item``.
- **team** recipes (team C-RL) train K >= 1 seats together inside one protocol (:mod:`.team`): the same
  config family (``TrainConfig`` subclasses) and a strategy for the same trainer's loop (``cgym train --policy A
  --policy B``); ``context`` as a policy recipe's.
- **coalition** recipes (Sparta, multi-agent finetuning) train copies of a coalition's members and
  return a ``CoalitionTraining``; ``context``: ``members``, ``task``, ``train_items``, ``dev_items``,
  ``seed`` and ``out`` (the work folder). ``TrainedCoalitionGame`` values what the trained coalition
  answers with the settings' evaluation protocol (``cgym eval --protocol NAME``).

A recipe's name lives in its :func:`register_recipe` call only (the built-ins: :mod:`.builtin_recipes`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import ConfigError, UnknownNameError

KINDS = ("policy", "coalition", "team")
#: the kinds the one trainer runs (``config.make_config`` builds their settings): one seat, or any number
TRAINER_KINDS = ("policy", "team")


@dataclass
class RecipeContext:
    """What a recipe's ``train(settings, context)`` gets besides its settings.

    ``out``: where the recipe writes (a policy or team run's folder; a coalition's work folder; None:
    nothing written). ``options``: how a policy or team run runs (a ``trainer.RunOptions``: force,
    executor, progress, log, failures ...; None: its defaults). ``base_per_item``: Base's per-item test
    scores a policy or team run reports its gains against (None: none). A coalition recipe trains
    ``members`` (name -> a trainable copy) on ``task``'s ``train_items``, selects on ``dev_items``, seeded
    by ``seed``."""

    out: str | Path | None = None  # a Path once built
    options: Any = None
    base_per_item: dict[str, list[float]] | None = None
    members: Mapping[str, Any] = field(default_factory=dict)
    task: Any = None
    train_items: Sequence[Any] = ()
    dev_items: Sequence[Any] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        if self.out is not None:
            self.out = Path(self.out)


#: ``train(settings, context)``: every recipe's one calling convention
TrainFunction = Callable[[Any, RecipeContext], Any]


@dataclass(frozen=True)
class Recipe:
    name: str
    settings: type  # the settings dataclass (one per recipe, as TRL has one config per trainer)
    train: TrainFunction
    kind: str = "policy"
    strategy: type | None = None  # policy recipes: rollouts, reward and update inside the trainer's loop
    description: str = ""


#: recipe name -> recipe, in registration order (the built-ins first)
RECIPES: dict[str, Recipe] = {}


def register_recipe(name: str, settings: type, train: TrainFunction, *, kind: str = "policy",
                    strategy: type | None = None, description: str = "") -> Recipe:
    """Make a training recipe available by ``name``: ``cgym train --method NAME`` and ``make_config``
    (policy and team recipes), ``cgym eval --protocol NAME`` and ``TrainedCoalitionGame`` (coalition recipes).
    ``train(settings, context)`` trains (:class:`RecipeContext`). Registering the same recipe again is a
    no-op; another one under a taken name is refused."""
    if kind not in KINDS:
        raise ConfigError(f"recipe kind {kind!r}; use one of {', '.join(KINDS)}")
    if not name or not isinstance(name, str):
        raise ConfigError(f"a training recipe needs a name, got {name!r}")
    if not isinstance(settings, type):
        raise ConfigError(f"recipe {name!r}: settings must be a class, got {settings!r}")
    if not callable(train):
        raise ConfigError(f"recipe {name!r}: train must be callable, got {train!r}")
    _check_contract(name, train)
    if kind == "policy" and strategy is None:
        raise ConfigError(f"policy recipe {name!r} needs a strategy (a training.strategies.Strategy subclass)")
    recipe = Recipe(name, settings, train, kind, strategy, description)
    taken = RECIPES.get(name)
    if taken is not None and (taken.settings, taken.strategy, taken.kind) != (settings, strategy, kind):
        raise ConfigError(f"training recipe {name!r} is already registered")
    owner = next((r.name for r in RECIPES.values() if r.settings is settings and r.name != name), None)
    if owner is not None:
        raise ConfigError(f"settings class {settings.__name__} already belongs to recipe {owner!r}")
    RECIPES[name] = taken or recipe
    return RECIPES[name]


def _check_contract(name: str, train: TrainFunction) -> None:
    """Every recipe is called as ``train(settings, context)``: refuse a function that cannot be."""
    try:
        signature = inspect.signature(train)
    except (TypeError, ValueError):  # a callable without a readable signature: trusted
        return
    try:
        signature.bind(None, None)
    except TypeError:
        raise ConfigError(f"recipe {name!r}: train{signature} cannot be called as train(settings, context) "
                          "(context: a RecipeContext)") from None


def unregister_recipe(name: str) -> Recipe:
    """Remove a recipe (tests that register their own clean up with it)."""
    return RECIPES.pop(name)


def not_a_protocol(name: str) -> str | None:
    """Why a coalition recipe's name is no protocol; None for any other name."""
    recipe = RECIPES.get(name)
    if recipe is None or recipe.kind != "coalition":
        return None
    return (f"{name!r} is a coalition-training recipe: it trains its members before answering, so it has no "
            f"episodes and no environment; value it with `cgym eval --protocol {name}` (or TrainedCoalitionGame "
            "in Python)")


def refuse_not_episodic(name: str) -> None:
    """Raise ConfigError saying what ``name`` is when it names a coalition-training recipe, which has no
    episodes. Called by the commands and reports that take a protocol or env id from a user, before the
    environments' lookup (which knows protocols only: no layer below fills in the recipes' names)."""
    why = not_a_protocol(name)
    if why:
        raise ConfigError(why)


def recipe_names(kind: str | None = None) -> list[str]:
    return [n for n, r in RECIPES.items() if kind is None or r.kind == kind]


def get_recipe(name: str, kind: str | None = None) -> Recipe:
    recipe = RECIPES.get(name)
    if recipe is None or (kind is not None and recipe.kind != kind):
        what = {"policy": "policy-training recipe", "coalition": "coalition-training recipe",
                "team": "team-training recipe"}.get(kind or "", "recipe")
        raise UnknownNameError(what, name, recipe_names(kind))
    return recipe


def make_strategy(settings: Any) -> Any:
    """The strategy of the recipe ``settings`` names in ``method``: a policy recipe's (every one has one,
    :func:`register_recipe` checks) or a team recipe's."""
    recipe = get_recipe(settings.method)
    if recipe.strategy is None:
        raise ConfigError(f"recipe {recipe.name!r} ({recipe.kind}) has no strategy for the trainer's loop")
    return recipe.strategy(settings)


def recipe_of(settings: Any) -> Recipe | None:
    """The recipe whose settings class is ``settings``'s (an instance or the class), or None."""
    cls = settings if isinstance(settings, type) else type(settings)
    return next((r for r in RECIPES.values() if r.settings is cls), None)


__all__ = ["Recipe", "RecipeContext", "TrainFunction", "RECIPES", "KINDS", "TRAINER_KINDS", "register_recipe",
           "unregister_recipe", "recipe_names", "get_recipe", "recipe_of", "make_strategy", "not_a_protocol",
           "refuse_not_episodic"]
