"""The one registry of training recipes: policy and coalition recipes side by side, each named once; the
old views (CONFIGS, METHOD_CLASSES, TRAINERS) read it; a coalition recipe is no protocol."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import coalition_gym
from coalition_gym.envs.protocols import PROTOCOLS, make_protocol
from coalition_gym.envs.registration import ENV_IDS, protocol_of
from coalition_gym.errors import ConfigError, UnknownNameError
from coalition_gym.training.collaborative import TRAINERS, CoalitionTrainingSettings, make_coalition_settings
from coalition_gym.training.config import CONFIGS, TrainConfig, make_config, method_names
from coalition_gym.training.methods import METHOD_CLASSES, Base, make_method, train_policy
from coalition_gym.training.recipes import RECIPES, get_recipe, recipe_names, recipe_of, register_recipe


def test_the_builtins_are_registered_once_with_both_kinds():
    assert recipe_names("policy") == ["crl", "grpo-indiv", "dapo-indiv", "raft", "nudge", "base"] == method_names()
    assert recipe_names("coalition") == ["sparta", "multiagent_finetuning"]
    assert list(CONFIGS) == list(METHOD_CLASSES) == recipe_names("policy")
    assert list(TRAINERS) == recipe_names("coalition")
    for name in recipe_names("policy"):  # the name lives in the registration: the settings class reads it back
        config = make_config(name)
        assert config.method == name and recipe_of(config).name == name
        assert type(make_method(config)) is get_recipe(name).strategy
        assert type(config)().method == name  # built directly, it still knows its recipe
    assert coalition_gym.register_recipe is register_recipe


def test_a_coalition_recipe_is_no_protocol():
    assert not set(recipe_names("coalition")) & set(PROTOCOLS)
    assert not any("sparta" in env_id.lower() for env_id in ENV_IDS)
    for name in recipe_names("coalition"):
        for lookup in (make_protocol, protocol_of):
            with pytest.raises(ConfigError, match="coalition-training recipe.*no episodes and no environment"):
                lookup(name)
    with pytest.raises(UnknownNameError):
        get_recipe("sparta", "policy")
    with pytest.raises(UnknownNameError, match="unknown training method 'nope'"):
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

    def train_coalition(*args):  # never called here
        raise AssertionError

    register_recipe("mine-test", Mine, train_policy, strategy=Base)
    register_recipe("coalition-test", MyCoalition, train_coalition, kind="coalition")
    try:
        register_recipe("mine-test", Mine, train_policy, strategy=Base)  # the same again: a no-op
        assert make_config("mine-test").method == "mine-test" and "mine-test" in method_names()
        assert make_coalition_settings("coalition-test", iterations=2).iterations == 2
        with pytest.raises(ConfigError, match="no episodes"):
            make_protocol("coalition-test")
        with pytest.raises(ConfigError, match="already registered"):
            register_recipe("crl", Mine, train_policy, strategy=Base)
        with pytest.raises(ConfigError, match="already belongs to recipe 'mine-test'"):
            register_recipe("other-test", Mine, train_policy, strategy=Base)
        with pytest.raises(ConfigError, match="needs a strategy"):
            register_recipe("other-test", TrainConfig, train_policy)
    finally:
        del CONFIGS["mine-test"]
        TRAINERS.pop("coalition-test")
    assert "mine-test" not in RECIPES and "coalition-test" not in RECIPES
    with pytest.raises(UnknownNameError):
        make_protocol("coalition-test")
