"""A valuation run used by test_cache.py: killed mid-run, then restarted (run as a script)."""

import json
import sys
import time

from coalition_gym.agents import load_pool
from coalition_gym.agents.cache import GenerationCache
from coalition_gym.agents.pools import Pool
from coalition_gym.envs.protocols import make_protocol
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.tasks import make
from coalition_gym.valuation.estimators import exact_shapley, leave_one_out
from coalition_gym.valuation.game import CoalitionGame


class Slow:
    """Wraps a generator and sleeps per call, so the run is long enough to be killed mid-way."""

    def __init__(self, inner, delay):
        self.inner, self.delay, self.identity = inner, delay, inner.identity

    def generate(self, asks):
        time.sleep(self.delay)
        return self.inner.generate(asks)


def main(cache_path: str, out_path: str, delay: float) -> None:
    base = load_pool("sim:demo")
    pool = Pool({n: Slow(g, delay) for n, g in base.members.items()},
                {n: Slow(g, delay) for n, g in base.helpers.items()}, name="slow-demo")
    task = make("rg/basic_arithmetic", size=20)
    cache = GenerationCache(cache_path)
    game = CoalitionGame(System.build(SystemSpec(make_protocol("debate", rounds=2), task, pool,
                                                 split="test"), cache=cache),
                         seed=5, max_programs=40)
    result = {"shapley": exact_shapley(game).values.tolist(), "loo": leave_one_out(game).values.tolist(),
              "generations": game.generations, "cache_hits": game.cache_hits,
              "dev_generations": game.dev.generated}  # the dev answers debate's tie-break measured first
    cache.close()
    with open(out_path, "w") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
