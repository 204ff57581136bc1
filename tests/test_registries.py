"""Registries: a protocol, a task and a backend added in user code work everywhere built-ins do."""

from dataclasses import dataclass
from typing import ClassVar

import gymnasium as gym
import pytest
from conftest import ListTask

from coalition_gym import (
    PROTOCOLS,
    Generator,
    Outcome,
    Protocol,
    Sample,
    load_pool,
    make_protocol,
    make_task,
    register_backend,
    register_protocol,
    register_task,
)
from coalition_gym.agents import pools
from coalition_gym.cli import main
from coalition_gym.envs.protocols.base import answer_independently
from coalition_gym.envs.registration import ENV_IDS
from coalition_gym.errors import ConfigError
from coalition_gym.tasks import TASKS


@dataclass
class FirstSays(Protocol):
    name: ClassVar[str] = "first_says_test"
    description: ClassVar[str] = "The first member's answer is the system's (a registry test)"

    def program(self, ctx):
        _, turns = yield from answer_independently(ctx, self.params)
        return Outcome(answer=turns[0].answer, text=turns[0].text, transcript=tuple(turns))


class Echo(Generator):
    identity = "test:echo"

    def generate(self, asks):
        return [Sample(text="Answer: 7") for _ in asks]


@pytest.fixture
def registered():
    env_id = register_protocol(FirstSays)
    register_task("list_test", ListTask)
    register_backend("echo_test", lambda model, **options: Echo(), {"loud": (bool,)})
    yield env_id
    PROTOCOLS.pop("first_says_test")  # this test's registrations only
    ENV_IDS.pop(env_id)
    gym.registry.pop(env_id)
    TASKS.pop("list_test")
    pools.BACKEND_FACTORIES.pop("echo_test")
    pools.BACKEND_OPTIONS.pop("echo_test")


def test_registered_parts_work_everywhere(registered, capsys):
    assert registered == "coalition_gym/FirstSays-v0"
    assert isinstance(make_protocol("first_says_test"), FirstSays)
    assert make_task("list_test").name == "list"
    pool = load_pool({"members": [{"name": "e", "backend": "echo_test", "loud": True},
                                  {"name": "atlas", "backend": "sim", "model": "sim:demo/atlas"}]})
    env = gym.make(registered, task="list_test", collaborators=pool, split="test")
    obs, info = env.reset(seed=0)
    _, reward, done, _, info = env.step("Answer: 9")
    assert done and info["system_answer"] == "7" and info["details"]["cost"]["calls"] == 3  # e, atlas, the policy
    for command, shown in ((["envs"], registered), (["protocols"], "first_says_test"), (["tasks"], "list_test")):
        assert main(command) == 0 and shown in capsys.readouterr().out


def test_registries_refuse_clashes_and_bad_entries(registered):
    @dataclass
    class Impostor(Protocol):
        name: ClassVar[str] = "debate"

        def program(self, ctx):
            yield []
    with pytest.raises(ConfigError, match="'debate' is taken by Debate"):
        register_protocol(Impostor)
    with pytest.raises(ConfigError, match="takes a Protocol subclass"):
        register_protocol(dict)
    with pytest.raises(ConfigError, match="already registered"):
        register_task("list_test", lambda **kw: None)
    with pytest.raises(ConfigError, match="unknown key 'volume' for backend 'echo_test'"):
        load_pool({"members": [{"name": "e", "backend": "echo_test", "volume": 3}]})
    with pytest.raises(ConfigError, match="loud=3 must be bool"):
        load_pool({"members": [{"name": "e", "backend": "echo_test", "loud": 3}]})


def test_a_training_method_can_be_registered():
    from dataclasses import dataclass as dc

    from coalition_gym.training.config import CONFIGS, CRLConfig, check_methods, make_config, method_names
    from coalition_gym.training.methods import CRL, METHOD_CLASSES, make_method, register_method

    class NegatedCRL(CRL):  # a saboteur: the system's reward with its sign flipped
        name = "crl-negate-test"

        def reward(self, rollout):
            return -super().reward(rollout)

    @dc
    class NegatedConfig(CRLConfig):
        method: str = "crl-negate-test"

    register_method(NegatedCRL, NegatedConfig)
    try:
        assert "crl-negate-test" in method_names() and check_methods(["crl-negate-test"]) == ["crl-negate-test"]
        config = make_config("crl-negate-test", preset="tiny", group_size=4)
        assert isinstance(config, NegatedConfig) and isinstance(make_method(config), NegatedCRL)
        with pytest.raises(ConfigError, match="already registered"):
            register_method(CRL, NegatedConfig)
    finally:
        CONFIGS.pop("crl-negate-test")
        METHOD_CLASSES.pop("crl-negate-test")
