"""The Ray executor: same numbers as local, shares the generation cache, survives a killed worker."""

import os
import sys

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor tests need the 'ray' extra")

from conftest import TESTS as HERE  # noqa: E402  (ray_helpers.py lives there)
from ray_helpers import DiesOnce  # noqa: E402

from coalition_gym.agents import load_pool  # noqa: E402
from coalition_gym.agents.cache import GenerationCache  # noqa: E402
from coalition_gym.agents.pools import Pool  # noqa: E402
from coalition_gym.envs.executors import RayExecutor, make_executor  # noqa: E402
from coalition_gym.envs.protocols import make_protocol  # noqa: E402
from coalition_gym.envs.system import System, SystemSpec  # noqa: E402
from coalition_gym.errors import BackendError, ConfigError  # noqa: E402
from coalition_gym.tasks import make  # noqa: E402
from coalition_gym.valuation import CoalitionGame, exact_shapley  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def executor():
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), str(HERE), os.environ.get("PYTHONPATH", "")])
    ex = RayExecutor(num_cpus=2)
    yield ex
    ray.shutdown()


def shapley(pool, executor=None, cache=None, items=25):
    task = make("rg/basic_arithmetic", size=items)
    game = CoalitionGame(System.build(SystemSpec(make_protocol("debate", rounds=2), task, pool,
                                                 split="test"), cache=cache),
                         seed=3, executor=executor)
    return exact_shapley(game, n_boot=50), game


def test_ray_gives_the_local_numbers_and_shares_the_cache(executor, tmp_path):
    pool = load_pool("sim:demo")
    local, local_game = shapley(pool)
    cache = GenerationCache(tmp_path / "c.sqlite")
    remote, remote_game = shapley(pool, executor, cache)
    assert remote.values.tolist() == local.values.tolist()
    assert (remote.per_item == local.per_item).all()
    assert remote_game.generations >= local_game.generations  # shards may repeat a little shared work
    # every distinct generation is on disk (with the dev answers that measured the members' dev scores)
    assert len(cache) == local_game.generations + remote_game.dev.generated
    again, again_game = shapley(pool, executor, cache)
    assert again.values.tolist() == local.values.tolist() and again_game.generations == 0


def test_ray_reports_progress_shard_by_shard(executor):
    """Issue 41.2: the progress feed hears of every episode and generation as shards finish, on Ray too."""
    task = make("rg/basic_arithmetic", size=12)
    system = System.build(SystemSpec(make_protocol("debate", rounds=2), task, load_pool("sim:demo"), split="test"))
    contexts = [system.context(it, 7) for it in system.items]
    heard = []
    outcomes, counts = executor.run(system.protocol, contexts, system.backends, GenerationCache(None),
                                    lambda episodes, generations: heard.append((episodes, generations)))
    assert len(outcomes) == 12 and len(heard) > 1  # more than one report: shards, not one at the end
    assert sum(e for e, _ in heard) == 12 and sum(g for _, g in heard) == counts.generations > 0


def test_a_killed_worker_loses_no_finished_work(executor, tmp_path):
    base = load_pool("sim:demo")
    marker = tmp_path / "died"
    dying = Pool({n: DiesOnce(g, str(marker)) for n, g in base.members.items()}, base.helpers, name="dying")
    local, _ = shapley(base)
    cache = GenerationCache(tmp_path / "c.sqlite")
    remote, game = shapley(dying, executor, cache)
    assert marker.exists(), "a worker should have died"
    assert remote.values.tolist() == local.values.tolist()


def test_cli_eval_with_ray_matches_local(executor, tmp_path):
    import json

    from coalition_gym.cli import main

    args = ["eval", "--items", "20", "--estimator", "loo", "--bootstrap", "50"]
    assert main(args + ["--out", str(tmp_path / "local")]) == 0
    assert main(args + ["--out", str(tmp_path / "ray"), "--executor", "ray"]) == 0
    local = json.loads((tmp_path / "local" / "summary.json").read_text())
    remote = json.loads((tmp_path / "ray" / "summary.json").read_text())
    assert remote["executor"] == "ray" and remote["models"] == local["models"]


