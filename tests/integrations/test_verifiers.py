"""The verifiers environment (coalition_gym.integrations.verifiers): run through verifiers' own evaluation entry
point against a real `transformers serve` of a shipped zoo model, its rewards are the system scores of the same
protocol with that model in the seat run in-process (`cgym run`'s run_env) on the same items and seed; the policy
never sees a gold answer; bad inputs fail in one line before any model loads."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from servers import transformers_serve

vf = pytest.importorskip("verifiers.v1", reason="verifiers (the serve extra) is not installed")

from coalition_gym.agents.base import Generator  # noqa: E402
from coalition_gym.agents.zoo import shipped  # noqa: E402
from coalition_gym.envs.system import SystemSpec  # noqa: E402
from coalition_gym.errors import ConfigError, UnknownNameError  # noqa: E402
from coalition_gym.envs.runner import episode_seed  # noqa: E402
from coalition_gym.integrations.verifiers import (  # noqa: E402
    CoalitionEnvConfig,
    CoalitionTasksetConfig,
    load_environment,
)
from coalition_gym.tasks import TASKS, register_task  # noqa: E402
from coalition_gym.tasks.base import Task  # noqa: E402
from coalition_gym.training.seat_driver import SeatDriver  # noqa: E402
from coalition_gym.types import Item, Sample  # noqa: E402

FROZEN = ("polymath", "quill")
SEAT_MODEL = "abacus"
N_ITEMS = 4
# the seat's sampling on both sides: greedy, the zoo's 16-token cap
SAMPLING = {"temperature": 0.0, "max_tokens": 16}
SETTINGS = {"rounds": 2, "tie_break": "random"}  # two rounds: the protocol writes the seat's second prompt


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`transformers serve` on 127.0.0.1 with the shipped zoo:default/abacus folder."""
    folder = shipped.shipped_dir("default") / SEAT_MODEL
    with transformers_serve(folder, tmp_path_factory.mktemp("serve") / "serve.log", timeout=180) as url:
        yield url, str(folder)


