"""One name per training setting across every recipe (issue 41, item 6): the coalition recipes' learning rate
is ``lr`` as ``cgym train``'s is, and an unknown name gets the closest valid ones (another library's name
mapped to ours) and the list of valid settings."""

import pytest

from coalition_gym.errors import ConfigError
from coalition_gym.training.collaborative.settings import make_coalition_settings
from coalition_gym.training.config import SETTING_SYNONYMS, field_names, make_config, trainer_methods
from coalition_gym.training.recipes import recipe_names

POLICY, TEAM = (lambda **kw: make_config("crl", **kw)), (lambda **kw: make_config("team-crl", **kw))
COALITION = lambda **kw: make_coalition_settings("sparta", **kw)  # noqa: E731


@pytest.mark.parametrize("make, given, ours", [(POLICY, "learning_rate", "lr"), (POLICY, "lora_rank", "lora_r"),
                                               (TEAM, "learning_rate", "lr"), (TEAM, "lora_rank", "lora_r"),
                                               (COALITION, "learning_rate", "lr")])
def test_an_unknown_setting_gets_the_closest_valid_names_and_the_list(make, given, ours):
    with pytest.raises(ConfigError) as caught:
        make(**{given: 8})
    text = str(caught.value)
    assert f"Did you mean '{ours}'" in text and "Valid settings: " in text
    listed = text.split("Valid settings: ")[1].split(", ")
    assert ours in listed and len(listed) > 10


def test_every_recipe_calls_the_learning_rate_lr():
    assert make_coalition_settings("sparta", lr=1e-3).lr == 1e-3
    assert make_coalition_settings("multiagent_finetuning", lr=2e-3).lr == 2e-3
    assert recipe_names("team") and set(recipe_names("team")) <= set(trainer_methods())
    for method in trainer_methods():
        assert "lr" in field_names(method) and "learning_rate" not in field_names(method)
    assert all(ours in field_names("team-crl") | field_names("crl") | field_names("dapo-indiv")
               for ours in SETTING_SYNONYMS.values())  # every suggestion is a real setting


def test_cgym_train_suggests_lr_for_learning_rate(capsys):
    from coalition_gym.cli import main

    assert main(["train", "--set", "learning_rate=1e-4"]) == 2
    err = capsys.readouterr().err
    assert "no training method has a setting 'learning_rate'. Did you mean 'lr'?" in err
    assert "Valid settings:" in err and "lora_r" in err and "Traceback" not in err
