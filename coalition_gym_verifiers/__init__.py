"""The verifiers plugin ``coalition-gym-verifiers``: how ``vf-eval`` and prime-rl find coalition-gym's environment.

verifiers resolves an environment by a top-level module name; this package re-exports the taskset, environment
and harness of :mod:`coalition_gym.integrations.verifiers` (where everything lives) under it.
"""

from coalition_gym.integrations.verifiers import CoalitionEnv, CoalitionTaskset, SeatHarness

__all__ = ["CoalitionEnv", "CoalitionTaskset", "SeatHarness"]
