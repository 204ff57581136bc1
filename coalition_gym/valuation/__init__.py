"""Compositional strength: coalition games, estimators, statistics and leaderboards."""

from .estimators import (
    ESTIMATORS,
    EXACT_LIMIT,
    ValuationResult,
    exact_banzhaf,
    exact_shapley,
    leave_one_out,
        sampled_shapley_values,
    solo,
)
from .game import CoalitionGame, FunctionGame, Game
from .proxy import ProxySampler  # registers --sampler proxy
from .stats import benjamini_hochberg, bootstrap_mean, pearson, rescue_drag, spearman, summarise_settings

__all__ = ["ESTIMATORS", "EXACT_LIMIT", "ValuationResult", "exact_banzhaf", "exact_shapley", "leave_one_out",
           "sampled_shapley_values", "solo", "CoalitionGame", "FunctionGame", "Game", "ProxySampler",
           "benjamini_hochberg",
           "bootstrap_mean", "pearson", "rescue_drag", "spearman", "summarise_settings"]
