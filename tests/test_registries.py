"""Registries: a protocol, a task, a backend, an estimator, a sampler and an adversary added in user code
work everywhere built-ins do, and every registry lists its built-ins."""

import json
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
    register_adversary,
    register_backend,
    register_estimator,
    register_protocol,
    register_sampler,
    register_task,
    setting,
)
from coalition_gym.agents import pools
from coalition_gym.agents.adversaries import ADVERSARIES, REGISTERED_ADVERSARIES
from coalition_gym.cli import main
from coalition_gym.envs.protocols import BUILTIN_PROTOCOLS
from coalition_gym.envs.protocols.base import answer_independently
from coalition_gym.envs.registration import ENV_IDS
from coalition_gym.errors import ConfigError
from coalition_gym.reports.tables import FIELDS
from coalition_gym.tasks import TASKS
from coalition_gym.valuation.estimators import ESTIMATORS, leave_one_out
from coalition_gym.valuation.exact import result_of
from coalition_gym.valuation.sampling import SAMPLER_CLASSES, SAMPLERS, PermutationSampler


@dataclass
class FirstSays(Protocol):
    name: ClassVar[str] = "first_says_test"
    description: ClassVar[str] = "The first member's answer is the system's (a registry test)"

    patience: int = setting(2, ge=1, le=5, doc="unused: a declared setting with bounds")

    def program(self, ctx):
        _, turns = yield from answer_independently(ctx, self.params)
        return Outcome(answer=turns[0].answer, text=turns[0].text, transcript=tuple(turns))


class Echo(Generator):
    identity = "test:echo"

    def generate(self, asks):
        return [Sample(text="Answer: 7") for _ in asks]


@dataclass
class EchoOptions:
    loud: bool = setting(False)


@pytest.fixture
def registered():
    env_id = register_protocol(FirstSays)
    register_task("list_test", ListTask)
    register_backend("echo_test", lambda model, **options: Echo(), EchoOptions)
    yield env_id
    PROTOCOLS.pop("first_says_test")  # this test's registrations only
    ENV_IDS.pop(env_id)
    gym.registry.pop(env_id)
    TASKS.pop("list_test")
    pools.BACKENDS.pop("echo_test")


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
    with pytest.raises(ConfigError, match="loud=3 must be true or false"):
        load_pool({"members": [{"name": "e", "backend": "echo_test", "loud": 3}]})


def test_a_training_recipe_can_be_registered():
    from dataclasses import dataclass as dc

    from coalition_gym.training.builtin_recipes import train_policy_recipe
    from coalition_gym.training.config import CRLConfig, check_methods, make_config
    from coalition_gym.training.recipes import make_strategy, recipe_names, register_recipe, unregister_recipe
    from coalition_gym.training.strategies import CRL

    class NegatedCRL(CRL):  # a saboteur: the system's reward with its sign flipped
        def reward(self, rollout):
            return -super().reward(rollout)

    @dc
    class NegatedConfig(CRLConfig):
        pass

    register_recipe("crl-negate-test", NegatedConfig, train_policy_recipe, strategy=NegatedCRL)
    try:
        assert "crl-negate-test" in recipe_names("policy") and check_methods(["crl-negate-test"]) == ["crl-negate-test"]
        config = make_config("crl-negate-test", preset="tiny", group_size=4)
        assert isinstance(config, NegatedConfig) and isinstance(make_strategy(config), NegatedCRL)
        assert config.method == "crl-negate-test"
        with pytest.raises(ConfigError, match="already registered"):
            register_recipe("crl-negate-test", NegatedConfig, train_policy_recipe, strategy=CRL)
    finally:
        unregister_recipe("crl-negate-test")


def test_every_registry_lists_its_builtins():
    assert {cls.name for cls in BUILTIN_PROTOCOLS} <= set(PROTOCOLS)
    assert list(pools.BACKENDS)[:4] == ["sim", "hf", "openai", "vllm"]  # sim and openai like hf and vllm
    assert list(ESTIMATORS)[:5] == ["loo", "shapley", "banzhaf", "mc", "solo"]
    assert dict(FIELDS) == {"loo": "loo", "shapley": "shapley", "banzhaf": "banzhaf", "mc": "mc_shapley",
                            "interactions": "interaction"}
    assert list(SAMPLER_CLASSES)[:len(SAMPLERS)] == list(SAMPLERS)
    assert list(REGISTERED_ADVERSARIES)[:len(ADVERSARIES)] == list(ADVERSARIES)  # the simulated ones registered


def test_declared_settings_are_checked_listed_and_settable(registered, capsys):
    with pytest.raises(ConfigError, match="first_says_test: patience=0 must be in \\[1, 5\\]"):
        make_protocol("first_says_test", patience=0)
    with pytest.raises(ConfigError, match="first_says_test: patience='x' must be an integer"):
        make_protocol("first_says_test", patience="x")
    assert make_protocol("first_says_test", patience=5).patience == 5
    assert main(["protocols"]) == 0
    out = capsys.readouterr().out
    assert "patience=2 (in [1, 5])" in out and "rounds=3 (>= 1)" in out and "tie_break='dev' (one of dev, first" in out
    assert main(["pools"]) == 0
    assert "echo_test: options loud" in capsys.readouterr().out


@dataclass
class VolumeOptions:
    volume: int = setting(ge=0, le=11, doc="how loud")


