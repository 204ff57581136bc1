"""``make demo``: solo strength vs leave-one-out and exact Shapley contribution on the simulated demo
pool for every protocol (with leaderboard files), then a policy seated in each env via ``gym.make``."""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean

import gymnasium as gym

from ..agents.pools import DEFAULT_POOL, load_pool
from ..envs.protocols import PROTOCOLS
from ..envs.registration import ENV_IDS
from ..envs.system import System, SystemSpec
from ..result_files import write_json, write_text
from ..settings_check import check_settings, setting
from ..tasks import DEFAULT_TASK
from ..tasks import make as make_task
from ..valuation.game import CoalitionGame
from ..valuation.stats import signed, signed_ci
from .leaderboard import EvalReport, evaluate, summary, write_report

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    raise ValueError("not plain arithmetic")


def calculator_policy(observation: str) -> str:
    """A strong soloist on basic arithmetic: it evaluates the question's expression (with ``ast``,
    never ``eval``) and ignores what its peers say."""
    match = re.search(r"^Calculate (.+?)\.?\s*$", observation, re.MULTILINE)
    try:
        value = _evaluate(ast.parse(match.group(1), mode="eval").body) if match else None
    except (ValueError, SyntaxError, ZeroDivisionError):
        value = None
    if value is None:
        return "I cannot compute this one."
    text = str(int(value)) if float(value).is_integer() else f"{value:.6g}"
    return f"Evaluating the expression directly gives {text}.\nAnswer: {text}"


def _table(report: EvalReport) -> list[str]:
    game, loo, shap = report.game, report.results["loo"], report.results["shapley"]
    best_solo = max(game.players, key=lambda p: report.solo[p])
    best_shap = max(game.players, key=lambda p: shap[p])
    lines = [f"### {game.protocol.name}: v(N) = {game.value(game.players):.3f}", "",
             "| member | solo v({i}) | leave-one-out | Shapley [95% CI] |", "|---|---|---|---|"]
    for k, p in enumerate(game.players):
        marks = (" (best solo)" if p == best_solo else "") + (" (largest Shapley)" if p == best_shap else "")
        lines.append(f"| {p}{marks} | {report.solo[p]:.3f} | {signed(loo[p])} | "
                     f"{signed(shap[p])} {signed_ci((shap.ci_low[k], shap.ci_high[k]))} |")
    return lines


@dataclass(frozen=True)
class DemoOptions:
    """What ``cgym demo`` runs: the ``pool`` and ``task``, ``items`` per protocol, the ``seed``, the ``out``
    folder and the episodes of the seated policy per environment (``gym_episodes``)."""

    pool: str = DEFAULT_POOL
    task: str = DEFAULT_TASK
    items: int = setting(1000, ge=1, doc="items per protocol")
    seed: int = setting(0, ge=0, doc="episode and bootstrap seed")
    out: str = "runs/demo"
    gym_episodes: int = setting(60, ge=1, doc="episodes of the seated policy per environment")

    def __post_init__(self) -> None:
        check_settings(self, "demo options")


def run_demo(options: DemoOptions = DemoOptions()) -> dict:
    """Every protocol's leaderboard on the demo pool, then the calculator policy seated in every environment;
    writes summary.json, strength.md and a leaderboard folder per protocol under ``options.out``."""
    seed, out, gym_episodes = options.seed, Path(options.out), options.gym_episodes
    pool = load_pool(options.pool)
    task = make_task(options.task, size=options.items)
    items = task.items("test")
    print(f"Pool {pool.name}: members {pool.member_names}, fixed helpers {list(pool.helpers)}; "
          f"task {task.name}, {len(items)} items, seed {seed}\n")
    summaries = []
    markdown: list[str] = []
    for name in PROTOCOLS:  # coalition training (sparta, ...) is no protocol: it needs HF members
        game = CoalitionGame(System.build(SystemSpec(name, task, pool, split="test")), seed=seed, progress=True)
        report = evaluate(game, ["loo", "shapley"])
        write_report(report, out / name)
        summaries.append(summary(report))
        lines = _table(report)
        markdown += lines + [""]
        print("\n".join(lines) + "\n")

    print("A policy seated through gym.make (a calculator policy that evaluates the expression itself), "
          f"{gym_episodes} episodes:\n")
    seated = []
    for env_id in ENV_IDS:
        env = gym.make(env_id, task=task, collaborators=pool, split="test")  # an evaluation: the test split
        rewards, own = [], []
        for episode in range(gym_episodes):
            obs, info = env.reset(seed=seed + episode)
            asked, done = info["policy_asked"], False
            while not done:
                obs, reward, done, truncated, info = env.step(calculator_policy(obs))
            rewards.append(reward)
            if asked:  # routing and cascades do not always ask the policy
                own.append(info["policy_score"])
        env.close()
        own_score = fmean(own) if own else None  # never asked: the policy gave no answer to score
        seated.append({"env_id": env_id, "policy_asked": len(own) / gym_episodes, "policy_score": own_score,
                       "system_reward": fmean(rewards)})
        shown = f"{own_score:.2f}" if own_score is not None else "  - "
        print(f"  {env_id:<38} asked in {len(own) / gym_episodes:4.0%}   policy's own answers {shown}   "
              f"system with policy {fmean(rewards):.2f}")

    out.mkdir(parents=True, exist_ok=True)
    result = {"pool": pool.name, "task": task.name, "n_items": len(items), "seed": seed,
              "protocols": summaries, "seated_policy": seated}
    write_json(out / "summary.json", result)
    write_text(out / "strength.md", "\n".join(markdown))
    print(f"\nWrote {out / 'summary.json'}, {out / 'strength.md'} and a leaderboard folder per protocol "
          f"({out}/<protocol>/leaderboard.md, solo_vs_compositional.png ...)")
    return result
