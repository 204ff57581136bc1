"""examples/trl/trl_grpo.py as two CPU processes (torchrun, gloo): each rank scores its own shard of the prompts,
the shards are disjoint and together the one-process batch, and the system rewards of step 1 are the
one-process run's (the collaborators' episode seeds line up across ranks)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")  # the trl extra: pip install 'coalition-gym[trl]'

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl" / "trl_grpo.py"
# greedy decoding: both runs give the same completions, so equal rewards mean equal collaborator draws
ARGS = ["--steps", "1", "--prompts-per-step", "8", "--num-generations", "2", "--max-new-tokens", "6", "--greedy"]


def run(launcher, out, tmp_path):
    proc = subprocess.run([*launcher, str(EXAMPLE), *ARGS, "--out", str(out)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"))], proc.stdout


def by_item(step1):
    pairs = {}
    for iid, completion, reward in zip(step1["item_ids"], step1["completions"], step1["rewards"]):
        pairs.setdefault(iid, []).append((completion, reward))
    return pairs


@pytest.mark.slow
def test_two_processes_split_the_batch_and_agree_with_one(tmp_path):
    (one,), _ = run([sys.executable], tmp_path / "one", tmp_path)
    two, stdout = run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"],
                      tmp_path / "two", tmp_path)
    assert "rank 0/2" in stdout and "rank 1/2" in stdout
    assert (one["rank"], one["world_size"]) == (0, 1)
    assert [(r["rank"], r["world_size"]) for r in two] == [(0, 2), (1, 2)]
    assert one["per_device_batch"] == 16 and all(r["per_device_batch"] == 8 for r in two)

    shards = [set(r["step1_prompts"]) for r in two]
    assert all(len(s) == 4 for s in shards) and not shards[0] & shards[1]
    assert shards[0] | shards[1] == set(one["step1_prompts"])

    # the same call counter (TRL's step) seeds every rank's episodes, and the one-process run's
    assert {r["step1"]["reward_call"] for r in two} == {one["step1"]["reward_call"]} == {1}
    single = by_item(one["step1"])
    for rank in two:
        for iid, pairs in by_item(rank["step1"]).items():
            assert pairs == single[iid], (rank["rank"], iid)


def test_the_comparison_would_see_a_seed_mismatch():
    """The rewards compared above depend on the episode seed, which follows TRL's step: the same step draws the
    same collaborators, another step draws others and changes some rewards."""
    from coalition_gym.training.trl_adapter import SystemOutcomeReward

    def fresh():
        return SystemOutcomeReward("majority_vote", task="zoo:arith", task_kwargs={"size": 200},
                                   collaborators="sim:demo", members=["atlas", "delta"], policy_style="compact")

    items = [f"zoo:arith/train/{i}" for i in range(16)]
    completions = [" 7"] * len(items)

    class Step:
        def __init__(self, k):
            self.global_step = k

    first = fresh()
    step0 = first([""] * len(items), completions, items, trainer_state=Step(0))
    assert first.calls == 1
    assert fresh()([""] * len(items), completions, items, trainer_state=Step(0)) == step0
    assert fresh()([""] * len(items), completions, items, trainer_state=Step(4)) != step0
    by_hand = fresh()
    by_hand([""] * len(items), completions, items)
    by_hand([""] * len(items), completions, items)
    assert by_hand.calls == 2  # without TRL's state: a counter of calls