def _pool_file(path: Path, url: str | None, model: str | None) -> Path:
    """The frozen zoo members (and, given a server, the seat's model behind it, named like the seat)."""
    lines = ["name: parity", "members:"] + [f"  - {{name: {m}, backend: hf, model: 'zoo:default/{m}', "
                                            f"style: compact}}" for m in FROZEN]
    if url is not None:
        lines.append(f"  - {{name: policy, backend: openai, model: '{model}', base_url: '{url}', style: compact, "
                     f"sampling: {{temperature: 0.0, max_new_tokens: {SAMPLING['max_tokens']}}}}}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_vf_eval_rewards_are_the_in_process_system_scores(served, tmp_path):
    from verifiers.v1.cli.eval.runner import run_eval
    from verifiers.v1.configs.cli.eval import EvalConfig

    from coalition_gym.reports.episodes import EpisodeRunOptions, run_env

    url, model = served
    frozen_pool = _pool_file(tmp_path / "frozen.yaml", None, None)
    taskset = CoalitionTasksetConfig(env_id="coalition_gym/Debate-v0", pool=str(frozen_pool), task_name="zoo:arith",
                                     split="test", n_items=N_ITEMS, seed=0, policy_style="compact",
                                     settings=SETTINGS)
    config = EvalConfig(env=CoalitionEnvConfig(taskset=taskset), model=model,
                        client=vf.EvalClientConfig(base_url=url, api_key_var="CGYM_UNSET_TEST_KEY"),
                        sampling=SAMPLING, rich=None, push=False, output_dir=tmp_path / "vf", clean=True)
    episodes = asyncio.run(run_eval(config))  # what `vf-eval` runs
    assert len(episodes) == N_ITEMS and all(e.ok for e in episodes), [e.errors for e in episodes]
    rewards, turns = {}, {}
    for episode in episodes:
        assert {t.task.data.id for t in episode.traces} == {episode.task.data.id}
        assert {t.reward for t in episode.traces} == {episode.traces[0].reward}  # one reward per episode
        rewards[episode.task.data.id] = episode.traces[0].reward
        turns[episode.task.data.id] = len(episode.traces)
        assert all(t.agent.trainable for t in episode.traces)
        metrics = episode.traces[0].metrics
        assert metrics["system_score"] == episode.traces[0].reward
        assert 0.0 <= metrics["policy_score"] <= 1.0 and "credit_loo/policy" in metrics
    assert set(turns.values()) == {SETTINGS["rounds"]}  # the seat answered every debate round

    full_pool = _pool_file(tmp_path / "full.yaml", url, model)
    run = run_env(SystemSpec("debate", "zoo:arith", str(full_pool), None, "test", protocol_settings=SETTINGS,
                             n_items=N_ITEMS), EpisodeRunOptions(episodes=N_ITEMS, seed=0))
    in_process = {r.item_id: r.score for r in run.results}
    assert list(run.system.members) == [*FROZEN, "policy"]
    assert rewards == in_process
    # leave-one-out credit of the seat: the system score minus the frozen members' alone, same seeds
    alone = run_env(SystemSpec("debate", "zoo:arith", str(frozen_pool), None, "test", protocol_settings=SETTINGS,
                               n_items=N_ITEMS), EpisodeRunOptions(episodes=N_ITEMS, seed=0))
    credit = {e.task.data.id: e.traces[0].metrics["credit_loo/policy"] for e in episodes}
    assert credit == {r.item_id: in_process[r.item_id] - r.score for r in alone.results}
    # what verifiers wrote: the policy's prompts and the tasks, never a gold answer
    written = (tmp_path / "vf").rglob("traces.jsonl")
    assert all('"gold"' not in p.read_text() for p in written)


def test_vf_eval_finds_the_environment_by_its_plugin_id(tmp_path):
    """`vf-eval coalition-gym-verifiers --env.taskset.*` resolves to this environment's config (a dry run: the
    config is narrowed through the plugin, nothing is evaluated)."""
    exe = Path(sys.executable).with_name("vf-eval")
    out = subprocess.run([str(exe), "coalition-gym-verifiers", "-m", "some-model", "-n", "2", "--no-push",
                          "--env.taskset.env-id", "coalition_gym/MajorityVote-v0", "--env.taskset.pool", "sim:demo",
                          "--env.taskset.settings", '{"tie_break": "first"}', "--dry-run"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    (resolved,) = tmp_path.rglob("resolved/eval.json")
    env = json.loads(resolved.read_text())["env"]
    assert env["taskset"]["id"] == "coalition-gym-verifiers" and env["taskset"]["pool"] == "sim:demo"
    assert env["taskset"]["settings"] == {"tie_break": "first"} and env["policy"]["runtime"]["type"] == "subprocess"


# -- the policy's view -----------------------------------------------------------------------------------

GOLD, META = "GOLD-SENTINEL-7731", "META-SENTINEL-5523"


class _Sentinel(Task):
    """Items whose gold answer and scorer data are strings no prompt may contain."""

    name = "verifiers_sentinel"
    answer_kind = "exact"

    def items(self, split: str = "test") -> list[Item]:
        return [Item(id=f"sentinel/{split}/{k}", question=f"Say the word number {k}.", gold=f"{GOLD}-{k}",
                     meta={"tests": META}) for k in range(3)]


@pytest.fixture
def sentinel_task():
    register_task(_Sentinel.name, _Sentinel)
    yield _Sentinel.name
    TASKS.pop(_Sentinel.name, None)


@pytest.mark.parametrize("protocol", ["majority_vote", "debate"])
def test_the_policy_never_sees_the_gold_answer_or_scorer_data(sentinel_task, protocol):
    env = load_environment(protocol, pool="sim:independent", task=sentinel_task, split="test", credit=False)
    tasks = list(env.taskset)
    assert len(tasks) == 3
    visible = json.dumps([t.data.model_dump(mode="json") for t in tasks]) + env.config.model_dump_json()
    assert GOLD not in visible and META not in visible
    driver = env.driver
    assert all(it.gold == "" and not it.meta for it in driver.items)
    prompts = {t.data.id: t.data.model_dump(mode="json")["prompt"] for t in tasks}
    for item in driver.items:  # an episode's first prompt is its task's prompt, and holds no gold
        run = driver.start(driver.system.item(item.id), 0)
        ask = driver.pending(run)
        assert ask is not None and ask.item.gold == "" and not ask.item.meta
        text = json.dumps([m.content for m in ask.messages])
        assert GOLD not in text and META not in text
        assert [{"role": m.role, "content": m.content} for m in ask.messages] == prompts[item.id]


def test_a_seat_driver_episode_is_the_gym_env_episode():
    """Driven by hand with the same replies, the driver scores what CollaborationEnv scores."""
    import gymnasium as gym

    spec = SystemSpec("debate", "rg/basic_arithmetic", "sim:independent", split="test", n_items=2,
                      protocol_settings={"rounds": 2})
    driver = SeatDriver(spec)
    env = gym.make("coalition_gym/Debate-v0", task="rg/basic_arithmetic", collaborators="sim:independent",
                   split="test", n_items=2, rounds=2)
    for item in driver.items:
        run = driver.start(driver.system.item(item.id), episode_seed(3, item))
        obs, info = env.reset(options={"item_id": item.id, "episode_seed": episode_seed(3, item)})
        done, reward = False, 0.0
        while not run.done:
            reply = f"I think so.\nAnswer: {len(obs) % 7}"
            assert driver.pending(run).messages and obs
            driver.answer(run, reply)
            obs, reward, done, _, info = env.step(reply)
        record = driver.record(run)
        assert done and record.system_score == reward and record.policy_score == info["policy_score"]
        assert record.transcript == info["transcript"] and record.cost == info["cost"]


class _Says(Generator):
    """A policy that always replies the same text."""

    identity = "says"

    def __init__(self, text: str):
        self.text = text

    def generate(self, asks):
        return [Sample(text=self.text) for _ in asks]


@pytest.mark.parametrize("protocol, settings", [("majority_vote", {}), ("debate", {"rounds": 2})])
def test_rewards_and_leave_one_out_credit_are_the_coalition_games(protocol, settings):
    """The reward is v(full coalition) and each reported credit is v(full) - v(full without the member), per
    item, of the CoalitionGame (the valuation `cgym eval` runs) with the same replies in the seat."""
    from coalition_gym.agents.pools import Pool, load_pool
    from coalition_gym.envs.system import System
    from coalition_gym.valuation.game import CoalitionGame

    reply = "Let me see.\nAnswer: 4"
    pool = load_pool("sim:independent")
    spec = SystemSpec(protocol, "rg/basic_arithmetic", pool, split="test", n_items=6, protocol_settings=settings)
    driver = SeatDriver(spec)
    with_policy = Pool(members={**pool.members, "policy": _Says(reply)}, helpers=pool.helpers,
                       styles={**pool.styles, "policy": "chat"}, name="with-policy")
    game = CoalitionGame(System.build(SystemSpec(protocol, "rg/basic_arithmetic", with_policy, split="test",
                                                 n_items=6, protocol_settings=settings)), seed=5)
    players = frozenset(game.players)
    credited = set()
    for k, item in enumerate(driver.items):
        run = driver.start(driver.system.item(item.id), episode_seed(5, item))
        while not run.done:
            driver.answer(run, reply)
        record = driver.record(run, credit=True)
        assert record.system_score == game.per_item(players)[k]
        for member, credit in record.credit.items():
            assert credit == pytest.approx(game.per_item(players)[k] - game.per_item(players - {member})[k])
        credited |= set(record.credit)
    assert "policy" in credited
    if protocol == "majority_vote":  # one-shot: every member's credit can be replayed
        assert credited == players


# -- bad inputs ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, error, words", [
    ({"env_id": "coalition_gym/Nope-v0"}, UnknownNameError, "environment id"),
    ({"pool": "zoo:nope"}, UnknownNameError, "zoo:nope"),
    ({"pool": "no/such/pool.yaml"}, ConfigError, "does not exist"),
    ({"pool": ["a", "b"]}, ConfigError, "pool preset name or a pool file"),
    ({"split": "holdout"}, ConfigError, "split 'holdout'"),
    ({"n_items": 0}, ConfigError, "n_items"),
    ({"task": "rg/no_such_dataset_here"}, Exception, "no_such_dataset_here"),
    ({"no_such_setting": 1}, ConfigError, "no_such_setting"),
])
def test_bad_inputs_fail_in_one_line_before_any_work(kwargs, error, words, monkeypatch):
    import coalition_gym.agents.pools as pools

    def no_models(*a, **k):
        raise AssertionError("a model was loaded before the input was checked")

    monkeypatch.setattr(pools, "zoo_pool", no_models)
    kwargs = {"env_id": "coalition_gym/Debate-v0", "pool": "zoo:default", **kwargs}
    with pytest.raises(error) as err:
        load_environment(kwargs.pop("env_id"), **kwargs)
    message = str(err.value)
    assert words in message and "\n" not in message.strip()


def test_concurrent_rollouts_share_waves_and_each_is_its_solo_episode():
    """`vf-eval -c N`: episodes run as concurrent coroutines; the frozen members' requests of all of them go out
    in shared calls, and each episode's reward is the one it gets alone."""
    from types import SimpleNamespace

    class Policy:
        """verifiers' agent, as the environment sees it: one trace per turn, the reply in its last message."""

        def __init__(self):
            self.count = 0

        async def run(self, turn):
            self.count += 1
            await asyncio.sleep(0.001 * (self.count % 5))  # the turns come back in a scrambled order
            text = f"Answer: {len(turn.data.prompt[-1].content) % 7}"
            return SimpleNamespace(ok=True, id=f"t{self.count}", last_error=None,
                                   assistant_messages=[SimpleNamespace(content=text)])

    def rewards(concurrent: bool) -> tuple[list[float], object]:
        env = load_environment("coalition_gym/Debate-v0", pool="sim:independent", task="rg/basic_arithmetic",
                               split="test", n_items=12, rounds=2, credit=False)
        tasks = list(env.taskset)
        agents = SimpleNamespace(policy=Policy())

        async def play(task):
            await env.run(task, agents)
            return [record.system_score for record in env._records.values()
                    if record.item_id == task.data.id][:1]

        async def main():
            if concurrent:
                return await asyncio.gather(*(play(t) for t in tasks))
            return [await play(t) for t in tasks]

        return [r[0] for r in asyncio.run(main())], env.driver.stats

    alone, solo_stats = rewards(False)
    together, stats = rewards(True)
    assert together == alone
    assert stats.batching_factor > 2 * solo_stats.batching_factor  # the concurrent episodes shared calls
