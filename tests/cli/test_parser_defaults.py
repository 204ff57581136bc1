"""Every ``cgym`` default that a settings class declares is the class's: the parser's actions are walked and each
option compared with the dataclass field it fills, so a literal typed into parser.py that drifts from the library's
default fails here."""

from __future__ import annotations

import argparse
import dataclasses

from coalition_gym.cli.parser import build_parser
from coalition_gym.envs.executors import EXECUTORS
from coalition_gym.envs.protocols import COMPARED_PROTOCOLS
from coalition_gym.envs.system import SystemSpec
from coalition_gym.integrations.serve_options import ServeOptions
from coalition_gym.reports.demo import DemoOptions
from coalition_gym.reports.episodes import EpisodeRunOptions
from coalition_gym.reports.gain import GainOptions
from coalition_gym.reports.games import GameOptions
from coalition_gym.reports.leaderboard import EvalOptions
from coalition_gym.reports.robustness import RobustnessOptions
from coalition_gym.reports.sweep import SweepOptions
from coalition_gym.training.config import RunSettings
from coalition_gym.valuation.interactions import SampledSettings

#: subcommand -> the settings classes its options fill (what the command builds from its arguments)
SETTINGS: dict[str, tuple[type, ...]] = {
    "run": (EpisodeRunOptions, SystemSpec),
    "serve": (ServeOptions, SystemSpec),
    "eval": (GameOptions, EvalOptions, SampledSettings, SystemSpec),
    "sweep": (SweepOptions,),
    "robustness": (RobustnessOptions, SystemSpec),
    "gain": (GainOptions, SystemSpec),
    "train": (RunSettings,),
    "demo": (DemoOptions,),
}
#: an option's dest -> the field it fills, where the names differ
FIELD_OF = {"bootstrap": "n_boot", "pool": "collaborators", "idle_timeout": "idle_timeout_s",
            "report_every": "report_every_s", "mc_tolerance": "tolerance", "mc_budget": "budget",
            "mc_budget_generations": "budget_generations", "gain": "gain_unit"}
#: (subcommand, dest) whose default differs from the field's on purpose, and why
ON_PURPOSE = {
    **{(cmd, "split"): "an evaluation reads the test split; a System's default is train"
       for cmd in ("run", "eval", "robustness", "gain")},
    **{("train", dest): "None: the preset decides (cgym train --preset)"
       for dest in ("protocol", "task", "collaborators", "steps", "seed")},
}


def subparsers(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[prefix + name] = sub
                found.update(subparsers(sub, prefix + name + " "))
    return found


def compared(parser: argparse.ArgumentParser) -> tuple[list[str], int]:
    """The options whose default differs from the field they fill, and how many options were compared."""
    differ, count = [], 0
    subs = subparsers(parser)
    for command, classes in SETTINGS.items():
        for action in subs[command]._actions:
            name = FIELD_OF.get(action.dest, action.dest)
            fields = [f for cls in classes for f in dataclasses.fields(cls) if f.name == name]
            if not fields or not action.option_strings or (command, action.dest) in ON_PURPOSE:  # a positional: given
                continue
            count += 1
            expected = fields[0].default
            if action.default != expected:
                differ.append(f"cgym {command} {action.option_strings[0]}: {action.default!r}, the settings "
                              f"class says {expected!r}")
    return differ, count


def test_every_default_a_settings_class_declares_is_read_from_it():
    differ, count = compared(build_parser())
    assert differ == [] and count >= 40, (differ, count)


def test_a_drifted_default_is_seen():
    parser = build_parser()
    seed = next(a for a in subparsers(parser)["eval"]._actions if a.dest == "seed")
    seed.default = 7
    differ, _ = compared(parser)
    assert differ == ["cgym eval --seed: 7, the settings class says 0"]


def test_the_tables_name_real_fields_and_options():
    subs = subparsers(build_parser())
    fields = {f.name for classes in SETTINGS.values() for cls in classes for f in dataclasses.fields(cls)}
    assert set(FIELD_OF.values()) <= fields
    for command, dest in ON_PURPOSE:
        assert any(a.dest == dest for a in subs[command]._actions), (command, dest)


def test_shared_lists_are_declared_once():
    subs = subparsers(build_parser())

    def default(command: str, dest: str):
        return next(a.default for a in subs[command]._actions if a.dest == dest)

    for command in ("sweep", "robustness", "gain"):
        assert default(command, "protocols") == ",".join(COMPARED_PROTOCOLS)
    for command in ("eval", "train"):
        assert default(command, "executor") == EXECUTORS[0]
