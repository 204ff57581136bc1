"""A CLI that explains itself: help and a default for every option, runnable examples, --version, and
listings of protocols, pools and task families."""

import argparse
import shlex

import pytest

from coalition_gym import __version__
from coalition_gym.agents.pools import pool_names
from coalition_gym.cli import build_parser, main
from coalition_gym.envs.protocols import PROTOCOLS
from coalition_gym.envs.registration import ENV_IDS


def subcommands(parser: argparse.ArgumentParser, prefix: str = ""):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix}{name}", sub
                yield from subcommands(sub, f"{prefix}{name} ")


PARSERS = dict(subcommands(build_parser()))


@pytest.mark.parametrize("name", list(PARSERS))
def test_every_option_has_help_and_every_subcommand_an_example(name):
    parser = PARSERS[name]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        assert action.help, f"cgym {name}: {action.option_strings or action.dest} has no help"
        shown = parser.formatter_class(prog="x")._get_help_string(action)
        has_default = action.default not in (None, False, []) and action.option_strings
        assert not has_default or "default" in shown, f"cgym {name}: {action.dest} hides its default"
    assert parser.epilog and parser.epilog.startswith("examples:"), f"cgym {name} has no example"


@pytest.mark.parametrize("name", list(PARSERS))
def test_the_examples_parse(name):
    for line in PARSERS[name].epilog.splitlines()[1:]:
        argv = shlex.split(line.strip())
        assert argv[0] == "cgym"
        build_parser().parse_args(argv[1:])  # raises SystemExit on a bad example


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"cgym {__version__}"


def test_protocols_pools_and_tasks_are_listed(capsys):
    assert main(["protocols"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in PROTOCOLS) and all(env_id in out for env_id in ENV_IDS)
    assert "rounds=3" in out and "fixed helpers (never members): ranker, fuser" in out
    assert main(["pools"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in pool_names()) and "members: atlas, borealis, cirrus, delta" in out
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    for family in ("rg/* (arithmetic", "zoo:arith", "zoo:reverse", "mix:<task>", "humaneval", "gsm8k"):
        assert family in out
