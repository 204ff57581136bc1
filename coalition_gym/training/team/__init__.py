"""Team training: several trainable seats learning together inside one protocol. :mod:`.credit` says what each
seat is rewarded with (system, leave-one-out or Shapley credit); :mod:`.rollouts` runs the team's executions
and the counterfactual sub-teams the credit needs; :mod:`.config` holds the settings (:class:`TeamConfig`),
:mod:`.trainer` the trainer (:class:`TeamTrainer`, recipe ``team-crl``: ``cgym train --policy A --policy B``) and
:mod:`.diagnostics` each seat's learning-signal numbers. Importing it loads no torch (the trainer does, when built)."""

from .config import TEAM_METHOD, TeamConfig, make_team_config
from .credit import CREDIT_MODES, SHAPLEY_SEAT_LIMIT, needed_coalitions, seat_credit
from .diagnostics import seat_signal, summarise_seats
from .rollouts import CounterfactualCost, TeamRollout, collect_team
from .trainer import TeamEval, TeamState, TeamTrainer, build_team_system, train_team

__all__ = ["CREDIT_MODES", "SHAPLEY_SEAT_LIMIT", "needed_coalitions", "seat_credit", "CounterfactualCost",
           "TeamRollout", "collect_team", "TeamConfig", "TEAM_METHOD", "make_team_config", "TeamTrainer", "TeamState",
           "TeamEval", "train_team", "build_team_system", "seat_signal", "summarise_seats"]
