"""Coalition training (the Sparta and multi-agent finetuning recipes): train copies of a coalition's
members, then value what they answer. Settings in :mod:`.settings`, one coalition's training in
:mod:`.sparta` and :mod:`.finetuning`, valuation with training inside in :class:`TrainedCoalitionGame`."""

from .common import CoalitionTraining
from .game import TrainedCoalitionGame, TrainingCost
from .members import Member, copy_member
from .settings import (
    CoalitionTrainingSettings,
    MultiagentFinetuningSettings,
    SpartaSettings,
    make_coalition_settings,
)
from .store import TrainedCheckpoints

__all__ = ["CoalitionTraining", "TrainedCoalitionGame", "TrainingCost", "Member", "copy_member",
           "TrainedCheckpoints", "CoalitionTrainingSettings", "SpartaSettings", "MultiagentFinetuningSettings",
           "make_coalition_settings"]
