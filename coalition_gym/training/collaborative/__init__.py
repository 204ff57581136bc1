"""Collaborative training (the Sparta and multi-agent finetuning methods): train copies of a
coalition's members, then value what they answer. See envs/protocols/collaborative.py for the
methods' settings and :class:`TrainedCoalitionGame` for valuation with training inside."""

from .common import CoalitionTraining
from .game import TRAINERS, TrainedCoalitionGame, TrainingCost
from .members import Member, copy_member
from .store import TrainedCheckpoints

__all__ = ["CoalitionTraining", "TRAINERS", "TrainedCoalitionGame", "TrainingCost", "Member", "copy_member",
           "TrainedCheckpoints"]