def test_a_backend_declares_its_options_as_settings(capsys):
    register_backend("volume_test", lambda model, volume=5: Echo(), VolumeOptions)
    try:
        pool = load_pool({"members": [{"name": "e", "backend": "volume_test", "volume": 11}]})
        assert isinstance(pool.members["e"], Echo)
        with pytest.raises(ConfigError, match="member 'e': volume=12 must be in \\[0, 11\\]"):
            load_pool({"members": [{"name": "e", "backend": "volume_test", "volume": 12}]})
        with pytest.raises(ConfigError, match="volume='high' must be an integer"):
            load_pool({"members": [{"name": "e", "backend": "volume_test", "volume": "high"}]})
        with pytest.raises(ConfigError, match="unknown key 'profile' for backend 'volume_test' \\('profile' is only "
                                              "for backend 'sim'\\)"):
            load_pool({"members": [{"name": "e", "backend": "volume_test", "profile": {}}]})
        assert main(["pools"]) == 0
        assert "volume_test: options volume (in [0, 11])" in capsys.readouterr().out
    finally:
        pools.BACKENDS.pop("volume_test")


def half_loo(game, n_boot=2000, seed=0):
    """Half the leave-one-out value (a registry test)."""
    loo = leave_one_out(game, n_boot=n_boot, seed=seed)
    return result_of("half_loo_test", game, loo.per_item / 2, n_boot, seed)


class PermutationTwin(PermutationSampler):
    name = "permutation_twin_test"
    description = "the permutation sampler under another name (a registry test)"


@pytest.fixture
def valuation_parts():
    register_estimator("half_loo_test", half_loo, field="half_loo")
    register_sampler(PermutationTwin)
    yield
    ESTIMATORS.pop("half_loo_test")
    SAMPLER_CLASSES.pop("permutation_twin_test")


def test_a_registered_estimator_and_sampler_are_listed_and_usable_by_name(valuation_parts, tmp_path, capsys):
    assert main(["estimators"]) == 0
    out = capsys.readouterr().out
    assert "half_loo_test (column half_loo): Half the leave-one-out value" in out
    assert "permutation_twin_test: the permutation sampler under another name" in out
    assert main(["eval", "--pool", "sim:random-5", "--protocol", "majority_vote", "--items", "12", "--bootstrap",
                 "20", "--estimator", "half_loo_test,loo,mc", "--sampler", "permutation_twin_test", "--mc-budget",
                 "20", "--out", str(tmp_path / "eval")]) == 0
    assert "half_loo [95% CI]" in capsys.readouterr().out
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary["mc"]["sampler"] == "permutation_twin_test" and summary["primary_estimator"] == "mc_shapley"
    for row in summary["models"]:
        assert row["half_loo"] == pytest.approx(row["loo"] / 2)
    with pytest.raises(ConfigError, match="already registered"):
        register_estimator("half_loo_test", half_loo)
    with pytest.raises(ConfigError, match="field 'mc_shapley' is taken by estimator 'mc'"):
        register_estimator("another_test", half_loo, field="mc_shapley")
    with pytest.raises(ConfigError, match="already registered"):
        register_sampler(type("Clash", (PermutationSampler,), {"name": "permutation"}))
    assert main(["eval", "--sampler", "permutation_twn_test"]) == 2
    assert "Did you mean 'permutation_twin_test'" in capsys.readouterr().err


def test_a_registered_adversary_is_listed_and_usable_by_name(capsys):
    from coalition_gym.reports.robustness import adversarial_pool

    register_adversary("echo_test", lambda seat: Echo(), "answers 7 to everything (a registry test)")
    try:
        assert main(["pools"]) == 0
        out = capsys.readouterr().out
        assert "echo_test: answers 7 to everything" in out and "persuader: a wrong answer argued" in out
        pool = adversarial_pool(load_pool("sim:demo"), "echo_test", ["atlas"])
        assert isinstance(pool.members["atlas"], Echo) and pool.name == "sim:demo+echo_test"
        profiled = adversarial_pool(load_pool("sim:demo"), "persuader", ["atlas"])  # a built-in, the same way
        assert profiled.members["atlas"].profile.adversary == "persuader"
        with pytest.raises(ConfigError, match="'persuader' is a simulated profile"):
            register_adversary("persuader", lambda seat: Echo(), "x")
        with pytest.raises(ConfigError, match="'echo_test' is already registered"):
            register_adversary("echo_test", lambda seat: Echo(), "x")
    finally:
        REGISTERED_ADVERSARIES.pop("echo_test")


def test_a_registered_pool_preset_is_listed_and_usable_by_name(capsys):
    def duo(name):
        size = int(name[len("echo-duo-"):])
        return load_pool([(f"e{k}", Echo()) for k in range(size)])

    def check(name):
        if not name[len("echo-duo-"):].isdigit():
            raise ConfigError(f"pool {name!r}: echo-duo-N takes a number")

    pools.register_pool("echo-duo-N", duo, "N echo members (a registry test)", prefix="echo-duo-", check=check,
                        summary=lambda name: "members: e0, e1, ...")
    try:
        assert "echo-duo-N" in pools.pool_names() and main(["pools"]) == 0
        assert "echo-duo-N\n  N echo members (a registry test)\n  members: e0, e1, ..." in capsys.readouterr().out
        assert load_pool("echo-duo-3").member_names == ["e0", "e1", "e2"]
        with pytest.raises(ConfigError, match="echo-duo-N takes a number"):
            load_pool("echo-duo-x")
        with pytest.raises(ConfigError, match="'sim:demo' is already registered"):
            pools.register_pool("sim:demo", duo, "x")
        assert main(["run", "coalition_gym/MajorityVote-v0", "--pool", "echo-duo-2", "--episodes", "2"]) == 0
    finally:
        pools.POOL_PRESETS.pop("echo-duo-N")
