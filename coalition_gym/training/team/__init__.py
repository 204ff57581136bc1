"""Team training: several trainable seats learning together inside one protocol, trained by the one trainer
(:class:`~coalition_gym.training.trainer.Trainer`, recipe ``team-crl``: ``cgym train --policy A --policy B``).
Its settings are one of the trainer's config family (:class:`~coalition_gym.training.config.TeamCRLConfig`);
:mod:`coalition_gym.training.credit` says what each seat is rewarded with (system, leave-one-out or Shapley credit)
and :func:`coalition_gym.training.rollouts.collect` runs the team's executions and the counterfactual sub-teams the
credit needs; :mod:`.strategy` holds the team's update, evaluation view and report, :mod:`.trainer` what two runs
may differ in (:func:`~.trainer.comparable_metrics`) and :mod:`.diagnostics` each seat's learning-signal numbers.
The recipe's ``train`` is a policy recipe's: a policy is a team of one seat. Importing it loads no torch (the
trainer does, when built)."""

from .diagnostics import seat_signal, summarise_seats

__all__ = ["seat_signal", "summarise_seats"]
