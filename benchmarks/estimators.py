"""Sampling Shapley estimators against shapiq 1.8's, at equal numbers of distinct coalitions, with their
cost in generations, the coverage of their intervals and their time.

Games (``GAMES``, 40 items of ``rg/basic_arithmetic`` each): majority vote over ``sim:random-8``, ``-10``
and ``-12`` (the calibration games the default sampler and the proxy's settings were chosen on); debate
(2 rounds), mixture-of-agents and SLM-MUX over ``sim:random-8`` (held out: only reported); LLM-Blender and
cascade over ``sim:random-8`` (added after the first full run, unseen until then). SLM-MUX and cascade
were behind at 25n, and the selection proxy (``coalition_gym/valuation/proxy.py``) was written after that:
they count as seen since. Three games were added with it (SLM-MUX over ``sim:random-10``, cascade with
threshold 0.67 over ``sim:random-10``, prompt routing over ``sim:random-8``); SLM-MUX over ``sim:random-10``
was behind at 25n, where its pairs were not all known, and the proxy sampler's enumeration of the pairs came
after that: those three count as seen, and four games added then (SLM-MUX over ``sim:random-12``, cascade
over ``sim:random-12``, SLM-MUX with random tie-breaks over ``sim:random-9``, debate over ``sim:random-10``)
were the held-out check of that design. The prediction estimate (the proxy sampler's final estimate,
``P + kappa (D - P)``: ``coalition_gym/valuation/proxy.py``, ``shrunk_to_prediction``) came after the run of
all fifteen, prompted by SLM-MUX with random tie-breaks over 9 members, and its interval's bias term was chosen
on mixture-of-agents and LLM-Blender over 8: every game above counts as seen for it. Its held-out check is
``--games fresh`` (``FRESH_GAMES``): nine games on pools of the ``sim:random-N`` recipe drawn with seed 1
(``bench:random-N-s1``, n = 8-11: six protocols, SLM-MUX with random tie-breaks at three sizes), built after
its design was fixed, with ours (``proxy``) against its difference estimate alone (``proxy-difference``, the
default before it) and shapiq's. Beyond enumeration, ``--games large`` (``LARGE_GAMES``, issue 51): majority vote
with seeded random ties, SLM-MUX and cascade (threshold 0.67) over ``sim:random-N`` for n = 14, 16, 24, 32, 64,
and, added after their run (``LARGE_ADDED``), the trained router (its defaults), whose exact Shapley values come
from the games' structure (``coalition_gym/valuation/closed_form.py``: a sum over answer counts for the vote, a
closed form for the three selection protocols, both checked against enumeration and
against the protocols' own coalition games in ``tests/valuation/test_closed_form.py``), so no estimator's proxy
enters the truth; generations are not counted there (the structure is read off each member answering alone).
The shrinkage towards the solo shares (``proxy.shrunk_to_solo_shares``, from n = 13) came after the large games'
run (n = 64 behind shapiq at 2n-5n), so they count as seen for it; ``--games large --reuse OLD.json`` re-measures
only our default on them (shapiq's rows depend on the game, budget and seed alone). Its held-out check is
``--games large_fresh`` (``LARGE_FRESH_GAMES``): the same four protocols over ``bench:random-N-s2`` (the recipe
drawn with seed 2) for the same n, settings fixed before their first run. The pairs' half-budget rule
(``proxy.PAIRS_ROOM``: from n = 13 the pairs are enumerated once they take at most half of the budget left) came
after both; its held-out check is ``--games large_fresh3`` (``bench:random-N-s3``), ours against
``proxy-before-pairs-room``. The shared priority short of the pairs (``ProxySampler.shared_priority_from``) and
the floor on the prediction's bias term came after all three; their held-out check is ``--games large_fresh4``
(``bench:random-N-s4``), ours against ``proxy-before-shared-priority``. The pairs' pilot (short of room for the
pairs, a pilot of n coalitions decides whether a selection-like game gets them) and the shared priority's own
sampling variance in the interval came after all four; their held-out check is ``--games large_fresh5``
(``bench:random-N-s5``), ours against ``proxy-before-pilot``. The pilot's bar (a selection weight of 0.2) and the
pairs' priorities with graded scores came after all five; their held-out check is ``--games large_fresh6``
(``bench:random-N-s6``), ours against ``proxy-before-bar``.
Every coalition of the other games is run once, up front, recording its per-item scores and the cache keys of every
generation it asks for, so an estimate's cost in generations is the number of distinct keys of the coalitions it
evaluated (what a shared generation cache would have generated). Exact Shapley on the same table is the truth.

For each game, budget (2n, 5n, 10n, 25n, 50n distinct coalitions, capped at 2^n - 1) and seed: ours
(``proxy``, the default, and ``hybrid``, the previous one) and shapiq 1.8's SV approximators (RegressionMSR
with its default xgboost proxy and with a linear one, ProxySHAP, PolySHAP, LeverageSHAP, SVARM, kADD-SHAP)
from ``benchmarks/.shapiq18``, built by ``bash ../shared/tools/shapiq18.sh benchmarks/.shapiq18
.venv/bin/python`` (or the environment; skipped with a note when absent). Each row names its library and
version. shapiq gets a budget of b + 1 evaluations because it spends one on the empty coalition, which ours
get for free; the distinct non-empty coalitions it actually queried are recorded. One thread for everyone
(``OMP_NUM_THREADS=1``); wall and CPU seconds per estimate are both recorded (the machine is shared), ours at the
CLI's default ``--bootstrap`` (N_BOOT item resamples; the sampling interval's jackknife does not depend on it).

    .venv/bin/python benchmarks/estimators.py [--quick] [--games fresh|large|large_fresh(3|4|5)]
        [--sizes 14,64] [--seeds 20] [--reuse OLD.json] [--out FILE.json]
    .venv/bin/python benchmarks/estimators.py --cost [--sizes 14,64] [--multiples 2,50] [--seeds 3]

``--cost`` times one default estimate (CPU seconds, the median over seeds) per n and budget on the large games
(SLM-MUX and majority vote), and the peak memory traced during one, against the coalitions it evaluated.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import sys
import time
import typing
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread each, ours and shapiq's (xgboost): a shared 2-core box

import numpy as np  # noqa: E402

from coalition_gym import load_pool, make_protocol, make_task
from coalition_gym.agents import pools
from coalition_gym.agents.cache import ask_key
from coalition_gym.agents.simulated import random_profiles
from coalition_gym.envs.runner import episode_seed, run_programs, score_outcomes
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.errors import ConfigError
from coalition_gym.valuation.closed_form import structured_game
from coalition_gym.valuation.game import Game
from coalition_gym.valuation.proxy import ProxySampler
from coalition_gym.valuation.sampling import Budget, Sampler, choose_sampler, register_sampler, sampled_shapley
from coalition_gym.valuation.stats import N_BOOT

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import elapsed_seconds, machine_info, write_json  # noqa: E402

SHAPIQ_DIR = Path(__file__).resolve().parent / ".shapiq18"  # bash ../shared/tools/shapiq18.sh benchmarks/.shapiq18
MULTIPLES = (2, 5, 10, 25, 50)
OURS = ("proxy", "hybrid")  # the default (choose_sampler) and the previous default
# (protocol, pool, settings, role): calibration games may choose defaults, held-out games are only reported
SEEN = "held out, then seen: the selection proxy was written after its result"
SEEN_PAIRS = "held out (added with the selection proxy), then seen: the pairs' enumeration came after its result"
FRESH = "held out (added after the pairs' enumeration)"
GAMES = [("majority_vote", "sim:random-8", {}, "calibration"), ("majority_vote", "sim:random-10", {}, "calibration"),
         ("majority_vote", "sim:random-12", {}, "calibration"), ("debate", "sim:random-8", {"rounds": 2}, "held out"),
         ("mixture_of_agents", "sim:random-8", {}, "held out"), ("slm_mux", "sim:random-8", {}, SEEN),
         # added after the first full run, unseen until then: fresh protocols for the held-out check
         ("llm_blender", "sim:random-8", {}, "held out (added)"), ("cascade", "sim:random-8", {}, SEEN),
         # added with the selection proxy: other pools, settings, a router
         ("slm_mux", "sim:random-10", {}, SEEN_PAIRS), ("cascade", "sim:random-10", {"threshold": 0.67}, SEEN_PAIRS),
         ("prompt_routing", "sim:random-8", {}, SEEN_PAIRS),
         # added with the pairs' enumeration, unseen until the run that reports them
         ("slm_mux", "sim:random-12", {}, FRESH), ("cascade", "sim:random-12", {}, FRESH),
         ("slm_mux", "sim:random-9", {"tie_break": "random"}, FRESH), ("debate", "sim:random-10", {"rounds": 2}, FRESH)]

# held out for the prediction estimate: pools drawn with seed 1 (bench:random-N-s1), built after its design
HELD_OUT = "held out (added after the prediction estimate)"
FRESH_GAMES = [("slm_mux", "bench:random-9-s1", {"tie_break": "random"}, HELD_OUT),
               ("majority_vote", "bench:random-10-s1", {}, HELD_OUT), ("cascade", "bench:random-9-s1", {}, HELD_OUT),
               ("slm_mux", "bench:random-10-s1", {"tie_break": "random"}, HELD_OUT),
               ("debate", "bench:random-9-s1", {"rounds": 2}, HELD_OUT),
               ("llm_blender", "bench:random-9-s1", {}, HELD_OUT),
               ("mixture_of_agents", "bench:random-10-s1", {}, HELD_OUT),
               ("slm_mux", "bench:random-11-s1", {"tie_break": "random"}, HELD_OUT),
               ("slm_mux", "bench:random-8-s1", {}, HELD_OUT)]
# issue 51, beyond enumeration: 14-64 members (sim:random-N, never used above), exact truth from the games'
# structure (coalition_gym/valuation/closed_form.py: plurality with seeded ties, and the priority games of SLM-MUX
# and cascade); settings fixed before their first run. Their role: held out.
LARGE = "held out (large n, added with the exact limit setting; truth from closed_form)"
LARGE_SIZES = (14, 16, 24, 32, 64)
LARGE_GAMES = [(protocol, f"sim:random-{n}", settings, LARGE) for n in LARGE_SIZES
               for protocol, settings in (("majority_vote", {"tie_break": "random"}), ("slm_mux", {}),
                                          ("cascade", {"threshold": 0.67}))]
# the fourth protocol, a third that selects one member's answer, added after the run of the three above and after
# the cost work on the jackknife (same estimates to 2e-14): the trained router at its defaults (logistic learner on
# 50 dev items, dev seed 0), settings fixed before its first run; truth from closed_form (a priority game)
LARGE_ADDED = "held out (large n, added after the first large run: a fourth protocol; truth from closed_form)"
LARGE_GAMES += [("trained_router", f"sim:random-{n}", {}, LARGE_ADDED) for n in LARGE_SIZES]
# the shrinkage towards the solo shares (proxy.shrunk_to_solo_shares, from n = 13) was written after the large games'
# results (n = 64 behind at 2n-5n): every large game above counts as seen for it. Its held-out check: the same four
# protocols on pools of the sim:random-N recipe drawn with seed 2 (never used before), settings fixed before its run
LARGE_GAMES = [(protocol, pool, settings, f"{role}; then seen: the solo shares' shrinkage was written after its result")
               for protocol, pool, settings, role in LARGE_GAMES]
LARGE_PROTOCOLS = (("majority_vote", {"tie_break": "random"}), ("slm_mux", {}), ("cascade", {"threshold": 0.67}),
                   ("trained_router", {}))


def seeded_large_games(seed: int, role: str) -> list[tuple]:
    """The four protocols over the sim:random-N recipe drawn with ``seed`` (``bench:random-N-sS``), every large n."""
    return [(protocol, f"bench:random-{n}-s{seed}", settings, role) for n in LARGE_SIZES
            for protocol, settings in LARGE_PROTOCOLS]


LARGE_FRESH = "held out (large n, pools drawn with seed 2, added after the solo shares' shrinkage)"
LARGE_FRESH_GAMES = seeded_large_games(2, LARGE_FRESH)
# the pairs' half-budget rule (proxy.PAIRS_ROOM, from n = 13) came after both large sets' results (selection games
# behind at 25n-50n short of every pair): both count as seen for it. Its held-out check: the same four protocols on
# pools drawn with seed 3 (never used before), settings and the rule fixed before their run
LARGE_GAMES = [(p, pool, s, f"{role}; seen for the pairs' half-budget rule") for p, pool, s, role in LARGE_GAMES]
LARGE_FRESH_GAMES = [(p, pool, s, f"{role}; then seen: the pairs' half-budget rule was written after its result")
                     for p, pool, s, role in LARGE_FRESH_GAMES]
LARGE_FRESH3 = "held out (large n, pools drawn with seed 3, added after the pairs' half-budget rule)"
LARGE_FRESH3_GAMES = seeded_large_games(3, LARGE_FRESH3)
# the shared priority short of the pairs (ProxySampler.shared_priority_from) and the floor on the prediction's bias
# term (shrunk_to_prediction) came after the seed-3 result (the router over 64 behind at 25n-50n, the sampling
# interval short in near-exact cells): every large set before counts as seen for them. Their held-out check: the
# same four protocols on pools drawn with seed 4 (never used before), both fixed before that run
SEEN_FOR_SHARED = "; then seen: the shared priority and the bias floor were written after its result"
LARGE_GAMES = [(p, pool, s, role + SEEN_FOR_SHARED) for p, pool, s, role in LARGE_GAMES]
LARGE_FRESH_GAMES = [(p, pool, s, role + SEEN_FOR_SHARED) for p, pool, s, role in LARGE_FRESH_GAMES]
LARGE_FRESH3_GAMES = [(p, pool, s, role + SEEN_FOR_SHARED) for p, pool, s, role in LARGE_FRESH3_GAMES]
LARGE_FRESH4 = "held out (large n, pools drawn with seed 4, added after the shared priority and the bias floor)"
LARGE_FRESH4_GAMES = seeded_large_games(4, LARGE_FRESH4)
# the pairs' pilot (ProxySampler.pairs_pilot) and the shared priority's own sampling variance
# (ProxySampler.priority_blocks) came after the seed-4 result (the router over 64 behind at 50n, the interval short
# in two cells at 16 members): every large set before counts as seen for them. Their held-out check: the same four
# protocols on pools drawn with seed 5 (never used before), both fixed before that run
SEEN_FOR_PILOT = "; then seen: the pairs' pilot and the shared priority's variance were written after its result"
LARGE_GAMES, LARGE_FRESH_GAMES, LARGE_FRESH3_GAMES, LARGE_FRESH4_GAMES = (
    [(p, pool, s, role + SEEN_FOR_PILOT) for p, pool, s, role in games]
    for games in (LARGE_GAMES, LARGE_FRESH_GAMES, LARGE_FRESH3_GAMES, LARGE_FRESH4_GAMES))
LARGE_FRESH5 = ("held out (large n, pools drawn with seed 5, added after the pairs' pilot and the shared priority's "
                "variance)")
LARGE_FRESH5_GAMES = seeded_large_games(5, LARGE_FRESH5)
# the pilot's bar lowered to a selection weight of 0.2 (proxy.SELECTION_WEIGHT; it missed the router over 64 on the
# seed-4 pools, and on the seed-5 ones, whose result was seen before the bar was chosen) and the pairs' priorities
# with graded scores (a type's ties broken by the pairs whose scores differ) came after the seed-5 result: every large
# set before counts as seen for them. Their held-out check: the four protocols on pools drawn with seed 6
SEEN_FOR_BAR = "; then seen: the pilot's bar and the graded pairs were written after its result"
LARGE_GAMES, LARGE_FRESH_GAMES, LARGE_FRESH3_GAMES, LARGE_FRESH4_GAMES, LARGE_FRESH5_GAMES = (
    [(p, pool, s, role + SEEN_FOR_BAR) for p, pool, s, role in games]
    for games in (LARGE_GAMES, LARGE_FRESH_GAMES, LARGE_FRESH3_GAMES, LARGE_FRESH4_GAMES, LARGE_FRESH5_GAMES))
LARGE_FRESH6 = "held out (large n, pools drawn with seed 6, added after the pilot's bar and the graded pairs)"
LARGE_FRESH6_GAMES = seeded_large_games(6, LARGE_FRESH6)
# ours per game set: the default first, then the previous default (the table's last column)
OURS_OF = {"benchmark": OURS, "fresh": ("proxy", "proxy-difference"), "large": ("proxy", "hybrid"),
           "large_fresh": ("proxy", "proxy-before-solo-shares"), "large_fresh3": ("proxy", "proxy-before-pairs-room"),
           "large_fresh4": ("proxy", "proxy-before-shared-priority"), "large_fresh5": ("proxy", "proxy-before-pilot"),
           "large_fresh6": ("proxy", "proxy-before-bar")}
GAME_SETS = {"benchmark": GAMES, "fresh": FRESH_GAMES, "large": LARGE_GAMES, "large_fresh": LARGE_FRESH_GAMES,
             "large_fresh3": LARGE_FRESH3_GAMES, "large_fresh4": LARGE_FRESH4_GAMES, "large_fresh5": LARGE_FRESH5_GAMES,
             "large_fresh6": LARGE_FRESH6_GAMES}
# truth from closed_form, not enumeration
STRUCTURED_SETS = ("large", "large_fresh", "large_fresh3", "large_fresh4", "large_fresh5", "large_fresh6")
SEEDED_SETS = ("fresh", "large_fresh", "large_fresh3", "large_fresh4", "large_fresh5", "large_fresh6")  # bench: pools


def _seeded_random_pool(name: str) -> pools.Pool:
    """``bench:random-N-sS``: the sim:random-N recipe (agents.simulated.random_profiles) drawn with seed S."""
    size, seed = name[len("bench:random-"):].split("-s")
    return pools._simulated_pool(random_profiles(int(size), seed=int(seed)), name)


def _check_seeded_random(name: str) -> None:
    size, _, seed = name[len("bench:random-"):].partition("-s")
    if not (size.isdigit() and seed.isdigit()):
        raise ConfigError(f"pool {name!r}: bench:random-N-sS takes a size N and a seed S")


class DifferenceEstimate(ProxySampler):
    """The proxy sampler's difference estimate ``c phi(h) + H(v - c h)`` with its plain jackknife (kappa = 1): its
    final estimate before the prediction estimate."""

    name = "proxy-difference"

    def settle(self, design, value, groups, rng):
        return Sampler.settle(self, design, value, groups, rng)


class BeforeSoloShares(ProxySampler):
    """The proxy sampler without the shrinkage towards the solo shares: the default before it (``large_fresh``'s
    previous default)."""

    name = "proxy-before-solo-shares"
    solo_share_from = None


class BeforePairsRoom(ProxySampler):
    """The proxy sampler that enumerates the pairs only when the kernel's share covers them (no half-budget rule):
    the default before it (``large_fresh3``'s previous default)."""

    name = "proxy-before-pairs-room"
    pairs_room = None


class BeforeSharedPriority(ProxySampler):
    """The proxy sampler with the vote-like proxy alone short of every pair (no shared priority): the default
    before it (``large_fresh4``'s previous default; its interval has the bias floor, which moves no estimate)."""

    name = "proxy-before-shared-priority"
    shared_priority_from = None


class BeforePilot(ProxySampler):
    """The proxy sampler without the pairs' pilot and without the shared priority's own variance in its interval:
    the default before them (``large_fresh5``'s previous default)."""

    name = "proxy-before-pilot"
    pairs_pilot = None
    priority_blocks = 0


class BeforeBar(ProxySampler):
    """The proxy sampler whose pilot asks for the selection family above the vote-like one, with the pairs' priorities
    blind to graded scores within a type: the default before the seed-5 result (``large_fresh6``'s previous
    default)."""

    name = "proxy-before-bar"
    selection_weight = None
    graded_pairs = False


class KeyRecorder:
    """Wraps a backend and records the cache key of every Ask it is given."""

    def __init__(self, inner, keys: set):
        self.inner, self.keys, self.identity = inner, keys, inner.identity

    def generate(self, asks):
        self.keys.update(hash(ask_key(self.identity, a)) for a in asks)
        return self.inner.generate(asks)


def build_table(protocol_name: str, pool_name: str, n_items: int, **settings) -> dict:
    pool = load_pool(pool_name)
    task = make_task("rg/basic_arithmetic", size=n_items)
    items = list(task.items("test"))
    protocol = make_protocol(protocol_name, **settings)
    players = pool.member_names
    n = len(players)
    values, keys = {}, {}
    learned = protocol.fresh_learned()  # one protocol learning across every coalition, as one game would
    for mask in range(1, 1 << n):
        members = tuple(p for k, p in enumerate(players) if mask >> k & 1)
        if len(members) < protocol.min_members:
            values[mask], keys[mask] = np.zeros(n_items), set()
            continue
        recorded: set = set()
        backends = {name: KeyRecorder(g, recorded) for name, g in pool.backends().items()}
        spec = SystemSpec(protocol, task, pools.Pool(members=backends, styles=pool.styles), members, split=None)
        system = System.build(spec, dev_scores=pool.dev_scores, learned=learned)
        contexts = [system.context(it, episode_seed(0, it)) for it in items]
        outcomes = run_programs([protocol.start(c) for c in contexts], backends)
        values[mask] = np.array([r.score for r in score_outcomes(task, contexts, outcomes)])
        keys[mask] = recorded
    return {"players": players, "n": n, "values": values, "keys": keys, "items": n_items}


class TableGame(Game):
    """A coalition game read from a table, costing what a shared generation cache would generate."""

    def __init__(self, table: dict):
        super().__init__()
        self.table = table
        self.players = tuple(table["players"])
        self.n_items = table["items"]
        self.index = {p: k for k, p in enumerate(self.players)}
        self._keys: set = set()

    def mask(self, coalition) -> int:
        return sum(1 << self.index[p] for p in coalition)

    def _compute(self, coalitions):
        out = {}
        for c in coalitions:
            m = self.mask(c)
            out[c] = self.table["values"][m]
            self._keys |= self.table["keys"][m]
        return out

    @property
    def generations(self) -> int:
        return len(self._keys)


def build_structured(protocol_name: str, pool_name: str, n_items: int, **settings) -> dict:
    """A game beyond enumeration: its structure read off the members answering alone (``closed_form``)."""
    task = make_task("rg/basic_arithmetic", size=n_items)
    system = System.build(SystemSpec(protocol_name, task, pool_name, split="test", protocol_settings=settings))
    game = structured_game(system)
    return {"players": game.players, "n": len(game.players), "structured": game, "items": n_items}


class StructuredView(Game):
    """A fresh view of a structured game (its own count of coalitions evaluated; generations are not counted)."""

    def __init__(self, table: dict):
        super().__init__()
        self.base = table["structured"]
        self.players, self.n_items = self.base.players, self.base.n_items

    def _compute(self, coalitions):
        return self.base._compute(coalitions)


def fresh_game(table: dict) -> Game:
    return StructuredView(table) if "structured" in table else TableGame(table)


def mean_values(table: dict, masks: list[int]) -> np.ndarray:
    """v(S) (mean over items) of coalitions given as bitmasks; 0 for the empty one."""
    if "structured" not in table:
        return np.array([float(table["values"][m].mean()) if m else 0.0 for m in masks])
    bits = (np.asarray(masks, dtype=np.int64)[:, None] >> np.arange(table["n"])[None, :]) & 1
    return table["structured"].values(bits.astype(bool)).mean(axis=1)


def exact_values(table: dict) -> np.ndarray:
    if "structured" in table:
        return table["structured"].exact().mean(axis=1)
    from coalition_gym.valuation.estimators import exact_shapley

    return exact_shapley(TableGame(table), n_boot=10).values


def load_shapiq():
    """shapiq 1.8's SV approximators, from ``benchmarks/.shapiq18`` (built by ../shared/tools/shapiq18.sh: shapiq
    1.8 declares Python >= 3.12, its approximators run on 3.11 with typing.override from typing_extensions) or
    the environment; (None, why) when it is absent or older than 1.8."""
    if SHAPIQ_DIR.is_dir():
        sys.path[:0] = [str(SHAPIQ_DIR / "src"), str(SHAPIQ_DIR / "extra")]
    if not hasattr(typing, "override"):  # Python < 3.12: what DEST/extra/sitecustomize.py does at start-up
        import typing_extensions

        typing.override = typing_extensions.override  # type: ignore[attr-defined]
    try:
        import shapiq
        from shapiq.approximator import SVARM, LeverageSHAP, PolySHAP, ProxySHAP, RegressionMSR, kADDSHAP
    except ImportError as exc:
        return None, f"shapiq 1.8 not importable ({exc}); build it with bash ../shared/tools/shapiq18.sh " \
                     "benchmarks/.shapiq18 .venv/bin/python"
    version = f"shapiq {shapiq.__version__}"
    makers = {"RegressionMSR (xgboost)": lambda n, s: RegressionMSR(n, "SV", random_state=s),
              "RegressionMSR (linear)": lambda n, s: RegressionMSR(n, "SV", proxy_model="linear", random_state=s),
              "ProxySHAP": lambda n, s: ProxySHAP(n, max_order=1, index="SV", random_state=s),
              "PolySHAP": lambda n, s: PolySHAP(n, random_state=s),
              "LeverageSHAP": lambda n, s: LeverageSHAP(n, random_state=s),
              "SVARM": lambda n, s: SVARM(n, random_state=s),
              "kADD-SHAP": lambda n, s: kADDSHAP(n, random_state=s)}
    return {f"{version} {name}": make for name, make in makers.items()}, version


def run_shapiq(make, table: dict, budget: int, seed: int) -> tuple[np.ndarray, int, int]:
    n = table["n"]
    seen: set[int] = set()
    weights = 1 << np.arange(n, dtype=np.int64)

    def game(z):
        masks = (np.atleast_2d(np.asarray(z, dtype=bool)) @ weights).astype(np.int64).tolist()
        seen.update(m for m in masks if m)
        return mean_values(table, masks)

    values = make(n, seed).approximate(budget + 1, game)
    estimate = np.array([values[(k,)] for k in range(n)])
    if "structured" in table:
        return estimate, len(seen), None
    generations = len(set().union(*(table["keys"][m] for m in seen))) if seen else 0
    return estimate, len(seen), generations


def run_ours(sampler: str, table: dict, truth: np.ndarray, budget: int,
             seed: int) -> tuple[np.ndarray, float, float, int, int]:
    """The estimate, the coverage of its interval (for the value over the item population) and of its interval
    for the value on these items (``sampling_halfwidth``: the sampling error alone, as the truth holds the items
    fixed), coalitions and generations used."""
    game = fresh_game(table)
    result = sampled_shapley(game, sampler=sampler, stop=Budget(coalitions=budget), seed=seed, n_boot=N_BOOT)
    estimate = result.per_item.mean(axis=1)
    cover = float(np.mean((result.ci_low <= truth) & (truth <= result.ci_high)))
    strict = float(np.mean(np.abs(estimate - truth) <= result.sampling_halfwidth))
    return estimate, cover, strict, game.coalitions_evaluated, None if "structured" in table else game.generations


#: --cost: the protocols whose default estimate is timed (the large games' own), and the budgets (multiples of n)
COST_PROTOCOLS = (("slm_mux", {}), ("majority_vote", {"tie_break": "random"}))


def cost_rows(sizes: list[int], multiples: list[int], seeds: int, items: int) -> list[dict]:
    """CPU seconds of one default estimate (``sampled_shapley`` with the CLI's budget semantics) per n and budget on
    the large games, and the peak of the memory Python and numpy allocate during one (tracemalloc, a separate run:
    tracing slows the timed one), against the coalitions it evaluated."""
    import tracemalloc

    rows = []
    for n in sizes:
        for protocol, settings in COST_PROTOCOLS:
            table = build_structured(protocol, f"sim:random-{n}", items, **settings)
            for mult in multiples:
                budget, cpus = min(mult * n, 2 ** n - 1), []
                for seed in range(seeds):
                    c0 = time.process_time()
                    result = sampled_shapley(fresh_game(table), stop=Budget(coalitions=budget), seed=seed,
                                             n_boot=N_BOOT)
                    cpus.append(time.process_time() - c0)
                tracemalloc.start()
                sampled_shapley(fresh_game(table), stop=Budget(coalitions=budget), seed=0, n_boot=N_BOOT)
                peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
                tracemalloc.stop()
                row = {"game": f"{protocol} sim:random-{n}", "n": n, "multiple": mult, "budget": budget,
                       "coalitions": result.coalitions, "sampler": result.sampler, "cpu_seconds": cpus,
                       "cpu_median": float(np.median(cpus)), "cpu_max": float(np.max(cpus)), "peak_mib": peak,
                       "load_average": os.getloadavg()[0]}
                rows.append(row)
                print(f"{row['game']:28s} {mult:3d}n b={budget:5d} coalitions={row['coalitions']:5d} "
                      f"cpu={row['cpu_median']:.2f}s (max {row['cpu_max']:.2f}) peak={peak:.1f} MiB", flush=True)
    return rows


def cost_markdown(rows: list[dict]) -> str:
    lines = ["| game | budget | coalitions | CPU s / estimate (median, max) | peak traced MiB | KiB per coalition |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['game']} | {r['budget']} ({r['multiple']}n) | {r['coalitions']} | {r['cpu_median']:.2f} "
              f"({r['cpu_max']:.2f}) | {r['peak_mib']:.1f} | {1024 * r['peak_mib'] / max(r['coalitions'], 1):.1f} |"
              for r in rows]
    return "\n".join(lines)


def main_cost(args: argparse.Namespace) -> None:
    sizes = [int(k) for k in (args.sizes or ",".join(map(str, LARGE_SIZES))).split(",")]
    multiples = [int(k) for k in (args.multiples or ",".join(map(str, MULTIPLES))).split(",")]
    rows = cost_rows(sizes, multiples, args.seeds, args.items)
    out = args.out or "benchmarks/results/estimators_cost.json"
    import coalition_gym

    write_json(out, {"machine": machine_info(), "threads": os.environ.get("OMP_NUM_THREADS"), "seeds": args.seeds,
                     "items": args.items, "coalition_gym_path": str(Path(coalition_gym.__file__).parent),
                     "rows": rows, "total_seconds": elapsed_seconds()})
    Path(out).with_suffix(".md").write_text(cost_markdown(rows) + "\n")
    print("\n" + cost_markdown(rows))


def ratio_by_n(summary: list[dict]) -> str:
    """The large games' table by n: ours / best shapiq 1.8 per budget, with the paired CI where the CI's upper
    bound passes 1.0 (bold where the ratio itself does); "exact" where the budget covers every coalition."""
    lines = ["| n | game | seeds | " + " | ".join(f"{m}n" for m in MULTIPLES) + " |",
             "|---|---|---|" + "---|" * len(MULTIPLES)]
    for game in dict.fromkeys(s["game"] for s in summary):
        cells = {s["multiple"]: s for s in summary if s["game"] == game}
        first = next(iter(cells.values()))
        out = []
        for m in MULTIPLES:
            s = cells.get(m)
            if s is None or s["ratio"] is None:
                out.append("-" if s is None or not s["exact_budget"] else "exact")
                continue
            text = f"{s['ratio']:.2f}" + (f" [{s['ratio_ci'][0]:.2f}, {s['ratio_ci'][1]:.2f}]"
                                          if s["ratio_ci"][1] is not None and s["ratio_ci"][1] > 1.0 else "")
            out.append(f"**{text}**" if s["ratio"] > 1.0 else text)
        protocol = game.split(" ")[0].replace("_", " ").replace("slm mux", "SLM-MUX")
        lines.append(f"| {first['n']} | {protocol} | {first.get('seeds', '-')} | " + " | ".join(out) + " |")
    return "\n".join(lines)


def readme_by_n(summary: list[dict]) -> str:
    """The large games' result per n for the README: cells (game x budget, not exact) where ours is ahead of shapiq
    1.8's best, the median ratio and the worst (its game and budget)."""
    lines = ["| n | ours ahead of shapiq's best | median ours / best | worst |", "|---|---|---|---|"]
    for n in sorted({s["n"] for s in summary}):
        cells = [s for s in summary if s["n"] == n and s["ratio"] is not None]
        worst = max(cells, key=lambda s: s["ratio"])
        protocol = worst["game"].split(" ")[0].replace("_", " ").replace("slm mux", "SLM-MUX")
        lines.append(f"| {n} | {sum(s['ratio'] <= 1.0 for s in cells)} of {len(cells)} | "
                     f"{float(np.median([s['ratio'] for s in cells])):.2f} | "
                     f"{worst['ratio']:.2f} ({protocol}, {worst['multiple']}n) |")
    return "\n".join(lines)


def main_merge(paths: list[str], out: str) -> None:
    """One result from several runs of the same game set (each game's rows from the run that holds it, the last
    run winning): rows, games and the summary recomputed, each summary line with its run's seeds."""
    parts = [json.loads(Path(p).read_text()) for p in paths]
    games: dict = {}
    for part in parts:
        # a merged result's games keep their own seeds and run
        games.update({name: {**g, "seeds": g["seeds"], "run": g.get("run")} if isinstance(part["seeds"], list) else
                      {**g, "seeds": part["seeds"], "run": part.get("total_seconds")}
                      for name, g in part["games"].items()})
    rows = [r for name in games for r in next(p for p in reversed(parts) if name in p["games"])["rows"]
            if r["game"] == name]
    rows.sort(key=lambda r: (games[r["game"]]["n"], list(games).index(r["game"])))
    previous = parts[-1]["previous_default"]
    summary = summarise(rows, previous)
    for s in summary:
        s["seeds"] = games[s["game"]]["seeds"]
    merged_from = [m for p in parts for m in p.get("merged_from", [
        {"seeds": p["seeds"], "total_seconds": p.get("total_seconds"), "games": list(p["games"])}])]
    merged = {**parts[-1], "games": games, "rows": rows, "summary": summary,
              "seeds": sorted({m["seeds"] for m in merged_from}), "merged_from": merged_from}
    write_json(out, merged)
    markdown = table_markdown(rows, games, summary, previous) + "\n\n" + ratio_by_n(summary)
    Path(out).with_suffix(".md").write_text(markdown + "\n")
    print(markdown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="n = 8 and 10 only, 5 seeds")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--games", choices=sorted(GAME_SETS), default="benchmark",
                        help="the benchmark's games (GAMES), the prediction estimate's held-out ones (FRESH_GAMES) "
                             "or the large-n ones (LARGE_GAMES, 14-64 members, truth from closed_form)")
    parser.add_argument("--sizes", default=None, help="large: only these n (comma-separated)")
    parser.add_argument("--protocols", default=None, help="only these protocols' games (comma-separated; runs in "
                                                          "parallel, joined with --merge)")
    parser.add_argument("--out", help="default: benchmarks/results/estimators.json (estimators_fresh.json, "
                                      "estimators_large.json)")
    parser.add_argument("--cost", action="store_true",
                        help="time one default estimate per n (--sizes) and budget (--multiples) on the large games, "
                             "with its peak memory; writes estimators_cost.json")
    parser.add_argument("--multiples", default=None, help="--cost: budgets as multiples of n (comma-separated)")
    parser.add_argument("--reuse", default=None, metavar="RESULT_JSON",
                        help="take every row but our default's from this result of the same games and seeds (shapiq's "
                             "estimates do not depend on ours): re-measure the default alone")
    parser.add_argument("--merge", default=None,
                        help="comma-separated result JSONs of one game set (e.g. --games large --sizes runs): write "
                             "them as one result to --out")
    args = parser.parse_args()
    if args.merge:
        main_merge(args.merge.split(","), args.out or "benchmarks/results/estimators_large.json")
        return
    if args.cost:
        main_cost(args)
        return
    out = args.out or f"benchmarks/results/estimators{'' if args.games == 'benchmark' else '_' + args.games}.json"
    seeds = 5 if args.quick else args.seeds
    games = GAME_SETS[args.games]
    if args.sizes:
        games = [g for g in games if re.search(r"random-(\d+)", g[1]).group(1) in args.sizes.split(",")]
    if args.protocols:
        games = [g for g in games if g[0] in args.protocols.split(",")]
    games = games[:2] if args.quick else games
    ours = OURS_OF[args.games]
    names = [f"{protocol} {pool}" for protocol, pool, _, _ in games]
    if len(set(names)) < len(names):  # rows and summaries are keyed by this name
        raise SystemExit(f"two games share a name: {names}")
    reused, reused_from = reusable_rows(args.reuse, ours[0], seeds) if args.reuse else ({}, None)
    if args.games in SEEDED_SETS:
        pools.register_pool("bench:random-N-sS", _seeded_random_pool, "sim:random-N drawn with seed S",
                            prefix="bench:random-", check=_check_seeded_random)
        register_sampler(DifferenceEstimate)
        register_sampler(BeforeSoloShares)
        register_sampler(BeforePairsRoom)
        register_sampler(BeforeSharedPriority)
        register_sampler(BeforePilot)
        register_sampler(BeforeBar)
    makers, shapiq_note = load_shapiq()
    print(f"# {shapiq_note}", flush=True)
    rows, tables = [], {}
    for protocol, pool, settings, role in games:
        start = time.perf_counter()
        build = build_structured if args.games in STRUCTURED_SETS else build_table
        table = build(protocol, pool, args.items, **settings)
        truth = exact_values(table)
        n = table["n"]
        game_name = f"{protocol} {pool}"
        tables[game_name] = describe_game(game_name, table, role, time.perf_counter() - start)
        for mult in MULTIPLES:
            budget = min(mult * n, 2 ** n - 1)
            estimators: dict = {f"ours {name}": name for name in ours}
            estimators.update(makers or {})
            for label, impl in estimators.items():
                if (game_name, mult, label) in reused:
                    rows.append(reused[game_name, mult, label])
                    print(f"{game_name:32s} b={budget:5d} {label:38s} reused from {args.reuse}", flush=True)
                    continue
                errors, maxes, covers, stricts, costs, gens, secs, cpus = [], [], [], [], [], [], [], []
                note = ""
                for seed in range(seeds):
                    t0, c0 = time.perf_counter(), time.process_time()
                    try:
                        if isinstance(impl, str):
                            estimate, cover, strict, used, generations = run_ours(impl, table, truth, budget, seed)
                            covers.append(cover)
                            stricts.append(strict)
                        else:
                            estimate, used, generations = run_shapiq(impl, table, budget, seed)
                    except Exception as exc:  # reported, never hidden
                        note = f"failed: {type(exc).__name__}: {str(exc)[:120]}"
                        break
                    secs.append(time.perf_counter() - t0)
                    cpus.append(time.process_time() - c0)
                    costs.append(used)
                    gens.append(generations)
                    errors.append(float(np.abs(estimate - truth).mean()))
                    maxes.append(float(np.abs(estimate - truth).max()))
                row = {"game": game_name, "n": n, "budget": budget, "multiple": mult, "estimator": label,
                       "library": "coalition_gym" if isinstance(impl, str) else shapiq_note,
                       "exact_budget": budget >= 2 ** n - 1,
                       "mae": float(np.mean(errors)) if errors else None,
                       "mae_se": float(np.std(errors, ddof=1) / np.sqrt(len(errors))) if len(errors) > 1 else None,
                       "errors": errors, "max_error": float(np.mean(maxes)) if maxes else None,
                       "coverage": float(np.mean(covers)) if covers else None,
                       "sampling_coverage": float(np.mean(stricts)) if stricts else None,
                       "coalitions_used": float(np.mean(costs)) if costs else None,
                       "generations_used": float(np.mean(gens)) if gens and None not in gens else None,
                       "seconds": float(np.mean(secs)) if secs else None,
                       "seconds_max": float(np.max(secs)) if secs else None,
                       "cpu_seconds": float(np.mean(cpus)) if cpus else None,
                       "load_average": os.getloadavg()[0], "seeds": len(errors), "note": note}
                rows.append(row)
                cov = "-" if row["coverage"] is None else f"{row['coverage']:.2f}"
                mae = "-" if row["mae"] is None else f"{row['mae']:.4f}"
                print(f"{game_name:32s} b={budget:5d} {label:38s} mae={mae} cov={cov} "
                      f"coal={row['coalitions_used'] or 0:.0f} gens={row['generations_used'] or 0:.0f} "
                      f"s={row['seconds'] or 0:.3f} cpu={row['cpu_seconds'] or 0:.3f} {note}", flush=True)
    summary = summarise(rows, ours[1])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MiB (Linux: KiB)
    print("\n" + table_markdown(rows, tables, summary, ours[1]))
    write_json(out, {"machine": machine_info(), "threads": os.environ.get("OMP_NUM_THREADS"),
                          "shapiq": shapiq_note, "seeds": seeds, "items": args.items,
                          "games": tables, "rows": rows, "summary": summary,
                          "default_rule": "choose_sampler(n, budget) in coalition_gym/valuation/sampling.py",
                          "previous_default": ours[1], "peak_rss_mib": peak, "total_seconds": elapsed_seconds(),
                          **({"reused": reused_from} if reused_from else {})})
    Path(out).with_suffix(".md").write_text(table_markdown(rows, tables, summary, ours[1]) + "\n")


