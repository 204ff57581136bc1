"""The ``cgym`` command line: every subcommand, option, default and example."""

from __future__ import annotations

import argparse
import dataclasses
import math
import typing
from typing import Any, Sequence

from ..errors import close_names, did_you_mean
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


def _option(p: argparse.ArgumentParser, flag: str, options: type, name: str, help: str | None = None) -> None:
    """``flag`` for the field ``name`` of an options dataclass: its default, bounds, choices and doc come from
    the field (declared once, with ``settings_check.setting``), so the command line and the library agree."""
    field = next(f for f in dataclasses.fields(options) if f.name == name)
    bounds, kind = bounds_of(field), typing.get_type_hints(options)[name]
    text = help or (bounds.doc if bounds is not None else "")
    if bounds is not None and bounds.choices is not None:
        _choice(p, flag, name, [str(c) for c in bounds.choices], field.default, text)
        return
    number = int if kind is int else float if kind is float else None
    if number is None:
        p.add_argument(flag, default=field.default, help=text)
        return
    low = None if bounds is None else bounds.ge if bounds.ge is not None else bounds.gt
    strict = bounds is not None and bounds.gt is not None
    parse = number if low is None else _number_at_least(low, number, strict=strict)
    if bounds is not None and bounds.le is not None:
        parse = _at_most(parse, bounds.le)
    p.add_argument(flag, type=parse, default=field.default, help=text)


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


def _subcommand(sub: Any, name: str, help: str, *examples: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".",
                          epilog=_examples(*examples) if examples else None, formatter_class=_Formatter)


def _paired_run_options(p: argparse.ArgumentParser, options: type, out: str, files: str) -> None:
    """--seed, --bootstrap, --out and --cache of a command that compares systems on paired items (robustness, gain)."""
    _option(p, "--seed", options, "seed")
    _option(p, "--bootstrap", options, "n_boot")
    p.add_argument("--out", default=out, help=f"folder for {files}, results.jsonl and run.json")
    p.add_argument("--cache", default=None, help="folder for the persistent generation cache: an interrupted run "
                                                 "resumes from it (default: no cache)")


def _output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--overwrite", action="store_true", help="replace the results in a non-empty --out")
    p.add_argument("--no-text", action="store_true",
                   help="keep extracted answers but not reply texts in the per-episode results file")


def _max_failures_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-failures", type=FailureLimit.parse, default="default", metavar="N|P%",
                   help="exit 3 when more episodes failed than this count or percentage (default: any "
                        "coalition whose every episode failed, or more than 10%%); failed episodes score 0")


def _pool_option(p: argparse.ArgumentParser, name: str = "--pool", default: str | None = "sim:demo") -> None:
    p.add_argument(name, default=default, metavar="POOL",
                   help="pool preset (see `cgym pools`) or a YAML/JSON pool file")


def _task_options(p: argparse.ArgumentParser, split: bool = True) -> None:
    p.add_argument("--task", default="rg/basic_arithmetic", help="task name (see `cgym tasks`)")
    p.add_argument("--task-seed", type=int, default=0, help="seed of procedurally generated tasks")
    if split:
        _choice(p, "--split", "split", ["test", "dev", "train"], "test",
            "split the items come from")


