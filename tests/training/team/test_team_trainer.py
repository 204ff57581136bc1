"""The team trainer on two tiny zoo seats: both seats learn while the frozen members and the pool's models do
not; every credit mode runs end to end with per-seat diagnostics, reports and checkpoints; the refusals come
before any model loads or rollout runs; a SIGKILLed run resumes to the same weights and metrics; and the
PettingZoo env, with the seats as agents, is the external view of the same executions."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import yaml

from coalition_gym.agents.base import Generator, render_plain
from coalition_gym.agents.pools import load_pool
from coalition_gym.envs.protocols import Protocol, make_protocol
from coalition_gym.envs.pz_env import CollaborationParallelEnv
from coalition_gym.envs.runner import episode_seed
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.errors import ConfigError
from coalition_gym.tasks import make as make_task
from coalition_gym.training.config import TrainConfig, make_config
from coalition_gym.training.export import export_run, pool_line
from coalition_gym.training.policy_model import resolve_policy
from coalition_gym.training.recipes import RecipeContext, get_recipe
from coalition_gym.training.rollouts import RecordingPolicy, RolloutPlan, collect
from coalition_gym.training.team.trainer import comparable_metrics
from coalition_gym.training.trainer import Trainer
from coalition_gym.types import Outcome, Sample

SEATS = ("zoo:tiny/pico", "zoo:tiny/nano")


def config(**kw) -> TrainConfig:
    base = dict(policies=list(SEATS), task="zoo:arith", task_kwargs={"size": 40}, steps=2, eval_every=2,
                eval_items=3, test_items=3, items_per_step=2, group_size=2, collaborators="sim:demo",
                members=["atlas"], protocol="majority_vote")
    base.update(kw)
    return make_config("team-crl", "tiny", **base)


def weights(model) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def folder_digest(path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in Path(path).iterdir() if p.is_file()):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def test_two_seats_train_and_both_change_while_frozen_members_do_not(tmp_path):
    pico = resolve_policy("zoo:tiny/pico")
    pool = tmp_path / "pool.yaml"  # a simulated member and an HF zoo member, both frozen
    pool.write_text(f"name: mixed\nmembers:\n  - {{name: delta, backend: sim, model: sim:demo/delta}}\n"
                    f"  - {{name: frozen_pico, backend: hf, model: '{pico}', max_new_tokens: 8}}\n")
    zoo_before = folder_digest(pico)
    # system credit with fresh draws: the collaborators' draws vary within a group, so every seat gets signal
    cfg = config(collaborators=str(pool), members=["delta", "frozen_pico"], credit="system", collaborator_draws="fresh",
                 group_size=4, steps=2)
    trainer = Trainer(cfg, out=tmp_path / "run")
    frozen = trainer.pool.members["frozen_pico"].model
    start = {s: weights(m) for s, m in trainer.models.items()}
    frozen_start = weights(frozen)
    trainer.fit(progress=False)
    for seat, model in trainer.models.items():
        assert any(not torch.equal(a, b) for a, b in zip(start[seat], weights(model))), f"{seat} did not change"
    assert all(torch.equal(a, b) for a, b in zip(frozen_start, weights(frozen)))  # the pool's model never moves
    assert folder_digest(pico) == zoo_before  # nor its files (the seat loaded from them trains a copy)
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "reward_mean" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for seat in ("seat0", "seat1"):
        assert {f"{seat}/{k}" for k in ("informative_groups", "credit_mean", "credit_var", "adv_nonzero",
                                        "grad_token_share", "loss", "grad_norm")} <= set(steps[0])
        assert any(r[f"{seat}/adv_nonzero"] > 0 for r in steps)
        assert steps[0][f"{seat}/pivotality"] is None  # system credit runs no leave-one-out sub-team


def test_shared_base_seats_train_their_own_adapters_on_one_frozen_model(tmp_path):
    cfg = config(credit="system", collaborator_draws="fresh", group_size=4, members=["delta"], **SHARED_LORA)
    trainer = Trainer(cfg, out=tmp_path / "run")
    seat0, seat1 = (trainer.models[s] for s in trainer.seats)
    assert seat0.peft_model is seat1.peft_model  # one copy of the model ...
    assert not {id(p) for p in seat0.parameters()} & {id(p) for p in seat1.parameters()}  # ... an adapter each
    base = {n: p.detach().clone() for n, p in seat0.inner.named_parameters() if "lora_" not in n}
    start = {s: weights(m) for s, m in trainer.models.items()}
    ids = torch.tensor([[3, 5, 7, 11]])
    trainer.fit(progress=False)
    for seat, model in trainer.models.items():
        assert any(not torch.equal(a, b) for a, b in zip(start[seat], weights(model))), f"{seat} did not change"
        assert len(trainer.optimizers[seat].state) == len(start[seat])  # Adam state for its own adapter only
    assert all(torch.equal(p, base[n]) for n, p in seat0.inner.named_parameters() if "lora_" not in n)
    with torch.no_grad():  # the seats differ: each call runs its own adapter
        assert not torch.allclose(seat0(input_ids=ids).logits, seat1(input_ids=ids).logits)
    trainer.report()
    done = export_run(tmp_path / "run", tmp_path / "export")  # merged weights, one folder per seat
    pool = yaml.safe_load(Path(done["pool"]).read_text())
    merged = {e["name"]: Path(e["model"]) for e in pool["members"] if e["name"] in trainer.seats}
    assert set(merged) == set(trainer.seats) and all((m / "config.json").is_file() for m in merged.values())


@pytest.mark.parametrize("protocol, credit", [("majority_vote", "loo"), ("majority_vote", "shapley"),
                                              ("debate", "loo")])
def test_credit_modes_run_end_to_end(tmp_path, protocol, credit):
    cfg = config(protocol=protocol, credit=credit, protocol_settings={"rounds": 2} if protocol == "debate" else {},
                 probe_groups=0)  # the seats cannot do arith: the probe would refuse them (test_probe_everywhere)
    report = get_recipe("team-crl", "team").train(cfg, RecipeContext(tmp_path / "run"))
    run = tmp_path / "run"
    assert json.loads((run / "report.json").read_text()) == json.loads(json.dumps(report))  # strict JSON
    for key in ("before", "after", "last"):
        s = report["system"][key]
        assert s["n"] == 3 and s["ci"][0] <= s["mean"] <= s["ci"][1]
    for seat in ("seat0", "seat1"):
        for when in ("before", "after"):
            assert set(report["per_seat"][seat][when]) == {"solo", "policy_score", "loo", "shapley"}
        seat_report = json.loads((run / seat / "report.json").read_text())
        assert seat_report["best_step"] == report["best_step"] and seat_report["policy"] in SEATS
        for folder in ("best", "last"):
            assert (run / seat / folder / "coalition_gym.json").is_file()  # a pool member as it stands
        assert seat in pool_line(run / seat) and str((run / seat / "best").resolve()) in pool_line(run / seat)
    cost = report["counterfactual_cost"]["training"]
    assert cost["executions"] == 2 * 2 * 2  # steps x items x G
    if protocol == "debate":  # peers read each other: the sub-teams' asks are new generations, counted
        assert cost["counterfactuals"] > 0 and cost["generations"] > 0
    else:  # one-shot: every counterfactual ask is replayed from the real execution
        assert cost["counterfactuals"] > 0 and cost["generations"] == 0 and cost["replayed"] > 0
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert all(r["seat0/pivotality"] is not None for r in rows if "reward_mean" in r)
    assert {"rollout", "update", "step"} == set(report["seconds_per_step"])


class FirstMemberOnly(Protocol):
    """A protocol that only ever asks the first member: a seat further down never gets a call."""

    name = "first_member_only"

    def program(self, ctx):
        replies = yield [ctx.ask(ctx.members[0], ctx.question(ctx.members[0]), self.params, round_=0)]
        return Outcome(answer=ctx.task.extract(replies[0].text), text=replies[0].text, transcript=())


@pytest.fixture
def no_model_loads(monkeypatch):
    """Any model load or rollout fails the test: a refusal must come before both."""
    from coalition_gym.training import trainer

    def boom(*a, **k):
        raise AssertionError("a model was loaded or a rollout ran before the refusal")

    monkeypatch.setattr(trainer, "load_policy", boom)
    monkeypatch.setattr(trainer, "load_shared_base", boom)
    monkeypatch.setattr(trainer, "collect", boom)


def test_refusals_come_before_any_rollout(tmp_path, monkeypatch, no_model_loads):
    with pytest.raises(ConfigError, match="K >= 1"):
        config(policies=[])
    assert config(policies=["zoo:tiny/pico"]).seats == ["policy"]  # one seat is a team of one, named as a policy's
    with pytest.raises(ConfigError, match="Did you mean 'loo'"):
        config(credit="lo")
    with pytest.raises(ConfigError, match="at most 6 seats"):
        config(credit="shapley", policies=[f"/m{i}" for i in range(7)])
    config(credit="loo", policies=[f"/m{i}" for i in range(7)])  # leave-one-out has no seat limit
    with pytest.raises(ConfigError, match="distinct"):
        config(seats=["a", "a"])
    with pytest.raises(ConfigError, match="a seat name is a folder name"):
        config(seats=["a/b", "c"])
    with pytest.raises(ConfigError, match="same model .*shared_base=True"):
        Trainer(config(policies=["zoo:tiny/pico", "zoo:tiny/0"]), out=tmp_path)  # one folder, two names
    with pytest.raises(ConfigError, match="shared_base=True .*set lora_r > 0"):
        config(policies=["zoo:tiny/pico", "zoo:tiny/pico"], shared_base=True)
    with pytest.raises(ConfigError, match="the policies name 2 models"):
        Trainer(config(shared_base=True, lora_r=4), out=tmp_path)
    with pytest.raises(ConfigError, match="clashes with a name in pool"):
        Trainer(config(seats=["atlas", "b"]), out=tmp_path)
    from coalition_gym.envs import protocols

    monkeypatch.setitem(protocols.PROTOCOLS, "first_member_only", FirstMemberOnly)
    with pytest.raises(ConfigError, match="never asks the policy seat 'seat0'"):
        Trainer(config(protocol="first_member_only"), out=tmp_path)
    assert not any(tmp_path.iterdir())  # nothing written either


def test_two_seats_given_one_model_object_are_refused(tmp_path):
    from coalition_gym.training.policy_model import load_policy

    shared = load_policy("zoo:tiny/pico", "cpu", "float32")
    with pytest.raises(ConfigError, match="same model object"):
        Trainer(config(), out=tmp_path, models={"seat0": shared, "seat1": shared})


KILLER = textwrap.dedent("""
    import json, os, signal, sys
    from pathlib import Path
    import torch
    torch.set_num_threads(1)
    from coalition_gym.training import checkpoints
    from coalition_gym.training.config import make_config
    from coalition_gym.training.trainer import Trainer

    settings, out, kill_at, where = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    trainer = Trainer(make_config("team-crl", "tiny", **settings), out=out, log=lambda line: None)

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    save, replace = checkpoints.save_state, Path.replace

    def save_state(folder, *args, **kw):  # before the commit: seat0's new state written, seat1's not
        if where == "before-commit" and trainer.state.step == kill_at and Path(folder).name == "seat1":
            die()
        return save(folder, *args, **kw)

    def swap(self, target):  # after the commit: seat0 swapped in, seat1 not yet
        if where == "mid-swap" and trainer.state.step == kill_at and self.parts[-3:] == (".pending", "seat1", "last"):
            die()
        return replace(self, target)

    checkpoints.save_state, Path.replace = save_state, swap
    trainer.fit(progress=False)
    sys.exit(3)  # never reached: the run was killed