def reusable_rows(path: str, default: str, seeds: int) -> tuple[dict, dict]:
    """``--reuse``: a result's rows by (game, multiple, estimator), but for our default's (what is re-measured), and
    where they come from (the file, how many rows, the runs that made them). An approximator's estimate depends only
    on the game, budget and seed, so a row of the same game set and seeds stands for a run of it (other seeds are
    refused: ours over 20 seeds against rows over 5 would pair nothing)."""
    old = json.loads(Path(path).read_text())
    counts = {r["seeds"] for r in old["rows"]}
    if counts != {seeds}:
        raise SystemExit(f"--reuse {path}: its rows are over {sorted(counts)} seeds, this run over {seeds}: pass "
                         f"--seeds {max(counts)}")
    rows = {(r["game"], r["multiple"], r["estimator"]): r for r in old["rows"] if r["estimator"] != f"ours {default}"}
    runs = old.get("merged_from") or [{"seeds": old["seeds"], "total_seconds": old.get("total_seconds"),
                                       "games": list(old["games"])}]
    return rows, {"from": path, "rows": len(rows), "runs": runs, "shapiq": old.get("shapiq")}


def describe_game(name: str, table: dict, role: str, seconds: float) -> dict:
    """The game's line in the JSON (what exact Shapley costs), printed."""
    n = table["n"]
    if "structured" in table:
        print(f"# {name} ({role}): n={n}, exact Shapley from its structure ({type(table['structured']).__name__}); "
              f"enumeration would cost {2 ** n - 1} coalitions", flush=True)
        return {"n": n, "role": role, "coalitions": 2 ** n - 1, "exact_generations": None,
                "full_coalition_generations": None, "truth": f"closed_form.{type(table['structured']).__name__}",
                "build_seconds": seconds}
    gens = len(set().union(*table["keys"].values()))
    full = len(table["keys"][(1 << n) - 1])
    print(f"# {name} ({role}): n={n}, exact Shapley costs {2 ** n - 1} coalitions and {gens} generations (the full "
          f"coalition alone: {full})", flush=True)
    return {"n": n, "role": role, "coalitions": 2 ** n - 1, "exact_generations": gens,
            "full_coalition_generations": full, "truth": "enumeration", "build_seconds": seconds}