def test_unreachable_address_and_missing_ray(monkeypatch):
    with pytest.raises(BackendError, match="does not answer"):
        RayExecutor(address="127.0.0.1:1")
    with pytest.raises(ConfigError, match="host:port"):
        RayExecutor(address="nonsense")
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ConfigError, match=r"coalition-gym\[ray\]"):
        make_executor("ray")
    with pytest.raises(ConfigError, match="unknown executor"):
        make_executor("dask")


def test_training_rollouts_on_ray_equal_local_ones(executor, tmp_path):
    from coalition_gym.training.config import make_config
    from coalition_gym.training.trainer import Trainer

    cfg = make_config("crl", preset="tiny", policies=["zoo:tiny/pico"], task="zoo:arith", task_kwargs={"size": 20},
                      items_per_step=3, group_size=2, collaborators="sim:demo", members=["atlas", "delta"])
    local = Trainer(cfg, out=tmp_path / "local")
    remote = Trainer(cfg, out=tmp_path / "ray", executor=executor)
    items = local.task.items("train")[:3]
    a, b = local.rollouts(items, step_seed=7), remote.rollouts(items, step_seed=7)
    assert [(r.index, r.group, r.reward) for r in a] == [(r.index, r.group, r.reward) for r in b]
    assert [[c.completion_ids for c in r.calls] for r in a] == [[c.completion_ids for c in r.calls] for r in b]
    assert all(c.rollout == r.index for r in b for c in r.calls)


def test_distributed_rollouts_equal_the_local_ones(executor):
    from coalition_gym.agents.pools import load_pool
    from coalition_gym.training.rollouts import RecordingPolicy, RolloutPlan, collect, collect_distributed

    policy_backend = load_pool("zoo:tiny").members["pico"]
    task = make("zoo:arith", size=20)
    system = System.build(SystemSpec(make_protocol("majority_vote", max_new_tokens=6), task, load_pool("sim:split"),
                                     ["ana", "ben"], split=None), {"policy": "compact"})
    items, plan = task.items("train")[:4], RolloutPlan(group_size=2, seed=7, first_group=3)
    local = collect(system, items, RecordingPolicy(policy_backend), plan)
    remote = collect_distributed(executor, system, items, RecordingPolicy(policy_backend), plan)

    def view(rollouts):
        return [(r.index, r.group, r.item.id, r.reward, [(c.rollout, c.completion_ids) for c in r.calls])
                for r in rollouts]
    assert view(remote) == view(local) and len(local) == 8


def test_a_team_trains_on_ray_with_the_local_rollouts_credit_and_cost(executor, tmp_path):
    """Ray for any number of seats: two seats' rollouts on the workers equal the local ones, their leave-one-out
    credit and the counterfactuals' cost included, and a team run with the Ray executor trains."""
    from coalition_gym.training.config import make_config
    from coalition_gym.training.trainer import Trainer

    cfg = make_config("team-crl", "tiny", policies=["zoo:tiny/pico", "zoo:tiny/nano"], task="zoo:arith",
                      task_kwargs={"size": 20}, items_per_step=3, group_size=2, collaborators="sim:demo",
                      members=["atlas"], protocol="majority_vote", credit="loo", steps=1, eval_every=1,
                      eval_items=2, test_items=2, probe_groups=0)
    local = Trainer(cfg, out=tmp_path / "local")
    remote = Trainer(cfg, out=tmp_path / "ray", executor=executor)
    items = local.task.items("train")[:3]
    a, b = local.rollouts(items, step_seed=7), remote.rollouts(items, step_seed=7)

    def view(rollouts):
        return [(r.index, r.group, r.reward, r.credit, [(c.seat, c.rollout, c.completion_ids) for c in r.calls])
                for r in rollouts]
    assert view(a) == view(b) and {c.seat for r in b for c in r.calls} == {"seat0", "seat1"}
    assert remote.last_cost == local.last_cost and local.last_cost.counterfactuals > 0
    remote.fit(progress=False)
    assert remote.state.step == 1 and (tmp_path / "ray" / "seat1" / "last").is_dir()
