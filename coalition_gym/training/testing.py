"""Contract checks for training recipes: call them in your own tests (as ``pettingzoo.test`` does). The
environments' checks (protocols, tasks, generators, answer kinds) are in :mod:`coalition_gym.envs.testing`.

- :func:`check_recipe`: any registered training recipe (policy, team or coalition): its settings build
  with their defaults and know their recipe, refuse a value out of a declared bound, and its ``train``
  can be called as ``train(settings, context)``; a policy recipe's strategy is a ``Strategy``.
- :func:`check_coalition_recipe`: a coalition-training recipe (sparta, ...) values coalitions in [0, 1],
  reproducibly, with a record per trained coalition, leaving the pool's models untouched.

Each raises ``AssertionError`` with what broke.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from ..agents.pools import load_pool
from ..envs.system import System, SystemSpec
from ..errors import ConfigError
from ..settings_check import bounds_of
from ..tasks import Task
from ..tasks import make as make_task
from .collaborative import TrainedCoalitionGame, make_coalition_settings
from .config import TrainConfig, make_config
from .recipes import RecipeContext, get_recipe, make_strategy, recipe_of
from .strategies import Strategy

#: two tiny zoo models and a simulated member (it answers and judges; it has no weights)
TRAINING_POOL = {"name": "contract", "members": [
    {"name": "pico", "backend": "hf", "model": "zoo:tiny/pico"},
    {"name": "nano", "backend": "hf", "model": "zoo:tiny/nano"},
    {"name": "referee", "backend": "sim", "profile": {"judge_skill": 0.9}}]}


def check_coalition_recipe(recipe: str, pool: Any = None, task: "Task | str" = "zoo:arith", items: int = 4) -> None:
    """A coalition-training recipe on a small pool with few, cheap settings: coalition values are
    scores in [0, 1], the same training twice gives the same values, every trained coalition has a
    record, and the pool's own models are untouched."""
    settings = make_coalition_settings(recipe, iterations=1, train_items=4, dev_items=3, max_new_tokens=6,
                                       batch_size=4, lr=1e-3)
    pool = load_pool(TRAINING_POOL if pool is None else pool)
    task = make_task(task, size=max(items, 8)) if isinstance(task, str) else task
    weights = {n: [p.detach().clone() for p in g.model.parameters()] for n, g in pool.members.items()
               if hasattr(g, "model")}
    values = []
    for _ in range(2):
        game = TrainedCoalitionGame(settings, System.build(SystemSpec(settings.evaluation, task, pool, split="test",
                                                                      n_items=items)))
        values.append([game.value(c) for c in (game.players, game.players[:2], game.players[:1])])
        assert all(0.0 <= v <= 1.0 for v in values[-1]), f"{recipe}: values {values[-1]} outside [0, 1]"
        assert game.trained and all(t.record for t in game.trained.values()), f"{recipe}: no training record"
    assert values[0] == values[1], f"{recipe}: the same training gave different values {values}"
    for name, before in weights.items():
        after = list(pool.members[name].model.parameters())  # type: ignore[attr-defined]
        assert all((a == b).all() for a, b in zip(after, before)), f"{recipe}: trained the pool's {name!r}"


def default_settings(recipe: str) -> Any:
    """A registered recipe's settings with their defaults, built the way its command builds them."""
    found = get_recipe(recipe)
    if found.kind == "policy" or issubclass(found.settings, TrainConfig):  # the trainer's family: cgym train's way
        return make_config(recipe)
    if found.kind == "coalition":
        return make_coalition_settings(recipe)
    return found.settings()


def check_recipe(recipe: str) -> None:
    """A registered training recipe's contract, without training: its settings class is a dataclass
    whose defaults build and name the recipe back (``recipe_of``), a value below a declared bound is
    refused (the settings check runs on construction), ``train`` can be called as ``train(settings,
    context)``, and a policy or team recipe's strategy is a :class:`~coalition_gym.training.strategies.Strategy`
    that says whether it trains. (:func:`check_coalition_recipe` trains a coalition recipe for real.)"""
    found = get_recipe(recipe)
    assert dataclasses.is_dataclass(found.settings), f"{recipe}: settings {found.settings!r} is not a dataclass"
    settings = default_settings(recipe)
    assert isinstance(settings, found.settings), f"{recipe}: its defaults built a {type(settings).__name__}"
    owner = recipe_of(settings)
    assert owner is not None and owner.name == recipe, f"{recipe}: its settings belong to {owner and owner.name!r}"
    try:
        inspect.signature(found.train).bind(settings, RecipeContext())
    except TypeError as exc:
        raise AssertionError(f"{recipe}: train cannot be called as train(settings, context): {exc}") from None
    except ValueError:  # no readable signature
        pass
    bounded = [(f, b) for f in dataclasses.fields(settings) if f.init for b in [bounds_of(f)]
               if b is not None and (b.ge is not None or b.gt is not None)]
    if bounded:
        field, bounds = bounded[0]
        low = bounds.ge if bounds.ge is not None else bounds.gt
        assert low is not None
        below = (int(low) - 1) if isinstance(getattr(settings, field.name), int) else float(low) - 1.0
        try:
            dataclasses.replace(settings, **{field.name: below})
        except ConfigError:
            pass
        else:
            raise AssertionError(f"{recipe}: {field.name}={below} is below its bound and was accepted: call "
                                 "check_settings(self) in __post_init__")
    if found.kind in ("policy", "team"):  # the trainer's loop runs their strategy (a team of any size)
        strategy: Any = make_strategy(settings)
        kind = Strategy if found.kind == "policy" else found.strategy  # a team's is called as a Strategy is
        is_kind = kind is not None and isinstance(strategy, kind)
        assert is_kind, f"{recipe}: strategy {type(strategy).__name__} is no {getattr(kind, '__name__', kind)}"
        modes = ("solo", "collab") if found.kind == "policy" else ("team",)
        assert strategy.selection_mode in modes, f"{recipe}: selection_mode {strategy.selection_mode!r}"
        prompts = strategy.candidate_prompts()
        assert prompts is None or all(isinstance(p, str) for p in prompts), f"{recipe}: candidate prompts {prompts!r}"
    else:
        assert found.strategy is None, f"{recipe}: a {found.kind} recipe has no strategy"


__all__ = ["TRAINING_POOL", "check_coalition_recipe", "check_recipe", "default_settings"]
