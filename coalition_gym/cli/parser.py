"""The ``cgym`` command line: every subcommand, option, default and example, declared.

Each subcommand is one row of :data:`COMMANDS` (name, help, examples, the function that runs it, the
function that adds its options); options several subcommands share are small functions (``_system_options``,
``_output_options`` ...). A default that a settings class declares is read from that class (:func:`_option`,
:func:`_default`), never written here again: ``tests/cli/test_parser_defaults.py`` walks every option and
compares it with the field it maps to."""

from __future__ import annotations

import argparse
import dataclasses
import math
import typing
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..errors import ConfigError, close_names, did_you_mean
from ..failures import FailureLimit
from ..settings_check import bounds_of
from ..version import __version__
from . import commands


def _number_at_least(low: float, kind: type = int, strict: bool = False) -> Any:
    """An argparse type: a ``kind`` number >= low (> low when ``strict``)."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if value < low or (strict and value == low) or (kind is float and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"{text} must be {'>' if strict else '>='} {low}")
        return value
    return parse


def _one_of(kind: str, names: Sequence[str]) -> Any:
    """An argparse type: one of ``names``; a typo gets the close names, as every other name does."""
    def parse(text: str) -> str:
        if text not in names:
            raise argparse.ArgumentTypeError(f"unknown {kind} {text!r}.{did_you_mean(text, names)} Use one of "
                                             f"{', '.join(names)}")
        return text
    parse.__name__ = kind  # argparse names the type in some messages
    return parse


def _choice(p: argparse.ArgumentParser, flag: str, kind: str, names: Sequence[str], default: Any, help: str) -> None:
    p.add_argument(flag, default=default, type=_one_of(kind, names), metavar="|".join(names), help=help)


def _field(options: type, name: str) -> dataclasses.Field:
    return next(f for f in dataclasses.fields(options) if f.name == name)


def _default(options: type, name: str) -> Any:
    """The default of field ``name`` of the settings class ``options``: what a flag with no field of its own
    but the same meaning starts from."""
    return _field(options, name).default


def _number_kind(options: type, name: str) -> type | None:
    """int or float when the field is one (optional or not), else None."""
    try:
        hint = typing.get_type_hints(options)[name]
    except (NameError, TypeError):  # an annotation naming what only type checkers import
        return None
    kinds = [k for k in (typing.get_args(hint) or (hint,)) if k is not type(None)]
    return kinds[0] if kinds in ([int], [float]) else None


def _option(p: argparse.ArgumentParser, flag: str, options: type, name: str, help: str | None = None,
            **extra: Any) -> argparse.Action:
    """``flag`` for the field ``name`` of an options dataclass: its default, bounds, choices and doc come from
    the field (declared once, with ``settings_check.setting``), so the command line and the library agree."""
    field = _field(options, name)
    bounds, number = bounds_of(field), _number_kind(options, name)
    text = help or (bounds.doc if bounds is not None else "")
    if bounds is not None and bounds.choices is not None:
        names = [str(c) for c in bounds.choices]
        return p.add_argument(flag, default=field.default, type=_one_of(name, names), metavar="|".join(names),
                              help=text)
    if number is None:
        return p.add_argument(flag, default=field.default, help=text, **extra)
    low = None if bounds is None else bounds.ge if bounds.ge is not None else bounds.gt
    strict = bounds is not None and bounds.gt is not None
    parse = number if low is None else _number_at_least(low, number, strict=strict)
    if bounds is not None and bounds.le is not None:
        parse = _at_most(parse, bounds.le)
    return p.add_argument(flag, type=parse, default=field.default, help=text, **extra)


def _at_most(parse: Any, high: float) -> Any:
    def within(text: str) -> Any:
        value = parse(text)
        if value > high:
            raise argparse.ArgumentTypeError(f"{text} must be <= {high}")
        return value
    return within


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Examples kept as written; every option's default shown unless its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text or default in (None, False, argparse.SUPPRESS) or action.option_strings == []
                or isinstance(default, list) and not default):
            return text
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose unknown flag is refused by the (sub)command that got it, with that command's usage
    and the close flags (argparse leaves it to the top level: its usage, and no suggestion)."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extras = super().parse_known_args(args, namespace)
        flags = [e for e in extras if e.startswith("-") and len(e) > 1]
        if flags:
            name = flags[0].split("=", 1)[0]
            known = [o[2:] for o in self._option_string_actions if o.startswith("--")]
            close = [f"--{c}" for c in close_names(name.lstrip("-"), known)]  # the dashes every flag shares: no hint
            hint = f" Did you mean {', '.join(close)}?" if close else f" See `{self.prog} --help`."
            self.error(f"unrecognized argument {name}.{hint}")
        return parsed, extras


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def _failure_limit(text: str) -> Any:
    """An argparse type: a ``--max-failures`` limit (the library's parse, its refusal as argparse's)."""
    try:
        return FailureLimit.parse(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# ---- option groups several subcommands share ---------------------------------------------------------------

def _paired_run_options(p: argparse.ArgumentParser, options: type, out: str, files: str) -> None:
    """--seed, --bootstrap, --out and --cache of a command that compares systems on paired items (robustness, gain)."""
    _option(p, "--seed", options, "seed")
    _option(p, "--bootstrap", options, "n_boot")
    p.add_argument("--out", default=out, help=f"folder for {files}, results.jsonl and run.json")
    p.add_argument("--cache", default=None, help="folder for the persistent generation cache: an interrupted run "
                                                 "resumes from it (default: no cache)")


def _output_options(p: argparse.ArgumentParser) -> None:
    _overwrite_option(p)
    p.add_argument("--no-text", action="store_true",
                   help="keep extracted answers but not reply texts in the per-episode results file")


def _overwrite_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--overwrite", action="store_true", help="replace the results in a non-empty --out")


def _max_failures_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-failures", type=_failure_limit, default="default", metavar="N|P%",
                   help="exit 3 when more episodes failed than this count or percentage (default: any "
                        "coalition whose every episode failed, or more than 10%%); failed episodes score 0")


def _pool_option(p: argparse.ArgumentParser) -> None:
    from ..envs.system import SystemSpec

    _option(p, "--pool", SystemSpec, "collaborators", "pool preset (see `cgym pools`) or a YAML/JSON pool file",
            metavar="POOL")


def _task_options(p: argparse.ArgumentParser, split: bool = True) -> None:
    from ..envs.system import SystemSpec

    _option(p, "--task", SystemSpec, "task", "task name (see `cgym tasks`)")
    p.add_argument("--task-seed", type=int, default=0, help="seed of procedurally generated tasks")
    if split:  # an evaluation's split: test first
        from ..tasks.base import SPLITS

        _choice(p, "--split", "split", SPLITS[::-1], "test", "split the items come from")


def _members_option(p: argparse.ArgumentParser, help: str) -> None:
    from ..envs.system import SystemSpec

    _option(p, "--members", SystemSpec, "members", help)


def _protocol_settings(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a protocol setting, repeatable (see `cgym protocols`), e.g. --set rounds=2")


def _protocols_option(p: argparse.ArgumentParser, help: str = "comma-separated protocols (see `cgym protocols`)") \
        -> None:
    from ..envs.protocols import COMPARED_PROTOCOLS

    p.add_argument("--protocols", default=",".join(COMPARED_PROTOCOLS), help=help)


def _items_option(p: argparse.ArgumentParser, default: int, help: str = "items to evaluate on", low: int = 1) -> None:
    p.add_argument("--items", type=_number_at_least(low), default=default, help=help)


def _executor_option(p: argparse.ArgumentParser, help: str) -> None:
    from ..envs.executors import EXECUTORS

    _choice(p, "--executor", "executor", EXECUTORS, EXECUTORS[0], help)


def _env_id_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("env_id", help="environment id, e.g. coalition_gym/Debate-v0 (see `cgym envs`)")


def _cache_root_option(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--out", default=None, help=help)


# ---- each subcommand's options -----------------------------------------------------------------------------

def _run_options(p: argparse.ArgumentParser) -> None:
    from ..reports.episodes import EpisodeRunOptions

    _env_id_argument(p)
    _option(p, "--episodes", EpisodeRunOptions, "episodes")
    _task_options(p)
    p.add_argument("--size", type=_number_at_least(1), default=None, help="items per split (default: --episodes)")
    _pool_option(p)
    _members_option(p, "comma-separated coalition (default: the whole pool)")
    _option(p, "--seed", EpisodeRunOptions, "seed")
    _protocol_settings(p)
    _option(p, "--bootstrap", EpisodeRunOptions, "n_boot")
    p.add_argument("--out", default=None, help="folder for episodes.jsonl, summary.json and run.json "
                                               "(default: print only)")
    _output_options(p)
    _max_failures_option(p)


def _serve_options(p: argparse.ArgumentParser) -> None:
    from ..envs.system import SystemSpec
    from ..integrations.serve_options import ServeOptions
    from ..tasks.base import SPLITS

    _env_id_argument(p)
    _pool_option(p)
    _task_options(p, split=False)
    _choice(p, "--split", "split", SPLITS, _default(SystemSpec, "split"), "split the episodes' items come from")
    p.add_argument("--size", type=_number_at_least(1), default=None, help="items per split (default: the task's)")
    _members_option(p, "comma-separated frozen members (default: the whole pool)")
    _protocol_settings(p)
    _option(p, "--host", ServeOptions, "host")
    _option(p, "--port", ServeOptions, "port")
    _option(p, "--token", ServeOptions, "token", "bearer token every client must send (default: $CGYM_SERVE_TOKEN, "
            "better: a command line shows in `ps`; required on a non-local --host)")
    for flag, name in (("--max-sessions", "max_sessions"), ("--idle-timeout", "idle_timeout_s"),
                       ("--policy-style", "policy_style"), ("--report-every", "report_every_s"),
                       ("--batch-wait-ms", "batch_wait_ms"), ("--model-process", "model_process")):
        _option(p, flag, ServeOptions, name)
    p.add_argument("--openenv-files", default=None, metavar="DIR",
                   help="write OpenEnv's files for this server (openenv.yaml, pyproject.toml, uv.lock, "
                        "server/app.py, server/Dockerfile) to DIR and exit; files there that it did not write "
                        "are kept (refused) unless --overwrite")
    p.add_argument("--overwrite", action="store_true",
                   help="with --openenv-files: replace files in DIR that cgym serve did not write")


def _eval_options(p: argparse.ArgumentParser) -> None:
    from ..envs.system import SystemSpec
    from ..reports.games import GameOptions
    from ..reports.leaderboard import EvalOptions

    _pool_option(p)
    _option(p, "--protocol", SystemSpec, "protocol", "protocol name (see `cgym protocols`)")
    _task_options(p)
    p.add_argument("--estimator", default="all",
                   help="loo, shapley, banzhaf, mc, a registered one (see `cgym estimators`), auto (exact Shapley "
                        "when it is cheap in generations, else mc), a comma-separated list, or all")
    _items_option(p, 200)
    _members_option(p, "comma-separated subset of the pool (default: every member)")
    _protocol_settings(p)
    p.add_argument("--out", default="runs/eval", help="folder for the leaderboard files")
    p.add_argument("--cache", default=None, help="folder for the persistent generation cache (and, for sparta and "
                                                 "multiagent_finetuning, the trained checkpoints): a killed run "
                                                 "resumes from it (default: no cache)")
    p.add_argument("--save-trained", default=None, metavar="DIR",
                   help="sparta / multiagent_finetuning: save the full coalition's trained members in DIR with a "
                        "pool.yaml (use it as --pool DIR/pool.yaml)")
    _option(p, "--seed", GameOptions, "seed", "episode, bootstrap and permutation seed")
    _option(p, "--bootstrap", EvalOptions, "n_boot")
    _option(p, "--exact-limit", EvalOptions, "exact_limit",
            help="the most members exact Shapley, Banzhaf and interactions enumerate all 2^n coalitions for "
                 "(default 12; above it they are refused, or sampled); the number of coalitions is said first")
    _option(p, "--best-team", EvalOptions, "best_team", metavar="K",
            help="also report the coalition of K members with the highest value among those evaluated "
                 "(exact when all are), next to the K members with the highest Shapley values")
    _sampling_options(p)
    _executor_option(p, "where coalition executions run (ray: pip install 'coalition-gym[ray]')")
    p.add_argument("--address", default=None, help="Ray head host:port or 'auto' (default: start a local Ray)")
    p.add_argument("--num-cpus", type=_number_at_least(1), default=None,
                   help="CPUs of a locally started Ray (default: all)")
    _output_options(p)
    _max_failures_option(p)


def _sampling_options(p: argparse.ArgumentParser) -> None:
    """The sampling estimators' stop rules (mc and sampled interactions share them) and MC Shapley's sampler."""
    from ..valuation.interactions import SampledSettings

    _option(p, "--mc-tolerance", SampledSettings, "tolerance",
            "MC Shapley: stop when every value's permutation stderr is below this (0: never)")
    _option(p, "--mc-budget", SampledSettings, "budget",
            "MC Shapley: at most this many distinct coalitions (default: 25n above 12 members, unless "
            "--mc-budget-generations is given)")
    _option(p, "--mc-budget-generations", SampledSettings, "budget_generations",
            "MC Shapley: stop after this many backend generations (default: no cap); also what "
            "--estimator auto weighs exact Shapley against")
    p.add_argument("--sampler", default="auto", metavar="NAME",
                   help="MC Shapley's sampler: auto (the most accurate measured: proxy), proxy, hybrid, kernel, "
                        "stratified, permutation, or a registered one (see `cgym estimators`)")


def _sweep_options(p: argparse.ArgumentParser) -> None:
    from ..reports.baselines import UNITS
    from ..reports.sweep import SweepOptions

    p.add_argument("--pools", default="sim:demo,sim:independent", help="comma-separated pools (see `cgym pools`)")
    _protocols_option(p, "comma-separated protocols")
    p.add_argument("--tasks", default="rg/basic_arithmetic,rg/gsm_symbolic", help="comma-separated tasks")
    p.add_argument("--estimator", default="loo", help="loo, shapley, banzhaf, mc, a comma-separated list, or all")
    _items_option(p, 100, "items per task")
    _option(p, "--alpha", SweepOptions, "alpha")
    _choice(p, "--gain", "cost unit", list(UNITS), _default(SweepOptions, "gain_unit"),
            "also each protocol's gain over cost-matched baselines per pool x task (see `cgym gain`), cost in "
            "this unit; the summary gives per protocol the share of settings where it beats the best baseline "
            "with the CI above 0 (default: off)")
    p.add_argument("--out", default="runs/sweep", help="folder for sweep_summary.json, sweep.md and one "
                                                       "leaderboard folder per setting")
    p.add_argument("--cache", default=None, help="folder for the generation caches (default: none)")
    _option(p, "--seed", SweepOptions, "seed")
    _output_options(p)
    _max_failures_option(p)


def _robustness_options(p: argparse.ArgumentParser) -> None:
    from ..reports.robustness import RobustnessOptions

    _pool_option(p)
    _protocols_option(p)
    _task_options(p)
    p.add_argument("--adversary", required=True, metavar="PROFILE|PATH",
                   help="an adversary profile (confidently_wrong, persuader, colluders, format_breaker, "
                        "judge_targeting) or an HF model folder, e.g. a `cgym train --reward negate` run folder (its "
                        "seat's best/)")
    _option(p, "--seat", RobustnessOptions, "seat", metavar="NAME",
            help="the member the adversary replaces (default: the coalition's first member); colluders "
                 "also take the next member's seat")
    _members_option(p, "comma-separated coalition (default: the whole pool)")
    _items_option(p, 200)
    _protocol_settings(p)
    _paired_run_options(p, RobustnessOptions, "runs/robustness", "robustness.json/.md/.csv/.png/.html")
    _output_options(p)
    _max_failures_option(p)


def _gain_options(p: argparse.ArgumentParser) -> None:
    from ..reports.gain import MIN_ITEMS, GainOptions

    _pool_option(p)
    _protocols_option(p)
    _task_options(p)
    _members_option(p, "comma-separated coalition (default: the whole pool)")
    _items_option(p, 200, f"items to evaluate on (at least {MIN_ITEMS}: the gain's CI is a paired bootstrap over "
                  "items)", low=MIN_ITEMS)
    _option(p, "--unit", GainOptions, "unit")
    _option(p, "--max-k", GainOptions, "max_k")
    _protocol_settings(p)
    _paired_run_options(p, GainOptions, "runs/gain", "gain.json/.md/.csv/.html, pareto.png")
    _output_options(p)
    _max_failures_option(p)


def _compare_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="folders written by `cgym eval --out`")
    p.add_argument("--out", default=None, help="folder for compare.md, compare.html and compare.json "
                                               "(default: print only)")
    _overwrite_option(p)


def _train_options(p: argparse.ArgumentParser) -> None:
    from ..training.recipes import recipe_names

    p.add_argument("--method", default="crl", help=f"{', '.join(recipe_names('policy'))} (the policy-training "
                                                   "recipes), or a comma-separated list; "
                                                   f"{', '.join(recipe_names('team'))} (a team of any size)")
    p.add_argument("--protocol", default=None, help="protocol the policy collaborates in (default: slm_mux "
                                                    "with tie_break=random)")
    p.add_argument("--task", default=None, help="training task (default: mix:zoo:arith,zoo:reverse)")
    p.add_argument("--policy", action="append", default=None,
                   help="HF model folder or zoo:<recipe>/<member> (default: zoo:default/quill, shipped with the "
                        "package, at lr 1e-4); give it K >= 2 times to train a team, one seat per policy "
                        "(team-crl: --set credit=system|loo|shapley); --set seats=[a,b] names the seats "
                        "(checkpoints in <out>/<method>-seed<seed>/<seat>/best; one policy's seat: policy)")
    p.add_argument("--collaborators", default=None, metavar="POOL",  # None: the preset's
                   help="pool preset (see `cgym pools`) or a YAML/JSON pool file")
    p.add_argument("--force", action="store_true", help="train even when the pre-training probe finds no "
                                                       "informative group (no learning signal)")
    p.add_argument("--members", default=None, help="comma-separated subset of the collaborators' pool "
                                                   "(default: all)")
    p.add_argument("--steps", type=_number_at_least(1), default=None, help="training steps (default: the preset's)")
    p.add_argument("--seed", type=int, default=None, help="run seed (default: the preset's, 0)")
    _train_run_options(p)


def _train_run_options(p: argparse.ArgumentParser) -> None:
    """How ``cgym train`` runs: the preset, settings, reward, tracker, executor and where it writes."""
    from ..training.config import PRESETS, REWARDS, RunSettings

    _choice(p, "--preset", "preset", ["auto", *PRESETS], "auto",
            "paper (lr 1e-6, 8x8 executions), tiny (zoo models on CPU), or auto (default): tiny "
            "for a zoo policy, paper for any other")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="any setting of the method's config (a TrainConfig field), or protocol.<setting>, "
                        "repeatable")
    _choice(p, "--reward", "reward", REWARDS, None,
            "RL methods' reward: system (default) or negate, the reward with its sign flipped and "
            "the lowest dev score kept: trains an adversary for `cgym robustness --adversary "
            "<out>/crl-seed0`")
    _option(p, "--report-to", RunSettings, "report_to")
    _executor_option(p, "where rollouts are collected")
    p.add_argument("--address", default=None, help="Ray head host:port or 'auto' (default: a local Ray)")
    _option(p, "--out", RunSettings, "out", "root folder: one resumable run folder per method and seed")
    p.add_argument("--overwrite", action="store_true",
                   help="start over a run folder that holds a run with another configuration (default: refuse it; "
                        "the same configuration resumes)")
    p.add_argument("--export", default=None, metavar="DIR",
                   help="write DIR/pool.yaml: the trained policy beside its collaborators, and the cgym eval "
                        "command that replays the trainer's test scores (one subfolder per method when several)")
    _max_failures_option(p)


def _zoo_options(p: argparse.ArgumentParser) -> None:
    zsub = p.add_subparsers(dest="zoo_command", required=True, metavar="ZOO_COMMAND")
    z = _subcommand(zsub, "build", "train and evaluate a zoo recipe (prints each model's accuracy)",
                    "cgym zoo build", "cgym zoo build --recipe tiny --force")
    z.add_argument("--recipe", default="default", help="recipe name (see `cgym zoo list`)")
    _cache_root_option(z, "cache root (default: $COALITION_GYM_HOME/zoo or ~/.cache/coalition_gym/zoo)")
    z.add_argument("--force", action="store_true", help="rebuild even if a build exists")
    z = _subcommand(zsub, "list", "recipes, their models and whether they are built", "cgym zoo list")
    _cache_root_option(z, "cache root (default: as for build)")
    z = _subcommand(zsub, "verify", "compare a local build with the shipped models: fingerprints and accuracies",
                    "cgym zoo verify", "cgym zoo verify --recipe tiny --rebuild")
    z.add_argument("--recipe", default="default", help="a recipe the package ships (default, tiny)")
    _cache_root_option(z, "cache root of the local build (default: as for build)")
    z.add_argument("--rebuild", action="store_true", help="rebuild locally first, even if a local build exists")
    for z in zsub.choices.values():
        z.set_defaults(func=commands.cmd_zoo)


def _tasks_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--all", action="store_true", help="one line per reasoning-gym generator")


def _demo_options(p: argparse.ArgumentParser) -> None:
    from ..reports.demo import DemoOptions

    _option(p, "--pool", DemoOptions, "pool", "pool preset (see `cgym pools`) or a YAML/JSON pool file",
            metavar="POOL")
    _option(p, "--task", DemoOptions, "task", "task name (see `cgym tasks`)")
    _option(p, "--items", DemoOptions, "items")
    _option(p, "--seed", DemoOptions, "seed")
    _option(p, "--out", DemoOptions, "out", "folder for summary.json, strength.md and a leaderboard folder per "
            "protocol")
    _overwrite_option(p)


# ---- the subcommands ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Command:
    """One ``cgym`` subcommand: its name, one-line help, examples, the function that runs it and the one that adds
    its options (None: it takes none); ``service``: stopping it by a signal is its normal end (a server)."""

    name: str
    help: str
    examples: tuple[str, ...]
    run: Callable[[argparse.Namespace], int] | None
    options: Callable[[argparse.ArgumentParser], None] | None = None
    service: bool = False


#: every subcommand, in the order ``cgym --help`` lists them
COMMANDS: tuple[Command, ...] = (
    Command("envs", "list environment ids (one per protocol)", ("cgym envs",), commands.cmd_envs),
    Command("protocols", "list protocols with their env ids and settings (defaults, bounds and choices shown)",
            ("cgym protocols",), commands.cmd_protocols),
    Command("pools", "list pool presets (members, helpers, what each models), pool-file backends and "
            "adversaries", ("cgym pools",), commands.cmd_pools),
    Command("estimators", "list the estimators (--estimator) and MC Shapley's samplers (--sampler)",
            ("cgym estimators",), commands.cmd_estimators),
    Command("run", "run a protocol's episodes with a pool and print the system score",
            ("cgym run coalition_gym/Debate-v0 --episodes 200 --members atlas,delta --set rounds=2 "
             "--out runs/debate",
             "cgym run coalition_gym/MajorityVote-v0 --pool pool.yaml --task gsm8k --episodes 50"),
            commands.cmd_run, _run_options),
    Command("serve", "serve an environment's policy seat as an OpenEnv server: one session per client, the "
            "frozen members inside, the system's score as reward",
            ("cgym serve coalition_gym/Debate-v0 --pool zoo:default --task zoo:arith --port 8123",
             "cgym serve coalition_gym/MajorityVote-v0 --pool sim:demo --task zoo:arith --idle-timeout 60",
             "cgym serve coalition_gym/Debate-v0 --host 0.0.0.0 --port 8123",
             "cgym serve coalition_gym/Debate-v0 --pool zoo:default --openenv-files envs/debate"),
            commands.cmd_serve, _serve_options, service=True),
    Command("eval", "leaderboard: solo vs compositional strength of a pool's models",
            ("cgym eval", "cgym eval --pool sim:demo --protocol llm_blender --task rg/gsm_symbolic "
             "--estimator all --items 300 --out runs/blender --cache runs/cache",
             "cgym eval --pool zoo:default --protocol majority_vote --estimator loo --items 100",
             "cgym eval --pool sim:demo --protocol majority_vote --estimator interactions --best-team 2",
             "cgym eval --pool zoo:default --protocol sparta --task zoo:arith --estimator loo --items 100 "
             "--cache runs/cache --save-trained runs/sparta_pool"),
            commands.cmd_eval, _eval_options),
    Command("sweep", "pools x protocols x tasks, with the cross-setting significance summary",
            ("cgym sweep --pools sim:demo,sim:independent --protocols debate,majority_vote "
             "--tasks rg/basic_arithmetic,rg/chain_sum --items 100 --out runs/sweep",
             "cgym sweep --pools sim:demo,sim:independent --protocols debate,majority_vote "
             "--tasks rg/basic_arithmetic --estimator loo --items 50 --gain tokens --out runs/sweep_gain"),
            commands.cmd_sweep, _sweep_options),
    Command("robustness", "how much one adversarial member drags each protocol: honest vs adversarial seat, "
            "drag and rescue with CIs",
            ("cgym robustness --protocols debate,majority_vote,llm_blender --adversary confidently_wrong "
             "--items 200 --out runs/robust",
             "cgym robustness --pool sim:demo --adversary colluders --seat delta --out runs/colluders",
             "cgym robustness --task zoo:arith --adversary runs/adv/crl-seed0 --out runs/trained"),
            commands.cmd_robustness, _robustness_options),
    Command("gain", "would the same spend on the best model alone do better? each protocol's score and cost "
            "against cost-matched baselines (best single member, its self-consistency@k, the pool's majority "
            "vote), with the gain's paired bootstrap CI and a Pareto plot",
            ("cgym gain --pool sim:demo --task rg/basic_arithmetic --items 200",
             "cgym gain --pool sim:independent --protocols debate,majority_vote --unit calls --out runs/gain"),
            commands.cmd_gain, _gain_options),
    Command("compare", "one table (and HTML page) across `cgym eval` output folders",
            ("cgym compare runs/debate runs/blender --out runs/compare",), commands.cmd_compare,
            _compare_options),
    Command("train", "train a policy to collaborate: C-RL and its baselines",
            ("cgym train --method crl,grpo-indiv --preset tiny --policy zoo:default/polymath "
             "--protocol majority_vote --task zoo:reverse --collaborators sim:split --steps 300",
             "cgym train --method base --preset tiny --policy zoo:tiny/pico --task zoo:arith --steps 1",
             "cgym train --method crl --reward negate --preset tiny --policy zoo:tiny/pico --task zoo:arith "
             "--protocol majority_vote --steps 50 --out runs/adversary",
             "cgym train --policy zoo:default/abacus --policy zoo:default/quill --protocol majority_vote "
             "--task mix:zoo:arith,zoo:reverse --collaborators sim:calculators --set credit=loo --steps 100"),
            commands.cmd_train, _train_options),
    Command("zoo", "the tiny offline transformers zoo: build it, list recipes",
            ("cgym zoo list", "cgym zoo build --recipe tiny"), None, _zoo_options),
    Command("tasks", "list task families and tasks: category, size, data source",
            ("cgym tasks", "cgym tasks --all"), commands.cmd_tasks, _tasks_options),
    Command("demo", "solo vs compositional strength on the demo pool, all protocols",
            ("cgym demo", "cgym demo --items 300 --out runs/demo --overwrite"), commands.cmd_demo, _demo_options),
)


def _subcommand(sub: Any, name: str, help: str, *examples: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".",
                          epilog=_examples(*examples) if examples else None, formatter_class=_Formatter)


def _add_command(sub: Any, command: Command) -> None:
    p = _subcommand(sub, command.name, command.help, *command.examples)
    if command.options is not None:
        command.options(p)
    if command.run is not None:  # zoo's own subcommands carry the function
        p.set_defaults(func=command.run, **({"service": True} if command.service else {}))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cgym", formatter_class=_Formatter,
        description="Measure and train multi-LLM collaboration: collaboration protocols as environments, "
                    "compositional strength (Shapley, LOO, Banzhaf) of each model, and C-RL training.",
        epilog=_examples("cgym demo", "cgym eval --pool sim:demo --protocol debate --items 200",
                         "cgym run coalition_gym/Debate-v0 --episodes 50 --set rounds=2",
                         "cgym --import my_protocols.py eval --protocol chain --items 100",
                         "cgym <command> --help   (every option, default and an example)"))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="import a module (dotted name or .py file) that registers your own protocols, tasks, "
                             "backends, training methods or adversaries; repeatable, before the command. "
                             "Installed packages can do the same through the coalition_gym.plugins entry point")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        _add_command(sub, command)
    return parser