def _protocol_settings(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a protocol setting, repeatable (see `cgym protocols`), e.g. --set rounds=2")


def build_parser() -> argparse.ArgumentParser:
    from ..reports.episodes import EpisodeRunOptions
    from ..reports.gain import GainOptions
    from ..reports.leaderboard import EvalOptions
    from ..reports.robustness import RobustnessOptions
    from ..reports.sweep import SweepOptions

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

    p = _subcommand(sub, "envs", "list environment ids (one per protocol)", "cgym envs")
    p.set_defaults(func=commands.cmd_envs)

    p = _subcommand(sub, "protocols", "list protocols with their env ids and settings (defaults, bounds and "
                    "choices shown)", "cgym protocols")
    p.set_defaults(func=commands.cmd_protocols)

    p = _subcommand(sub, "pools", "list pool presets (members, helpers, what each models), pool-file backends and "
                    "adversaries", "cgym pools")
    p.set_defaults(func=commands.cmd_pools)

    p = _subcommand(sub, "estimators", "list the estimators (--estimator) and MC Shapley's samplers (--sampler)",
                    "cgym estimators")
    p.set_defaults(func=commands.cmd_estimators)

    p = _subcommand(sub, "run", "run a protocol's episodes with a pool and print the system score",
                    "cgym run coalition_gym/Debate-v0 --episodes 200 --members atlas,delta --set rounds=2 "
                    "--out runs/debate",
                    "cgym run coalition_gym/MajorityVote-v0 --pool pool.yaml --task gsm8k --episodes 50")
    p.add_argument("env_id", help="environment id, e.g. coalition_gym/Debate-v0 (see `cgym envs`)")
    _option(p, "--episodes", EpisodeRunOptions, "episodes")
    _task_options(p)
    p.add_argument("--size", type=_number_at_least(1), default=None, help="items per split (default: --episodes)")
    _pool_option(p)
    p.add_argument("--members", default=None, help="comma-separated coalition (default: the whole pool)")
    _option(p, "--seed", EpisodeRunOptions, "seed")
    _protocol_settings(p)
    _option(p, "--bootstrap", EpisodeRunOptions, "n_boot")
    p.add_argument("--out", default=None, help="folder for episodes.jsonl, summary.json and run.json "
                                               "(default: print only)")
    _output_options(p)
    _max_failures_option(p)
    p.set_defaults(func=commands.cmd_run)

    p = _subcommand(sub, "serve", "serve an environment's policy seat as an OpenEnv server: one session per "
                    "client, the frozen members inside, the system's score as reward",
                    "cgym serve coalition_gym/Debate-v0 --pool zoo:default --task zoo:arith --port 8123",
                    "cgym serve coalition_gym/MajorityVote-v0 --pool sim:demo --task zoo:arith --idle-timeout 60",
                    "cgym serve coalition_gym/Debate-v0 --host 0.0.0.0 --port 8123",
                    "cgym serve coalition_gym/Debate-v0 --pool zoo:default --openenv-files envs/debate")
    from ..integrations.serve_options import ServeOptions

    p.add_argument("env_id", help="environment id, e.g. coalition_gym/Debate-v0 (see `cgym envs`)")
    _pool_option(p)
    _task_options(p, split=False)
    _choice(p, "--split", "split", ["train", "dev", "test"], "train", "split the episodes' items come from")
    p.add_argument("--size", type=_number_at_least(1), default=None, help="items per split (default: the task's)")
    p.add_argument("--members", default=None, help="comma-separated frozen members (default: the whole pool)")
    _protocol_settings(p)
    _option(p, "--host", ServeOptions, "host")
    _option(p, "--port", ServeOptions, "port")
    p.add_argument("--token", default=None, help="bearer token every client must send (default: "
                                                 "$CGYM_SERVE_TOKEN, better: a command line shows in `ps`; "
                                                 "required on a non-local --host)")
    _option(p, "--max-sessions", ServeOptions, "max_sessions")
    _option(p, "--idle-timeout", ServeOptions, "idle_timeout_s")
    _option(p, "--policy-style", ServeOptions, "policy_style")
    _option(p, "--report-every", ServeOptions, "report_every_s")
    _option(p, "--batch-wait-ms", ServeOptions, "batch_wait_ms")
    _option(p, "--model-process", ServeOptions, "model_process")
    p.add_argument("--openenv-files", default=None, metavar="DIR",
                   help="write OpenEnv's files for this server (openenv.yaml, pyproject.toml, uv.lock, "
                        "server/app.py, server/Dockerfile) to DIR and exit; files there that it did not write "
                        "are kept (refused) unless --overwrite")
    p.add_argument("--overwrite", action="store_true",
                   help="with --openenv-files: replace files in DIR that cgym serve did not write")
    p.set_defaults(func=commands.cmd_serve, service=True)  # stopping it by a signal is its normal end

    p = _subcommand(sub, "eval", "leaderboard: solo vs compositional strength of a pool's models",
                    "cgym eval", "cgym eval --pool sim:demo --protocol llm_blender --task rg/gsm_symbolic "
                    "--estimator all --items 300 --out runs/blender --cache runs/cache",
                    "cgym eval --pool zoo:default --protocol majority_vote --estimator loo --items 100",
                    "cgym eval --pool sim:demo --protocol majority_vote --estimator interactions --best-team 2",
                    "cgym eval --pool zoo:default --protocol sparta --task zoo:arith --estimator loo --items 100 "
                    "--cache runs/cache --save-trained runs/sparta_pool")
    _pool_option(p)
    p.add_argument("--protocol", default="debate", help="protocol name (see `cgym protocols`)")
    _task_options(p)
    p.add_argument("--estimator", default="all",
                   help="loo, shapley, banzhaf, mc, a registered one (see `cgym estimators`), auto (exact Shapley "
                        "when it is cheap in generations, else mc), a comma-separated list, or all")
    p.add_argument("--items", type=_number_at_least(1), default=200, help="items to evaluate on")
    p.add_argument("--members", default=None, help="comma-separated subset of the pool (default: every member)")
    _protocol_settings(p)
    p.add_argument("--out", default="runs/eval", help="folder for the leaderboard files")
    p.add_argument("--cache", default=None, help="folder for the persistent generation cache (and, for sparta and "
                                                 "multiagent_finetuning, the trained checkpoints): a killed run "
                                                 "resumes from it (default: no cache)")
    p.add_argument("--save-trained", default=None, metavar="DIR",
                   help="sparta / multiagent_finetuning: save the full coalition's trained members in DIR with a "
                        "pool.yaml (use it as --pool DIR/pool.yaml)")
    p.add_argument("--seed", type=int, default=0, help="episode, bootstrap and permutation seed")
    _option(p, "--bootstrap", EvalOptions, "n_boot")
    _option(p, "--exact-limit", EvalOptions, "exact_limit",
            help="the most members exact Shapley, Banzhaf and interactions enumerate all 2^n coalitions for "
                 "(default 12; above it they are refused, or sampled); the number of coalitions is said first")
    p.add_argument("--best-team", type=_number_at_least(1), default=None, metavar="K",
                   help="also report the coalition of K members with the highest value among those evaluated "
                        "(exact when all are), next to the K members with the highest Shapley values")
    p.add_argument("--mc-tolerance", type=_number_at_least(0.0, float, strict=True), default=0.005,
                   help="MC Shapley: stop when every value's permutation stderr is below this")
    p.add_argument("--mc-budget", type=_number_at_least(1), default=None,
                   help="MC Shapley: at most this many distinct coalitions (default: 25n above 12 members, unless "
                        "--mc-budget-generations is given)")
    p.add_argument("--mc-budget-generations", type=_number_at_least(1), default=None,
                   help="MC Shapley: stop after this many backend generations (default: no cap); also what "
                        "--estimator auto weighs exact Shapley against")
    p.add_argument("--sampler", default="auto", metavar="NAME",
                   help="MC Shapley's sampler: auto (the most accurate measured: proxy), proxy, hybrid, kernel, "
                        "stratified, permutation, or a registered one (see `cgym estimators`)")
    _choice(p, "--executor", "executor", ["local", "ray"], "local",
            "where coalition executions run (ray: pip install 'coalition-gym[ray]')")
    p.add_argument("--address", default=None, help="Ray head host:port or 'auto' (default: start a local Ray)")
    p.add_argument("--num-cpus", type=_number_at_least(1), default=None,
                   help="CPUs of a locally started Ray (default: all)")
    _output_options(p)
    _max_failures_option(p)
    p.set_defaults(func=commands.cmd_eval)

    p = _subcommand(sub, "sweep", "pools x protocols x tasks, with the cross-setting significance summary",
                    "cgym sweep --pools sim:demo,sim:independent --protocols debate,majority_vote "
                    "--tasks rg/basic_arithmetic,rg/chain_sum --items 100 --out runs/sweep",
                    "cgym sweep --pools sim:demo,sim:independent --protocols debate,majority_vote "
                    "--tasks rg/basic_arithmetic --estimator loo --items 50 --gain tokens --out runs/sweep_gain")
    p.add_argument("--pools", default="sim:demo,sim:independent", help="comma-separated pools (see `cgym pools`)")
    p.add_argument("--protocols", default="debate,llm_blender,slm_mux,majority_vote",
                   help="comma-separated protocols")
    p.add_argument("--tasks", default="rg/basic_arithmetic,rg/gsm_symbolic", help="comma-separated tasks")
    p.add_argument("--estimator", default="loo", help="loo, shapley, banzhaf, mc, a comma-separated list, or all")
    p.add_argument("--items", type=_number_at_least(1), default=100, help="items per task")
    _option(p, "--alpha", SweepOptions, "alpha")
    _choice(p, "--gain", "cost unit", ["tokens", "calls"], None,
            "also each protocol's gain over cost-matched baselines per pool x task (see `cgym gain`), cost in "
            "this unit; the summary gives per protocol the share of settings where it beats the best baseline "
            "with the CI above 0 (default: off)")
    p.add_argument("--out", default="runs/sweep", help="folder for sweep_summary.json, sweep.md and one "
                                                       "leaderboard folder per setting")
    p.add_argument("--cache", default=None, help="folder for the generation caches (default: none)")
    _option(p, "--seed", SweepOptions, "seed")
    _output_options(p)
    _max_failures_option(p)
    p.set_defaults(func=commands.cmd_sweep)

    p = _subcommand(sub, "robustness", "how much one adversarial member drags each protocol: honest vs adversarial "
                    "seat, drag and rescue with CIs",
                    "cgym robustness --protocols debate,majority_vote,llm_blender --adversary confidently_wrong "
                    "--items 200 --out runs/robust",
                    "cgym robustness --pool sim:demo --adversary colluders --seat delta --out runs/colluders",
                    "cgym robustness --task zoo:arith --adversary runs/adv/crl-seed0/best --out runs/trained")
    _pool_option(p)
    p.add_argument("--protocols", default="debate,llm_blender,slm_mux,majority_vote",
                   help="comma-separated protocols (see `cgym protocols`)")
    _task_options(p)
    p.add_argument("--adversary", required=True, metavar="PROFILE|PATH",
                   help="an adversary profile (confidently_wrong, persuader, colluders, format_breaker, "
                        "judge_targeting) or an HF model folder, e.g. a `cgym train --reward negate` checkpoint")
    p.add_argument("--seat", default=None, metavar="NAME",
                   help="the member the adversary replaces (default: the coalition's first member); colluders "
                        "also take the next member's seat")
    p.add_argument("--members", default=None, help="comma-separated coalition (default: the whole pool)")
    p.add_argument("--items", type=_number_at_least(1), default=200, help="items to evaluate on")
    _protocol_settings(p)
    _paired_run_options(p, RobustnessOptions, "runs/robustness", "robustness.json/.md/.csv/.png/.html")
    _output_options(p)
    _max_failures_option(p)
    p.set_defaults(func=commands.cmd_robustness)

    p = _subcommand(sub, "gain", "would the same spend on the best model alone do better? each protocol's score "
                    "and cost against cost-matched baselines (best single member, its self-consistency@k, the "
                    "pool's majority vote), with the gain's paired bootstrap CI and a Pareto plot",
                    "cgym gain --pool sim:demo --task rg/basic_arithmetic --items 200",
                    "cgym gain --pool sim:independent --protocols debate,majority_vote --unit calls --out runs/gain")
    _pool_option(p)
    p.add_argument("--protocols", default="debate,majority_vote,llm_blender,slm_mux",
                   help="comma-separated protocols (see `cgym protocols`)")
    _task_options(p)
    p.add_argument("--members", default=None, help="comma-separated coalition (default: the whole pool)")
    p.add_argument("--items", type=_number_at_least(10), default=200,
                   help="items to evaluate on (at least 10: the gain's CI is a paired bootstrap over items)")
    _option(p, "--unit", GainOptions, "unit")
    _option(p, "--max-k", GainOptions, "max_k")
    _protocol_settings(p)
    _paired_run_options(p, GainOptions, "runs/gain", "gain.json/.md/.csv/.html, pareto.png")
    _output_options(p)
    _max_failures_option(p)
    p.set_defaults(func=commands.cmd_gain)

    p = _subcommand(sub, "compare", "one table (and HTML page) across `cgym eval` output folders",
                    "cgym compare runs/debate runs/blender --out runs/compare")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="folders written by `cgym eval --out`")
    p.add_argument("--out", default=None, help="folder for compare.md, compare.html and compare.json "
                                               "(default: print only)")
    p.add_argument("--overwrite", action="store_true", help="replace the results in a non-empty --out")
    p.set_defaults(func=commands.cmd_compare)

    p = _subcommand(sub, "train", "train a policy to collaborate: C-RL and its baselines",
                    "cgym train --method crl,grpo-indiv --preset tiny --policy zoo:default/polymath "
                    "--protocol majority_vote --task zoo:reverse --collaborators sim:split --steps 300",
                    "cgym train --method base --preset tiny --policy zoo:tiny/pico --task zoo:arith --steps 1",
                    "cgym train --method crl --reward negate --preset tiny --policy zoo:tiny/pico --task zoo:arith "
                    "--protocol majority_vote --steps 50 --out runs/adversary",
                    "cgym train --policy zoo:default/abacus --policy zoo:default/quill --protocol majority_vote "
                    "--task mix:zoo:arith,zoo:reverse --collaborators sim:calculators --set credit=loo --steps 100")
    from ..training.recipes import recipe_names

    p.add_argument("--method", default="crl", help=f"{', '.join(recipe_names('policy'))} (the policy-training "
                                                   "recipes), or a comma-separated list")
    p.add_argument("--protocol", default=None, help="protocol the policy collaborates in (default: slm_mux "
                                                    "with tie_break=random)")
    p.add_argument("--task", default=None, help="training task (default: mix:zoo:arith,zoo:reverse)")
    p.add_argument("--policy", action="append", default=None,
                   help="HF model folder or zoo:<recipe>/<member> (default: zoo:default/quill, shipped with the "
                        "package, at lr 1e-4); give it K >= 2 times to train a team, one seat per policy "
                        "(team-crl: --set credit=system|loo|shapley, --set seats=[a,b])")
    _pool_option(p, "--collaborators", None)
    p.add_argument("--force", action="store_true", help="train even when the pre-training probe finds no "
                                                       "informative group (no learning signal)")
    p.add_argument("--members", default=None, help="comma-separated subset of the collaborators' pool "
                                                   "(default: all)")
    p.add_argument("--steps", type=_number_at_least(1), default=None, help="training steps (default: the preset's)")
    p.add_argument("--seed", type=int, default=None, help="run seed (default: the preset's, 0)")
    _choice(p, "--preset", "preset", ["auto", "paper", "tiny"], "auto",
            "paper (lr 1e-6, 8x8 executions), tiny (zoo models on CPU), or auto (default): tiny "
            "for a zoo policy, paper for any other")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="any TrainConfig field, or protocol.<setting>, repeatable")
    _choice(p, "--reward", "reward", ["system", "negate"], None,
            "RL methods' reward: system (default) or negate, the reward with its sign flipped and "
            "the lowest dev score kept: trains an adversary for `cgym robustness --adversary "
            "<out>/crl-seed0/best`")
    from ..training.config import RunSettings

    _option(p, "--report-to", RunSettings, "report_to")
    _choice(p, "--executor", "executor", ["local", "ray"], "local",
            "where rollouts are collected")
    p.add_argument("--address", default=None, help="Ray head host:port or 'auto' (default: a local Ray)")
    p.add_argument("--out", default="runs/train", help="root folder: one resumable run folder per method and seed")
    p.add_argument("--overwrite", action="store_true",
                   help="start over a run folder that holds a run with another configuration (default: refuse it; "
                        "the same configuration resumes)")
    p.add_argument("--export", default=None, metavar="DIR",
                   help="write DIR/pool.yaml: the trained policy beside its collaborators, and the cgym eval "
                        "command that replays the trainer's test scores (one subfolder per method when several)")
    _max_failures_option(p)
    p.set_defaults(func=commands.cmd_train)

    p = _subcommand(sub, "zoo", "the tiny offline transformers zoo: build it, list recipes",
                    "cgym zoo list", "cgym zoo build --recipe tiny")
    zsub = p.add_subparsers(dest="zoo_command", required=True, metavar="ZOO_COMMAND")
    z = _subcommand(zsub, "build", "train and evaluate a zoo recipe (prints each model's accuracy)",
                    "cgym zoo build", "cgym zoo build --recipe tiny --force")
    z.add_argument("--recipe", default="default", help="recipe name (see `cgym zoo list`)")
    z.add_argument("--out", default=None, help="cache root (default: $COALITION_GYM_HOME/zoo or "
                                               "~/.cache/coalition_gym/zoo)")
    z.add_argument("--force", action="store_true", help="rebuild even if a build exists")
    z.set_defaults(func=commands.cmd_zoo)
    z = _subcommand(zsub, "list", "recipes, their models and whether they are built", "cgym zoo list")
    z.add_argument("--out", default=None, help="cache root (default: as for build)")
    z.set_defaults(func=commands.cmd_zoo)
    z = _subcommand(zsub, "verify", "compare a local build with the shipped models: fingerprints and accuracies",
                    "cgym zoo verify", "cgym zoo verify --recipe tiny --rebuild")
    z.add_argument("--recipe", default="default", help="a recipe the package ships (default, tiny)")
    z.add_argument("--out", default=None, help="cache root of the local build (default: as for build)")
    z.add_argument("--rebuild", action="store_true", help="rebuild locally first, even if a local build exists")
    z.set_defaults(func=commands.cmd_zoo)

    p = _subcommand(sub, "tasks", "list task families and tasks: category, size, data source",
                    "cgym tasks", "cgym tasks --all")
    p.add_argument("--all", action="store_true", help="one line per reasoning-gym generator")
    p.set_defaults(func=commands.cmd_tasks)

    p = _subcommand(sub, "demo", "solo vs compositional strength on the demo pool, all protocols",
                    "cgym demo", "cgym demo --items 300 --out runs/demo --overwrite")
    _pool_option(p)
    p.add_argument("--task", default="rg/basic_arithmetic", help="task name (see `cgym tasks`)")
    p.add_argument("--items", type=_number_at_least(1), default=1000, help="items per protocol")
    p.add_argument("--seed", type=int, default=0, help="episode and bootstrap seed")
    p.add_argument("--out", default="runs/demo", help="folder for summary.json, strength.md and a leaderboard "
                                                      "folder per protocol")
    p.add_argument("--overwrite", action="store_true", help="replace the results in a non-empty --out")
    p.set_defaults(func=commands.cmd_demo)
    return parser
