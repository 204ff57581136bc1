"""The one registry of training recipes: a name, a settings class and a ``train`` function.

Two kinds share it:

- **policy** recipes (C-RL and its baselines) train one policy inside a live system. Their settings are
  :class:`~coalition_gym.training.config.TrainConfig` subclasses, their ``strategy`` (see
  :mod:`.methods`) says how the trainer's loop rolls out, rewards and updates, and ``train(config,
  out, options, base_per_item)`` runs it (``trainer.RunOptions``; ``cgym train --method NAME``).
- **coalition** recipes (Sparta, multi-agent finetuning) train copies of a coalition's members.
  ``train(settings, members, task, train_items, dev_items, seed, work_dir)`` returns a
  ``CoalitionTraining``; ``TrainedCoalitionGame`` values what the trained coalition answers with the
  settings' evaluation protocol (``cgym eval --protocol NAME``).
- **team** recipes (team C-RL) train K >= 2 seats together inside one protocol (:mod:`.team`):
  ``train(config, out, options, base_per_item)`` as a policy recipe's, no strategy (``cgym train --policy A
  --policy B``).

A recipe's name lives in its :func:`register_recipe` call only (the built-ins: :mod:`.builtin_recipes`).
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any, Callable

from ..envs.protocols.collaborative import NOT_EPISODIC
from ..errors import ConfigError, UnknownNameError

KINDS = ("policy", "coalition", "team")


@dataclass(frozen=True)
class Recipe:
    name: str
    settings: type  # the settings dataclass (one per recipe, as TRL has one config per trainer)
    train: Callable[..., Any]
    kind: str = "policy"
    strategy: type | None = None  # policy recipes: rollouts, reward and update inside the trainer's loop
    description: str = ""


#: recipe name -> recipe, in registration order (the built-ins first)
RECIPES: dict[str, Recipe] = {}


def register_recipe(name: str, settings: type, train: Callable[..., Any], *, kind: str = "policy",
                    strategy: type | None = None, description: str = "") -> Recipe:
    """Make a training recipe available by ``name``: ``cgym train --method NAME`` and ``make_config``
    (policy recipes), ``cgym eval --protocol NAME`` and ``TrainedCoalitionGame`` (coalition recipes).
    Registering the same recipe again is a no-op; another one under a taken name is refused."""
    if kind not in KINDS:
        raise ConfigError(f"recipe kind {kind!r}; use one of {', '.join(KINDS)}")
    if not name or not isinstance(name, str):
        raise ConfigError(f"a training recipe needs a name, got {name!r}")
    if not isinstance(settings, type):
        raise ConfigError(f"recipe {name!r}: settings must be a class, got {settings!r}")
    if not callable(train):
        raise ConfigError(f"recipe {name!r}: train must be callable, got {train!r}")
    if kind == "policy" and strategy is None:
        raise ConfigError(f"policy recipe {name!r} needs a strategy (a training.methods.Method subclass)")
    recipe = Recipe(name, settings, train, kind, strategy, description)
    taken = RECIPES.get(name)
    if taken is not None and (taken.settings, taken.strategy, taken.kind) != (settings, strategy, kind):
        raise ConfigError(f"training method {name!r} is already registered")
    owner = next((r.name for r in RECIPES.values() if r.settings is settings and r.name != name), None)
    if owner is not None:
        raise ConfigError(f"settings class {settings.__name__} already belongs to recipe {owner!r}")
    RECIPES[name] = taken or recipe
    if kind == "coalition":  # make_protocol / gym lookups of the name explain instead of "unknown"
        NOT_EPISODIC[name] = (f"{name!r} is a coalition-training recipe: it trains its members before answering, "
                              f"so it has no episodes and no environment; value it with `cgym eval --protocol "
                              f"{name}` (or TrainedCoalitionGame in Python)")
    return RECIPES[name]


def unregister_recipe(name: str) -> Recipe:
    """Remove a recipe (tests that register their own clean up with it)."""
    NOT_EPISODIC.pop(name, None)
    return RECIPES.pop(name)


def recipe_names(kind: str | None = None) -> list[str]:
    return [n for n, r in RECIPES.items() if kind is None or r.kind == kind]


def get_recipe(name: str, kind: str | None = None) -> Recipe:
    recipe = RECIPES.get(name)
    if recipe is None or (kind is not None and recipe.kind != kind):
        what = {"policy": "training method", "coalition": "coalition-training recipe",
                "team": "team-training recipe"}.get(kind or "", "recipe")
        raise UnknownNameError(what, name, recipe_names(kind))
    return recipe


def make_strategy(settings: Any) -> Any:
    """A policy recipe's strategy for ``settings`` (a TrainConfig naming its recipe in ``method``)."""
    strategy = get_recipe(settings.method, "policy").strategy
    assert strategy is not None  # every policy recipe has one (register_recipe checks)
    return strategy(settings)


def recipe_of(settings: Any) -> Recipe | None:
    """The recipe whose settings class is ``settings``'s (an instance or the class), or None."""
    cls = settings if isinstance(settings, type) else type(settings)
    return next((r for r in RECIPES.values() if r.settings is cls), None)




class RecipeView(MutableMapping):
    """A read-through view of one kind's recipes, name -> one attribute (``settings`` or ``strategy``):
    the old ``CONFIGS`` and ``METHOD_CLASSES`` dicts, kept for one release. Deleting removes the recipe;
    adding goes through :func:`register_recipe`."""

    def __init__(self, kind: str, attribute: str):
        self.kind, self.attribute = kind, attribute

    def __getitem__(self, name: str) -> Any:
        recipe = RECIPES.get(name)
        if recipe is None or recipe.kind != self.kind:
            raise KeyError(name)
        return getattr(recipe, self.attribute)

    def __iter__(self) -> Iterator[str]:
        return iter(recipe_names(self.kind))

    def __len__(self) -> int:
        return len(recipe_names(self.kind))

    def __setitem__(self, name: str, value: Any) -> None:
        raise ConfigError(f"add training recipes with register_recipe (or register_method), not by assigning {name!r}")

    def __delitem__(self, name: str) -> None:
        self[name]  # KeyError for a name of another kind
        unregister_recipe(name)

    def pop(self, name: str, *default: Any) -> Any:  # type: ignore[override]
        """As dict.pop; a name already removed through the other view (the old code popped both dicts)
        gives None."""
        if name not in self:
            return default[0] if default else None
        value = self[name]
        del self[name]
        return value


__all__ = ["Recipe", "RECIPES", "KINDS", "register_recipe", "unregister_recipe", "recipe_names", "get_recipe",
           "recipe_of", "make_strategy", "RecipeView"]