def ratio_ci(ours: list[float], theirs: list[float], reps: int = 2000) -> tuple[float, float]:
    """95% bootstrap interval of mean(ours) / mean(theirs) over seeds (paired: the same seeds resampled)."""
    a, b = np.asarray(ours), np.asarray(theirs)
    if len(a) < 2 or len(a) != len(b):
        return math.nan, math.nan
    idx = np.random.default_rng(0).integers(len(a), size=(reps, len(a)))
    ratios = a[idx].mean(axis=1) / np.maximum(b[idx].mean(axis=1), 1e-15)
    return float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def summarise(rows: list[dict], previous_name: str = "hybrid") -> list[dict]:
    """Per game and budget: our default's error, coverage and time, the best shapiq approximator's error, the
    ratio (with a paired bootstrap CI over seeds), whether ours lead, and the previous default's error (``hybrid``:
    the key keeps its name whichever sampler ``previous_name`` is)."""
    out = []
    for key in dict.fromkeys((r["game"], r["budget"]) for r in rows):
        group = [r for r in rows if (r["game"], r["budget"]) == key and r["mae"] is not None]
        ours = [r for r in group if r["estimator"].startswith("ours ")]
        theirs = [r for r in group if r["estimator"].startswith("shapiq ")]
        default = next(r for r in ours if r["estimator"] == f"ours {choose_sampler(r['n'], r['budget'])}")
        previous = next((r for r in ours if r["estimator"] == f"ours {previous_name}"), None)
        best = min(theirs, key=lambda r: r["mae"]) if theirs else None
        ratio = default["mae"] / best["mae"] if best and best["mae"] > 1e-12 else None
        low, high = ratio_ci(default["errors"], best["errors"]) if ratio is not None else (None, None)
        out.append({"game": key[0], "budget": key[1], "multiple": default["multiple"], "n": default["n"],
                    "exact_budget": default["exact_budget"], "default": default["mae"],
                    "default_sampler": default["estimator"][5:], "default_coverage": default["coverage"],
                    "default_sampling_coverage": default["sampling_coverage"],
                    "default_seconds": default["seconds"], "default_seconds_max": default["seconds_max"],
                    "default_cpu_seconds": default["cpu_seconds"], "load_average": default["load_average"],
                    "hybrid": previous["mae"] if previous else None,
                    "best_shapiq": best["estimator"] if best else None,
                    "best_shapiq_library": best["library"] if best else None,
                    "best_shapiq_mae": best["mae"] if best else None, "ratio": ratio, "ratio_ci": [low, high],
                    "default_leads": best is None or default["mae"] <= best["mae"]})
    return out


