"""Zoo recipes: which models, on which task mix, how large and how long; their hash names the cache folder."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ...errors import ConfigError, UnknownNameError
from ...settings_check import check_settings, setting
from ...tasks.zoo_tasks import ZOO_TASKS
from .tokenizer import ZOO_FORMAT_VERSION

# -- recipes -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ZooModelSpec:
    """One zoo model: architecture, task mix and training length."""

    name: str
    mix: Mapping[str, float]  # zoo task -> sampling weight
    n_embd: int = setting(128, ge=1, doc="embedding width")
    n_layer: int = setting(4, ge=1, doc="transformer layers")
    n_head: int = setting(4, ge=1, doc="attention heads (n_embd must be a multiple)")
    steps: int = setting(600, ge=1, doc="training steps")
    batch_size: int = setting(48, ge=1, doc="sequences per step")
    lr: float = setting(3e-3, gt=0, doc="learning rate")
    debate_fraction: float = setting(0.15, ge=0, le=1, doc="share of steps that train on debate follow-up prompts")
    seed: int = setting(0, ge=0, doc="initialisation and data seed")
    context: int = setting(512, ge=1, doc="context length in tokens")

    def __post_init__(self) -> None:
        check_settings(self, f"zoo model {self.name!r}")
        unknown = [t for t in self.mix if t not in ZOO_TASKS]
        if unknown:
            raise UnknownNameError("zoo task", unknown[0], ZOO_TASKS)
        if not self.mix or any(w < 0 for w in self.mix.values()) or sum(self.mix.values()) <= 0:
            raise ConfigError(f"zoo model {self.name!r}: mix={dict(self.mix)} needs non-negative weights, "
                              "at least one positive")
        if self.n_embd % self.n_head:
            raise ConfigError(f"zoo model {self.name!r}: n_embd={self.n_embd} must be a multiple of "
                              f"n_head={self.n_head}")


@dataclass(frozen=True)
class ZooRecipe:
    name: str
    models: tuple[ZooModelSpec, ...]
    train_items: int = 4000  # per task, from the task's train split
    eval_items: int = 200  # per task and split (dev for tie-breaks, test for the report)
    task_seed: int = 0
    max_new_tokens: int = 16  # the backend cap used by zoo pools and the evaluation

    def digest(self) -> str:
        payload = json.dumps([ZOO_FORMAT_VERSION, dataclasses.asdict(self)], sort_keys=True, default=list)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]

    def model(self, name: str) -> ZooModelSpec:
        for spec in self.models:
            if spec.name == name:
                return spec
        raise UnknownNameError(f"model of zoo recipe {self.name!r}", name, [m.name for m in self.models])


ZOO_RECIPES: dict[str, ZooRecipe] = {
    # Four deliberately different models (sizes, task mixes, training lengths). abacus: arithmetic
    # specialist; quill: speller; polymath: a smaller generalist over all three tasks; sprout: a tiny,
    # briefly trained generalist (the weak member). About 5 CPU-minutes in all, on two workers.
    "default": ZooRecipe("default", (
        ZooModelSpec("abacus", {"arith": 1.0}, n_embd=96, n_layer=3, steps=800, batch_size=64, lr=3e-3,
                     debate_fraction=0.1, seed=11),
        ZooModelSpec("quill", {"reverse": 1.0}, n_embd=96, n_layer=3, steps=450, lr=4e-3, debate_fraction=0.1,
                     seed=12),
        ZooModelSpec("polymath", {"arith": 0.4, "reverse": 0.4, "sum": 0.2}, n_embd=64, n_layer=4, steps=800,
                     lr=5e-3, seed=13),
        ZooModelSpec("sprout", {"arith": 0.4, "reverse": 0.4, "sum": 0.2}, n_embd=48, n_layer=2, n_head=2,
                     steps=300, lr=5e-3, seed=14),
    )),
    # For tests: two very small models built in seconds (their answers are mostly wrong; they exist
    # to exercise the code paths).
    "tiny": ZooRecipe("tiny", (
        ZooModelSpec("pico", {"arith": 1.0}, n_embd=32, n_layer=1, n_head=2, steps=40, batch_size=16,
                     debate_fraction=0.1, seed=1, context=384),
        ZooModelSpec("nano", {"reverse": 1.0, "arith": 1.0}, n_embd=32, n_layer=2, n_head=2, steps=25,
                     batch_size=16, debate_fraction=0.1, seed=2, context=384),
    ), train_items=300, eval_items=24),
    # For GPU runs of the C-RL benchmark (benchmarks/crl_demo.py --device cuda --policy zoo:large/scholar):
    # a 4.9M-parameter generalist. Train it where a GPU is (COALITION_GYM_ZOO_DEVICE=cuda cgym zoo build
    # --recipe large, minutes); on one CPU thread it takes hours.
    "large": ZooRecipe("large", (
        ZooModelSpec("scholar", {"arith": 0.4, "reverse": 0.4, "sum": 0.2}, n_embd=256, n_layer=6, n_head=8,
                     steps=4000, batch_size=96, lr=1e-3, seed=21),
    ), train_items=8000),
}


def get_zoo_recipe(recipe: "str | ZooRecipe") -> ZooRecipe:
    if isinstance(recipe, ZooRecipe):
        return recipe
    if recipe not in ZOO_RECIPES:
        raise UnknownNameError("zoo recipe", recipe, ZOO_RECIPES)
    return ZOO_RECIPES[recipe]


def zoo_home() -> Path:
    """Where built zoos are cached: ``$COALITION_GYM_HOME/zoo`` or ``~/.cache/coalition_gym/zoo``."""
    home = os.environ.get("COALITION_GYM_HOME")
    return Path(home) / "zoo" if home else Path.home() / ".cache" / "coalition_gym" / "zoo"


def zoo_dir(recipe: "str | ZooRecipe", root: str | Path | None = None) -> Path:
    spec = get_zoo_recipe(recipe)
    return Path(root if root is not None else zoo_home()) / f"{spec.name}-{spec.digest()}"


