"""A new collaboration protocol: every member answers twice, the most frequent answer of all wins.

A protocol is a dataclass whose fields are its settings and whose ``program`` is a generator: it
yields the requests (``Ask``s) of a wave, receives the replies, and returns an ``Outcome``. It never
calls a model, so every driver runs it: the batched runner, the valuation games, the Gymnasium and
PettingZoo environments. ``register_protocol`` makes it available by name and as an env id
(``coalition_gym/TwoSamplesVote-v0``); register it in a module your workers import too.

    python examples/custom_protocol.py
    cgym --import examples/custom_protocol.py run coalition_gym/TwoSamplesVote-v0 --episodes 40
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import gymnasium as gym

from coalition_gym import (
    CoalitionGame,
    EpisodeContext,
    EvalOptions,
    Outcome,
    Protocol,
    System,
    SystemSpec,
    evaluate,
    load_pool,
    make_protocol,
    make_task,
    register_protocol,
    run_episodes,
)
from coalition_gym.envs.protocols.base import ProgramGen, answer_turns
from coalition_gym.envs.protocols.voting import plurality
from coalition_gym.reports.leaderboard import format_leaderboard


@dataclass
class TwoSamplesVote(Protocol):
    name: ClassVar[str] = "two_samples_vote"
    description: ClassVar[str] = "Every member answers twice; the most frequent answer of all wins"

    samples: int = 2

    def program(self, ctx: EpisodeContext) -> ProgramGen:
        # index=k gives each sample its own seed; seeds never depend on who else is in the coalition
        asks = [ctx.ask(m, ctx.question(m), self.params, round_=0, index=k)
                for m in ctx.members for k in range(self.samples)]
        replies = yield asks  # one wave: the runner batches it per backend
        turns = answer_turns(ctx, asks, replies)
        final, votes = plurality([(t.member, t.answer) for t in turns], "first", ctx.dev_scores,
                                 seed=ctx.seed_for("tie-break", 0))
        text = next((t.text for t in turns if t.answer == final), "")
        return Outcome(answer=final, text=text, transcript=tuple(turns), details={"votes": votes})


env_id = register_protocol(TwoSamplesVote)


if __name__ == "__main__":
    pool, task = load_pool("sim:demo"), make_task("rg/basic_arithmetic", size=40)
    protocol = make_protocol("two_samples_vote", temperature=0.7)
    system = System.build(SystemSpec(protocol, task, pool, split="test"))
    results = run_episodes(system, system.items, seed=0)
    print(f"system score: {sum(r.score for r in results) / len(results):.3f} on {len(results)} items")

    game = CoalitionGame(system, seed=0)
    report = evaluate(game, ["loo", "shapley"], EvalOptions(n_boot=200))
    print(format_leaderboard(report))

    env = gym.make(env_id, task=task, collaborators=pool, members=["atlas", "delta"])
    obs, info = env.reset(seed=0)
    steps = 0
    done = False
    while not done:  # the policy seat is asked twice (its two samples), then the vote
        obs, reward, done, _, info = env.step("Some thought.\nAnswer: 42")
        steps += 1
    print(f"gym episode: {steps} policy turns, system reward {reward}")