def table_markdown(rows: list[dict], tables: dict, summary: list[dict], previous_name: str = "hybrid") -> str:
    lines = ["| game | budget | ours (default) | coverage (over items) | coverage (on these items) | "
             "wall s / estimate (CPU s) | best shapiq approximator | ours / best [95% CI] | "
             f"{previous_name} (a previous default) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in summary:
        if s["exact_budget"]:
            ratio = "exact (not counted)"
        elif s["ratio"] is None:
            ratio = "-"
        else:
            ratio = f"{s['ratio']:.2f} [{s['ratio_ci'][0]:.2f}, {s['ratio_ci'][1]:.2f}]"
        best = "-" if s["best_shapiq"] is None else f"{s['best_shapiq_mae']:.4f} ({s['best_shapiq'].split(' ', 2)[2]})"
        hybrid = "-" if s["hybrid"] is None else f"{s['hybrid']:.4f}"
        seconds = f"{s['default_seconds']:.2f} ({s['default_cpu_seconds']:.2f})"
        lines.append(f"| {s['game']} | {s['budget']} ({s['multiple']}n) | {s['default']:.4f} ({s['default_sampler']}) "
                     f"| {s['default_coverage']:.2f} | {s['default_sampling_coverage']:.2f} | {seconds} | {best} "
                     f"| {ratio} | {hybrid} |")
    libraries = sorted({r["library"] for r in rows})
    lines += ["", f"Libraries: {', '.join(libraries)} (each row of the JSON names its own)."]
    lines += ["", "| game | role | exact Shapley: coalitions | exact: generations | full coalition alone: "
              "generations |", "|---|---|---|---|---|"]
    lines += [f"| {g} | {t['role']} | {t['coalitions']} | {t['exact_generations']} | "
              f"{t['full_coalition_generations']} |" for g, t in tables.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
