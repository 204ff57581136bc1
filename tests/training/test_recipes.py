"""The one registry of training recipes: policy, team and coalition recipes side by side, each named once,
each called as ``train(settings, context)``; ``make_config`` reads it; a coalition recipe is no protocol."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import coalition_gym
from coalition_gym.envs.protocols import PROTOCOLS, make_protocol
from coalition_gym.envs.registration import ENV_IDS, protocol_of
from coalition_gym.errors import ConfigError, UnknownNameError
from coalition_gym.training.builtin_recipes import train_policy_recipe
from coalition_gym.training.collaborative import CoalitionTrainingSettings, make_coalition_settings
from coalition_gym.training.config import TrainConfig, make_config
from coalition_gym.training.recipes import (
    RECIPES,
    get_recipe,
    make_strategy,
    recipe_names,
    recipe_of,
    refuse_not_episodic,
    register_recipe,
    unregister_recipe,
)
from coalition_gym.training.strategies import Base


def test_the_builtins_are_registered_once_with_both_kinds():
    assert recipe_names("policy") == ["crl", "grpo-indiv", "dapo-indiv", "raft", "nudge", "base"]
    assert recipe_names("coalition") == ["sparta", "multiagent_finetuning"]
    for name in recipe_names("policy"):  # the name lives in the registration: the settings class reads it back
        config = make_config(name)
        assert config.method == name and recipe_of(config).name == name
        assert type(make_strategy(config)) is get_recipe(name).strategy
        assert type(config)().method == name  # built directly, it still knows its recipe
    assert coalition_gym.register_recipe is register_recipe


def test_a_coalition_recipe_is_no_protocol():
    assert not set(recipe_names("coalition")) & set(PROTOCOLS)
    assert not any("sparta" in env_id.lower() for env_id in ENV_IDS)
    for name in recipe_names("coalition"):
        with pytest.raises(ConfigError, match="coalition-training recipe.*no episodes and no environment"):
            refuse_not_episodic(name)  # what the commands and reports say for it
        for lookup in (make_protocol, protocol_of):  # the environments know protocols only
            with pytest.raises(UnknownNameError, match=f"unknown (protocol|environment id) {name!r}"):
                lookup(name)
    refuse_not_episodic("debate")  # a protocol: nothing to say
    with pytest.raises(UnknownNameError):
        get_recipe("sparta", "policy")
    with pytest.raises(UnknownNameError, match="unknown policy-training recipe 'nope'"):
        get_recipe("nope", "policy")


def test_flat_settings_go_to_the_recipe_and_its_evaluation_protocol():
    maf = make_coalition_settings("multiagent_finetuning", rounds=3, fixed_weight=0.25, max_new_tokens=8)
    assert maf.evaluation.name == "debate" and maf.evaluation.rounds == 3 and maf.evaluation.max_new_tokens == 8
    assert maf.fixed_weight == 0.25 and maf.settings()["rounds"] == 3
    assert make_coalition_settings("multiagent_finetuning").evaluation.rounds == 2  # the recipe's default
    assert make_coalition_settings("sparta").evaluation.name == "selected_checkpoint"
    with pytest.raises(ConfigError, match="'sparta' has no setting 'rounds'"):
        make_coalition_settings("sparta", rounds=2)
    with pytest.raises(ConfigError, match="sparta: beta=0 must be > 0"):
        make_coalition_settings("sparta", beta=0)


def test_register_recipe_adds_both_kinds_and_refuses_a_taken_name():
    @dataclass
    class Mine(TrainConfig):
        pass

    @dataclass
    class MyCoalition(CoalitionTrainingSettings):
        pass

    def train_coalition(settings, context):  # never called here
        raise AssertionError

    register_recipe("mine-test", Mine, train_policy_recipe, strategy=Base)
    register_recipe("coalition-test", MyCoalition, train_coalition, kind="coalition")
    try:
        register_recipe("mine-test", Mine, train_policy_recipe, strategy=Base)  # the same again: a no-op
        assert make_config("mine-test").method == "mine-test" and "mine-test" in recipe_names("policy")
        assert make_coalition_settings("coalition-test", iterations=2).iterations == 2
        with pytest.raises(ConfigError, match="no episodes"):
            refuse_not_episodic("coalition-test")
        with pytest.raises(ConfigError, match="already registered"):
            register_recipe("crl", Mine, train_policy_recipe, strategy=Base)
        with pytest.raises(ConfigError, match="already belongs to recipe 'mine-test'"):
            register_recipe("other-test", Mine, train_policy_recipe, strategy=Base)
        with pytest.raises(ConfigError, match="needs a strategy"):
            register_recipe("other-test", TrainConfig, train_policy_recipe)
    finally:
        unregister_recipe("mine-test")
        unregister_recipe("coalition-test")
    assert "mine-test" not in RECIPES and "coalition-test" not in RECIPES
    with pytest.raises(UnknownNameError):
        make_protocol("coalition-test")


def test_every_recipe_is_called_as_train_settings_context(monkeypatch, tmp_path):
    """One contract for every kind: ``train(settings, context)``; the built-ins hand the context (or, for the
    policy and team trainers, its parts) to what they wrap, and a function of another shape is refused at
    registration."""
    import inspect

    from coalition_gym.training import trainer
    from coalition_gym.training.collaborative import finetuning, sparta
    from coalition_gym.training.recipes import RecipeContext

    calls = []
    for module, name in ((trainer, "train_policy"), (sparta, "train_sparta"),
                         (finetuning, "train_multiagent_finetuning")):
        monkeypatch.setattr(module, name, lambda *args, _n=name: calls.append((_n, args)) or _n)
    members, items = {"a": object()}, ["train"]
    context = RecipeContext(tmp_path, options="options", base_per_item={"x": [1.0]}, members=members, task="task",
                            train_items=items, dev_items=["dev"], seed=3)
    for recipe in RECIPES.values():
        params = list(inspect.signature(recipe.train).parameters)
        assert len(params) == 2, f"{recipe.name}: train{inspect.signature(recipe.train)}"
        settings = object()
        calls.clear()
        recipe.train(settings, context)
        (called, args), = calls
        if recipe.kind == "coalition":  # the coalition trainers are train(settings, context) themselves
            assert args == (settings, context), recipe.name
        else:
            assert args == (settings, tmp_path, "options", {"x": [1.0]}), recipe.name
    with pytest.raises(ConfigError, match=r"cannot be called as train\(settings, context\)"):
        register_recipe("old-test", MyOldSettings, lambda settings, out, options, base: None, kind="team")
    assert "old-test" not in RECIPES


@dataclass
class MyOldSettings:
    pass
