"""A new pool preset: ``sim:clones-N``, N simulated copies of one model next to one weaker model whose errors
are its own. The copies are exact: one error group at correlation 1 (they know the same items and share their
wrong answers) and no sampling noise (``diversity=0``, ``slip=0``: at any temperature a copy gives the answer it
knows, else the group's wrong answer), so every copy answers every item alike. What does one more copy add to a
system that already has the others? Nothing: under majority vote the pairwise interactions name two clones the
most redundant pair, and the copies share one Shapley value (each about a quarter of its solo score). That
holds while a clone beats the outsider alone: every coalition with a clone answers as the clones do (a tie goes
to the higher dev score), so two clones interact by -v(clone)/2 + v(outsider)/6, a clone and the outsider by
-v(outsider)/3; on few items the outsider can score higher by chance, and then it is the other way round.

(With the default sampling noise the copies would re-guess differently whenever they do not know, so they would
not be clones: the interactions then find clone pairs no more redundant than the others.)

A preset is a name and a function from the name given to a ``Pool``; ``register_pool`` makes it usable
wherever a pool is named (``--pool``, ``--collaborators``, ``load_pool``) and lists it in ``cgym pools``.
With ``prefix`` it stands for a family of names (here the N of ``sim:clones-N``), and ``check`` refuses a
bad one before anything is built.

    python examples/custom_pool.py
    cgym --import examples/custom_pool.py eval --pool sim:clones-3 --protocol majority_vote --items 200 \
        --estimator shapley,interactions
"""

from __future__ import annotations

from coalition_gym import (
    AgentProfile,
    CoalitionGame,
    EvalOptions,
    Pool,
    SimulatedAgent,
    System,
    SystemSpec,
    evaluate,
    make_task,
    register_pool,
)
from coalition_gym.agents.simulated import DEFAULT_HELPERS
from coalition_gym.errors import ConfigError
from coalition_gym.reports.interaction_files import interaction_summary
from coalition_gym.reports.leaderboard import format_leaderboard

PREFIX = "sim:clones-"


def check_clones(name: str) -> None:
    size = name[len(PREFIX):]
    if not size.isdigit() or not 2 <= int(size) <= 8:
        raise ConfigError(f"pool {name!r}: sim:clones-N takes N from 2 to 8")


def clones(name: str) -> Pool:
    n = int(name[len(PREFIX):])
    profiles = [AgentProfile(f"clone{k + 1}", skill=0.7, error_group="clones", correlation=1.0,
                             diversity=0.0, slip=0.0) for k in range(n)]
    profiles.append(AgentProfile("outsider", skill=0.5))
    return Pool(members={p.name: SimulatedAgent(p) for p in profiles},
                helpers={h: SimulatedAgent(p) for h, p in DEFAULT_HELPERS.items()}, name=name)


register_pool("sim:clones-N", clones, "N copies of one model sharing every error, and one weaker outsider",
              prefix=PREFIX, check=check_clones)


if __name__ == "__main__":
    task = make_task("rg/basic_arithmetic", size=200)
    game = CoalitionGame(System.build(SystemSpec("majority_vote", task, "sim:clones-3", split="test")))
    report = evaluate(game, ["shapley", "interactions"], EvalOptions(n_boot=200))
    print(format_leaderboard(report))
    print(interaction_summary(report.interactions)["sentence"])
