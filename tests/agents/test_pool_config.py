"""Pool configs (YAML/JSON files or dicts) that mix backends, their validation, and the zoo presets."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
from conftest import FIXTURES as _FIXTURES  # noqa: E402
from conftest import Scripted

from coalition_gym.agents.hf import HFGenerator
from coalition_gym.agents.openai_api import OpenAIGenerator
from coalition_gym.agents.pools import Pool, WithSampling, load_pool, pool_from_config, pool_names
from coalition_gym.agents.simulated import SimulatedAgent
from coalition_gym.agents.zoo import build_zoo, zoo_task
from coalition_gym.errors import BackendError, ConfigError, UnknownNameError
from coalition_gym.types import Ask, Message, SamplingParams

FIXTURES = _FIXTURES / "pools"


@pytest.fixture
def home(tmp_path_factory, monkeypatch) -> Path:
    """A COALITION_GYM_HOME holding the tiny zoo (built once per session, shared with other test files)."""
    root = tmp_path_factory.getbasetemp() / "cgym-home"
    build_zoo("tiny", root / "zoo", progress=False)
    monkeypatch.setenv("COALITION_GYM_HOME", str(root))
    return root


def test_yaml_pool_mixes_backends(home):
    pool = load_pool(str(FIXTURES / "mixed.yaml"))
    assert pool.name == "mixed" and pool.member_names == ["pico", "pico-cold", "atlas", "rookie", "remote"]
    assert isinstance(pool.members["pico"], HFGenerator)
    cold = pool.members["pico-cold"]
    assert isinstance(cold, WithSampling) and cold.inner is pool.members["pico"]  # one loaded model, shared
    assert cold.identity != pool.members["pico"].identity
    assert isinstance(pool.members["atlas"], SimulatedAgent) and pool.members["atlas"].profile.skill == 0.72
    assert pool.members["rookie"].profile.skill == 0.3 and pool.members["rookie"].profile.name == "rookie"
    assert isinstance(pool.members["remote"], OpenAIGenerator)
    assert pool.styles == {"pico": "compact", "pico-cold": "compact", "atlas": "chat", "rookie": "chat",
                           "remote": "chat", "judge": "chat"}
    assert list(pool.helpers) == ["judge"] and pool.dev_scores == {"atlas": 0.7, "pico": 0.1}


def test_a_mixed_pool_runs_a_protocol_with_real_and_simulated_members(home):
    from coalition_gym.envs.protocols import make_protocol
    from coalition_gym.envs.runner import RunStats, run_episodes
    from coalition_gym.envs.system import System, SystemSpec

    pool = load_pool(FIXTURES / "mixed.yaml")
    task = zoo_task("arith", size=4)
    stats = RunStats()
    system = System.build(SystemSpec(make_protocol("debate", rounds=2, max_new_tokens=8), task,
                                     Pool(members=dict(pool.backends()), styles=pool.styles),
                                     ["pico", "pico-cold", "atlas", "rookie"], split=None))
    results = run_episodes(system, task.items("test"), stats=stats)
    assert len(results) == 4 and all(r.error is None for r in results)
    texts = [t for r in results for t in r.outcome.transcript if t.member == "pico"]
    assert len(texts) == 8  # two rounds, four items
    # Per wave, one call per Generator object: pico, pico-cold (its own sampling, same loaded model),
    # atlas and rookie.
    assert stats.backend_calls == 2 * 4


def test_json_pool_file_and_dict_config():
    pool = load_pool(FIXTURES / "simulated.json")
    assert pool.name == "simulated" and pool.styles == {"a": "chat", "b": "compact"}
    assert set(pool.helpers) == {"judge", "fuser"}  # default simulated helpers when none are listed
    again = load_pool({"members": [{"name": "a", "backend": "sim"}]})
    assert again.member_names == ["a"]


def test_member_sampling_replaces_the_protocols():
    inner = Scripted(lambda a: f"{a.params.temperature} {a.params.top_p} {a.params.max_new_tokens}")
    wrapped = WithSampling(inner, temperature=0.0, max_new_tokens=5)
    asks = [Ask("m", (Message("user", "q"),), seed=1, params=SamplingParams(0.7, 0.9, 512)),
            Ask("m", (Message("user", "q"),), seed=1, params=SamplingParams(0.7, 0.9, 3))]
    assert [s.text for s in wrapped.generate(asks)] == ["0.0 0.9 5", "0.0 0.9 3"]
    assert wrapped.identity == "scripted|max_new_tokens=5,temperature=0.0"


def member(**kw):
    return {"name": "m", "backend": "sim", **kw}


@pytest.mark.parametrize("config, error, match", [
    ({"members": [member(backend="llama")]}, ConfigError, r"backend='llama'; use one of sim, hf, openai, vllm"),
    ({"members": [member(backend="hf")]}, ConfigError, "needs 'model'"),
    ({"members": [member(), member()]}, ConfigError, "'m' is used twice"),
    ({"members": [member()], "helpers": [member()]}, ConfigError, "'m' is used twice"),
    ({"members": [member(backend="hf", model="x", max_batch_size="8")]}, ConfigError,
     "max_batch_size='8' must be an integer >= 1"),
    ({"members": [member(backend="hf", model="x", max_batch_size=0)]}, ConfigError, "max_batch_size=0 must be >= 1"),
    ({"members": [member(backend="hf", model="x", device=True)]}, ConfigError, "device=True must be a string"),
    ({"members": [member(backend="openai", model="x", base_url="http://h/v1", max_retries=True)]}, ConfigError,
     "max_retries=True must be an integer"),
    ({"members": [member(backend="openai", model="gpt")]}, ConfigError, "needs base_url"),
    ({"members": [member(base_url="http://h")]}, ConfigError, "unknown key 'base_url' for backend 'sim'"),
    ({"members": [member(style="fancy")]}, ConfigError, "style='fancy'"),
    ({"members": [member(sampling={"temperature": "hot"})]}, ConfigError, "must be a number"),
    ({"members": [member(sampling={"temp": 1})]}, ConfigError, "unknown sampling key 'temp'"),
    ({"members": [member(sampling={"top_p": 0})]}, ConfigError, r"sampling: top_p=0 must be in \(0, 1\]"),
    ({"members": [member(profile={"skil": 0.5})]}, ConfigError, "unknown profile field 'skil'"),
    ({"members": [member(profile={"skill": 2})]}, ConfigError, r"skill=2 must be in \[0, 1\]"),
    ({"members": [member(model="sim:nope/x")]}, ConfigError, "sim:<preset>/<member>"),
    ({"members": [member(model="sim:demo/zed")]}, UnknownNameError, "unknown member of sim:demo 'zed'"),
    ({"members": [member(backend="hf", model="x", profile={"skill": 1})]}, ConfigError, "only for backend 'sim'"),
    ({"members": [member(name="")]}, ConfigError, "'name' must be a non-empty string"),
    ({"members": ["m"]}, ConfigError, "an entry is a mapping"),
    ({"members": []}, ConfigError, "non-empty list"),
    ({"members": [member()], "helpers": {"judge": 1}}, ConfigError, "'helpers' must be a list"),
    ({"members": [member()], "extra": 1}, ConfigError, "unknown key 'extra'"),
    ({"members": [member()], "dev_scores": {"zz": 0.5}}, UnknownNameError, "'zz'"),
    ({"members": [member()], "dev_scores": {"m": "high"}}, ConfigError, "dev_scores must map"),
    ({"members": [member(backend="hf", model="/no/such/folder")]}, ConfigError, "does not exist"),
    ({"members": [member(backend="hf", model="zoo:tiny")]}, ConfigError, "zoo:<recipe>/<model>"),
])
def test_bad_configs_get_clear_errors(config, error, match):
    with pytest.raises(error, match=match):
        pool_from_config(config)


def test_bad_files_get_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_pool(str(tmp_path / "pool.yaml"))
    broken = tmp_path / "broken.yaml"
    broken.write_text("members: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_pool(str(broken))
    listing = tmp_path / "list.json"
    listing.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_pool(listing)


def test_vllm_members_need_the_extra():
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(BackendError, match=r"coalition-gym\[vllm\]"):
            pool_from_config({"members": [member(backend="vllm", model="some/model")]})
    else:
        pytest.skip("vllm is installed here")


def test_presets_by_name():
    names = pool_names()
    assert {"sim:demo", "sim:random-N", "zoo:default", "zoo:tiny"} <= set(names)
    assert load_pool("sim:random-3").member_names == ["m01", "m02", "m03"]
    with pytest.raises(UnknownNameError, match="Did you mean 'zoo:tiny'"):
        load_pool("zoo:tin")


def test_zoo_preset_is_real_transformers_models(home):
    pool = load_pool("zoo:tiny")
    assert pool.name == "zoo:tiny" and pool.member_names == ["pico", "nano"]
    assert all(isinstance(g, HFGenerator) for g in pool.members.values())
    assert set(pool.styles.values()) == {"compact"} and set(pool.helpers) == {"judge", "fuser"}
    assert pool.dev_scores == {}  # skills differ by task: tie-break scores only for a named task
    from coalition_gym.agents.pools import zoo_pool

    scored = zoo_pool("tiny", dev_task="arith")
    assert set(scored.dev_scores) == {"pico", "nano"} and all(0 <= v <= 1 for v in scored.dev_scores.values())
    with pytest.raises(UnknownNameError, match="zoo task 'algebra'"):
        zoo_pool("tiny", dev_task="algebra")
    assert "zoo/shipped/tiny/pico" in str(pool.members["pico"].identity)  # the shipped copy, not a build


def test_gym_make_with_zoo_collaborators(home):
    env = gym.make("coalition_gym/Debate-v0", collaborators="zoo:tiny", task=zoo_task("arith", size=5),
                   rounds=2, max_new_tokens=8, policy_style="compact")
    obs, info = env.reset(seed=0)
    assert info["policy_asked"] and obs.endswith("Answer:")
    done, steps = False, 0
    while not done:
        obs, reward, done, _, info = env.step("Answer: 4")
        steps += 1
    assert steps == 2 and 0.0 <= reward <= 1.0
    assert {t["member"] for t in info["transcript"]} >= {"pico", "nano"}


def test_cgym_eval_runs_the_zoo_pool(home, tmp_path, capsys):
    from coalition_gym.cli import main

    code = main(["eval", "--pool", "zoo:tiny", "--protocol", "majority_vote", "--items", "3", "--estimator", "loo",
                 "--bootstrap", "20", "--out", str(tmp_path / "eval")])
    assert code == 0
    out = capsys.readouterr().out
    assert "pool zoo:tiny" in out and "pico" in out and "nano" in out


def test_replicas_split_a_batch_and_keep_its_order():
    from conftest import Scripted

    from coalition_gym.agents.replicas import ReplicaGenerator
    from coalition_gym.types import Ask, Message

    first, second = Scripted(lambda a: f"r1:{a.seed}", "m"), Scripted(lambda a: f"r2:{a.seed}", "m")
    gen = ReplicaGenerator([first, second])
    asks = [Ask("x", (Message("user", "q"),), seed=k) for k in range(5)]
    assert [s.text for s in gen.generate(asks)] == ["r1:0", "r2:1", "r1:2", "r2:3", "r1:4"]
    assert [len(c) for c in first.calls] == [3] and [len(c) for c in second.calls] == [2]


def test_openai_member_with_several_base_urls():
    from coalition_gym.agents.pools import load_pool
    from coalition_gym.agents.replicas import ReplicaGenerator

    pool = load_pool({"members": [{"name": "served", "backend": "openai", "model": "m",
                                   "base_url": ["http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"]}]})
    assert isinstance(pool.members["served"], ReplicaGenerator) and len(pool.members["served"].replicas) == 2


def test_a_member_whose_server_does_not_answer_is_named_when_the_pool_loads():
    import socket
    import warnings

    from coalition_gym.agents.pools import UnreachableServerWarning

    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    up = f"http://127.0.0.1:{listening.getsockname()[1]}/v1"
    config = {"name": "half", "members": [
        {"name": "up", "backend": "openai", "model": "m", "base_url": up},
        {"name": "down", "backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"},
        {"name": "down2", "backend": "openai", "model": "n", "base_url": "http://127.0.0.1:9/v1"},
        {"name": "local", "backend": "sim", "model": "sim:demo/atlas"}]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pool = pool_from_config(config)
    listening.close()
    said = [str(w.message) for w in caught if issubclass(w.category, UnreachableServerWarning)]
    assert set(pool.members) == {"up", "down", "down2", "local"}  # a warning, not a refusal: it may come up
    assert len(said) == 1 and "down, down2 at http://127.0.0.1:9/v1 does not answer" in said[0], said