""")


SHARED_LORA = dict(policies=["zoo:tiny/pico", "zoo:tiny/pico"], shared_base=True, lora_r=4, lora_alpha=8)


@pytest.mark.parametrize("where, form", [("before-commit", {}), ("mid-swap", {}), ("before-commit", SHARED_LORA)],
                         ids=["before-commit", "mid-swap", "shared-base-lora"])
def test_a_sigkilled_run_resumes_bitwise_identical(tmp_path, where, form):
    settings = dict(policies=list(SEATS), task="zoo:arith", task_kwargs={"size": 40}, steps=3, eval_every=2,
                    eval_items=3, test_items=3, items_per_step=2, group_size=4, collaborators="sim:demo",
                    members=["delta"], protocol="majority_vote", credit="system", collaborator_draws="fresh")
    settings.update(form)
    weights_file = "adapter_model.safetensors" if form else "model.safetensors"
    straight = Trainer(make_config("team-crl", "tiny", **settings), out=tmp_path / "straight", log=lambda line: None)
    start = {s: weights(m) for s, m in straight.models.items()}
    straight.fit(progress=False)
    for seat, model in straight.models.items():  # the steps around the kill move the weights: resuming is not trivial
        assert any(not torch.equal(a, b) for a, b in zip(start[seat], weights(model)))

    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    done = subprocess.run([sys.executable, str(script), json.dumps(settings), str(tmp_path / "victim"), "2", where],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    resumed = Trainer(make_config("team-crl", "tiny", **settings), out=tmp_path / "victim", log=lambda line: None)
    resumed.fit(progress=False)
    assert resumed.state.step == 3
    for seat in straight.seats:
        for p, q in zip(straight.models[seat].parameters(), resumed.models[seat].parameters()):
            assert torch.equal(p, q)  # bitwise: the same weights as a run never interrupted
        for folder in ("best", "last"):  # and the same checkpoint files, byte for byte
            assert ((tmp_path / "straight" / seat / folder / weights_file).read_bytes()
                    == (tmp_path / "victim" / seat / folder / weights_file).read_bytes())

    def metrics(run):
        return comparable_metrics([json.loads(x) for x in (tmp_path / run / "metrics.jsonl").read_text().splitlines()])

    assert metrics("victim") == metrics("straight")  # every number but the timings, no row twice or missing
    assert not (tmp_path / "victim" / ".pending").exists()
    with pytest.raises(ConfigError, match="different configuration"):
        changed = make_config("team-crl", "tiny", **{**settings, "steps": 5})
        Trainer(changed, out=tmp_path / "victim").fit(progress=False)


class ScriptedPolicy(Generator):
    """A seat's replies from a script over the prompt, with the token ids and log-probs a RecordingPolicy needs."""

    def __init__(self, name, reply):
        self.identity, self.reply = f"scripted:{name}", reply

    def generate(self, asks):
        return [Sample(text=self.reply(render_plain(a.messages)), token_ids=(1,), logprobs=(-0.5,)) for a in asks]

    def encode_prompt(self, ask):
        return [0]


