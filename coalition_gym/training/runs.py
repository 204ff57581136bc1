"""``cgym train``'s one library function, :func:`train_runs`: the given policies trained by the named recipes into
one folder. One policy trains with each policy recipe (C-RL and its baselines) beside Base
(:func:`~.trainer.run_methods`); several, or any number under a team recipe, train together as the seats of one
team (``crl`` meaning its team form ``team-crl``), which its report compares with itself untrained. Either way
every run goes through the one trainer (:class:`~.trainer.Trainer`), and what the caller keeps (reports, the
preset, the settings for the run record, each policy's weights record) comes back in one :class:`TrainingRuns`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..errors import ConfigError
from .config import TeamCRLConfig, default_run, make_config, preset_for
from .policy_model import policy_weights
from .recipes import RecipeContext, get_recipe, recipe_names, recipe_of
from .trainer import RunOptions, claim_run_folder, run_methods


@dataclass
class TrainingRuns:
    """What :func:`train_runs` trained: every run's report, the preset it resolved, the settings a run record
    keeps (``training``) and each policy's weights record (one policy's, or seat -> its record)."""

    reports: list[dict[str, Any]]
    preset: str
    settings: dict[str, Any]
    policy_weights: dict[str, Any]

    @property
    def team_report(self) -> dict[str, Any] | None:
        """The team's report when the policies trained as one team (its scores are per seat), else None."""
        return next((r for r in self.reports if "per_seat" in r), None)


def train_runs(policies: Sequence[str] = (), methods: Sequence[str] = ("crl",), root: str | Path = "runs/train",
               preset: str = "auto", options: RunOptions | None = None, **settings: Any) -> TrainingRuns:
    """Train ``policies`` (none: the default run's) with ``methods`` into ``root`` (see the module doc);
    ``settings`` are the recipes' settings over the default run (:func:`.config.default_run`); ``preset``
    ``auto`` is ``tiny`` for zoo policies, ``paper`` for any other."""
    options = options or RunOptions()
    settings = default_run({**settings, **({"policies": list(policies)} if policies else {})})
    preset = preset_for(preset, settings["policies"])
    if len(settings["policies"]) >= 2 or set(methods) & set(recipe_names("team")):  # a team recipe seats any number
        return _team_run(list(methods), Path(root), preset, options, settings)
    reports = run_methods(methods, root, preset, options, **settings)
    return TrainingRuns(reports, preset, {"methods": ",".join(methods), "preset": preset, **settings},
                        policy_weights(settings["policies"][0]))


def team_method(methods: Sequence[str], seats: int) -> str:
    """The team recipe ``methods`` name for ``seats`` policies (``crl``: its team form, team C-RL), or the
    refusal."""
    teams = recipe_names("team")
    asked = ",".join(methods)
    team_crl = recipe_of(TeamCRLConfig)  # crl's team form, named where it is registered
    assert team_crl is not None
    method = team_crl.name if asked == "crl" else asked
    if method not in teams:
        raise ConfigError(f"--method {asked!r} trains one policy; with {seats} --policy options the team recipes "
                          f"apply: {', '.join(teams)} (or crl, which means {team_crl.name})")
    return method


def _team_run(methods: list[str], root: Path, preset: str, options: RunOptions,
              settings: dict[str, Any]) -> TrainingRuns:
    """The policies as the seats of one team (``settings``: any setting of the team recipe, e.g. credit, seats)."""
    method = team_method(methods, len(settings["policies"]))
    config = make_config(method, preset, **settings)
    claim_run_folder(root, config, options.overwrite)
    folder = root / f"{config.method}-seed{config.seed}"
    report = get_recipe(config.method).train(config, RecipeContext(folder, options))
    return TrainingRuns([report], preset, {"methods": config.method, "preset": preset, **config.to_dict()},
                        {seat: policy_weights(spec) for seat, spec in config.seat_policies.items()})


__all__ = ["TrainingRuns", "train_runs", "team_method"]