@pytest.mark.parametrize("protocol", ["majority_vote", "debate"])
def test_the_pettingzoo_env_is_the_external_view_of_the_team(protocol):
    """The same protocol, pool and seats: the team's executions (collect, the trainer's rollouts) and the
    PettingZoo env with the seats as agents (the frozen member automated) give the same system reward per item,
    and a sub-team's counterfactual value equals the env run with that sub-team."""
    task = make_task("zoo:arith", size=12)
    items = task.items("test")[:4]
    golds = {it.question: it.gold for it in task.items("test")}

    def right(prompt):  # the gold of the (longest) question the prompt holds
        question = max((q for q in golds if q in prompt), key=len, default="")
        return f"Answer: {golds.get(question, 0)}"

    script = {"cirrus": right, "delta": right}  # two right seats outvote the frozen member; one alone ties it
    settings = {"rounds": 2} if protocol == "debate" else {}
    pool = load_pool("sim:demo")
    # the seats are pool members the scripts answer in their place (as the PettingZoo view makes them)
    system = System.build(SystemSpec(make_protocol(protocol, **settings), task, pool, ["atlas", "cirrus", "delta"],
                                     split=None)).replace(seats={s: pool.styles.get(s, "chat") for s in script})
    policies = {s: RecordingPolicy(ScriptedPolicy(s, f)) for s, f in script.items()}
    seed = 5
    rollouts = collect(system, items, policies, RolloutPlan(1, seed, "episode"), "shapley")

    def env_rewards(members):
        env = CollaborationParallelEnv(protocol=protocol, task="zoo:arith", task_kwargs={"size": 12},
                                       collaborators="sim:demo", members=members, automated=["atlas"], split="test",
                                       **settings)
        out = []
        for item in items:
            obs, infos = env.reset(options={"item_id": item.id, "episode_seed": episode_seed(seed, item)})
            reward = None
            while env.agents:
                actions = {a: script[a](obs[a]) for a in env.agents if infos[a].get("asked")}
                obs, rewards, _, _, infos = env.step(actions)
                reward = next(iter(rewards.values()), reward) if rewards else reward
            out.append(reward)
        return out

    team, sub_team = [r.reward for r in rollouts], [r.values[frozenset({"cirrus"})] for r in rollouts]
    assert team != sub_team  # the two differ on some item, so the comparisons below can fail
    assert env_rewards(["atlas", "cirrus", "delta"]) == team
    assert env_rewards(["atlas", "cirrus"]) == sub_team
