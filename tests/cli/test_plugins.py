"""A user's own parts reach every ``cgym`` subcommand: ``--import MODULE`` and the
``coalition_gym.plugins`` entry point, run as a user runs them (the console script, a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CGYM = Path(sys.executable).with_name("cgym")

#: a protocol and a task defined outside the package; the task's constructor takes no seed
USER_MODULE = '''
from dataclasses import dataclass
from typing import ClassVar

from coalition_gym import Item, Outcome, Protocol, Task, register_protocol, register_task
from coalition_gym.envs.protocols.base import answer_turns


@dataclass
class Chain(Protocol):
    """Each member answers in turn; the last answer is the system's."""
    name: ClassVar[str] = "chain"
    description: ClassVar[str] = "members answer one after another; the last answer counts"

    def program(self, ctx):
        answer, turns = None, []
        for k, member in enumerate(ctx.members):
            asks = [ctx.ask(member, ctx.question(member), self.params, round_=k)]
            replies = yield asks
            turns += answer_turns(ctx, asks, replies)
        return Outcome(answer=turns[-1].answer, text=turns[-1].text, transcript=tuple(turns))


class Parity(Task):
    name = "parity"

    def __init__(self, size: int = 30):
        self.size = size

    def items(self, split="test"):
        self.check_split(split)
        start = {"test": 0, "dev": 1000, "train": 2000}[split]
        return [Item(id=f"parity/{split}/{k}", question=f"Calculate {n} + {n % 7}.", gold=str(n + n % 7))
                for k, n in enumerate(range(start, start + self.size))]

    answer_kind = "exact"


register_protocol(Chain)
register_task("parity", Parity)
'''


def cgym(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 300):
    assert CGYM.is_file(), f"the console script {CGYM} is not installed"
    return subprocess.run([str(CGYM), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def user_package(tmp_path):
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "protocols.py").write_text(USER_MODULE)
    return tmp_path


def test_import_brings_a_users_protocol_and_task_to_eval(user_package):
    proc = cgym(["--import", "mypkg.protocols", "eval", "--protocol", "chain", "--task", "parity", "--items", "12",
                 "--estimator", "loo", "--bootstrap", "50", "--out", "out"], cwd=user_package)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "chain on parity (12 items)" in proc.stdout
    summary = json.loads((user_package / "out" / "summary.json").read_text())
    assert summary["run"]["arguments"]["protocol"] == "chain"


def test_without_the_import_the_protocol_is_unknown(user_package):
    proc = cgym(["eval", "--protocol", "chain", "--items", "5"], cwd=user_package)
    assert proc.returncode == 2 and "unknown protocol 'chain'" in proc.stderr


def _install_entry_point(site: Path, target: str, name: str = "mine") -> None:
    dist = site / "mypkg_plugin-0.1.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mypkg-plugin\nVersion: 0.1\n")
    with open(dist / "entry_points.txt", "a") as f:
        f.write(f"[coalition_gym.plugins]\n{name} = {target}\n")


def test_an_installed_entry_point_registers_parts_for_every_subcommand(user_package):
    _install_entry_point(user_package, "mypkg.protocols")
    env = {"PYTHONPATH": str(user_package)}
    proc = cgym(["run", "coalition_gym/Chain-v0", "--task", "parity", "--episodes", "6"], cwd=user_package, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "coalition_gym/Chain-v0 on parity" in proc.stdout
    listed = cgym(["protocols"], cwd=user_package, env=env)
    assert "chain  (coalition_gym/Chain-v0)" in listed.stdout


def test_a_broken_entry_point_is_named_and_skipped(user_package):
    (user_package / "mypkg" / "broken.py").write_text("raise RuntimeError('half-installed')\n")
    _install_entry_point(user_package, "mypkg.broken", name="broken")
    proc = cgym(["envs"], cwd=user_package, env={"PYTHONPATH": str(user_package)})
    assert proc.returncode == 0
    assert "plugin 'broken' (mypkg.broken) failed to load and is skipped: RuntimeError: half-installed" in proc.stderr
    assert "coalition_gym/Debate-v0" in proc.stdout


def test_a_callable_entry_point_is_called(user_package):
    (user_package / "mypkg" / "setup_hook.py").write_text(
        "def register():\n    import mypkg.protocols  # noqa: F401\n")
    _install_entry_point(user_package, "mypkg.setup_hook:register")
    proc = cgym(["protocols"], cwd=user_package, env={"PYTHONPATH": str(user_package)})
    assert proc.returncode == 0 and "chain  (coalition_gym/Chain-v0)" in proc.stdout


def test_an_imported_adversary_and_training_recipe_reach_their_commands(tmp_path):
    (tmp_path / "parts.py").write_text(textwrap.dedent('''
        from dataclasses import dataclass

        from coalition_gym import Generator, Sample, register_adversary, register_recipe
        from coalition_gym.training.builtin_recipes import train_policy_recipe
        from coalition_gym.training.config import TrainConfig
        from coalition_gym.training.strategies import Base


        class AlwaysSeven(Generator):
            identity = "test:always-seven"

            def generate(self, asks):
                return [Sample(text="Answer: 7") for _ in asks]


        @dataclass
        class UntrainedConfig(TrainConfig):
            pass


        register_adversary("always_seven", lambda seat: AlwaysSeven(), "answers 7 to everything")
        register_recipe("untrained", UntrainedConfig, train_policy_recipe, strategy=Base)
    '''))
    proc = cgym(["--import", "parts.py", "robustness", "--adversary", "always_seven", "--protocols", "majority_vote",
                 "--items", "20", "--bootstrap", "50", "--out", "robust"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((tmp_path / "robust" / "robustness.json").read_text())["adversary"] == "always_seven"
    # the recipe is known to train (a setting no recipe has is the next check it meets)
    proc = cgym(["--import", "parts.py", "train", "--method", "untrained", "--set", "nope=1"], cwd=tmp_path)
    assert proc.returncode == 2 and "no training method has a setting 'nope'" in proc.stderr, proc.stderr
    proc = cgym(["train", "--method", "untrained"], cwd=tmp_path)
    assert proc.returncode == 2 and "unknown method 'untrained'" in proc.stderr


#: every example reaches cgym with the one line its docstring shows
EXAMPLE_COMMANDS = {
    "custom_protocol.py": (["run", "coalition_gym/TwoSamplesVote-v0", "--episodes", "20"],
                           "coalition_gym/TwoSamplesVote-v0 on rg/basic_arithmetic"),
    "custom_task.py": (["eval", "--task", "vowel_count", "--protocol", "majority_vote", "--items", "20",
                       "--estimator", "loo", "--bootstrap", "50", "--out", "out"], "majority_vote on vowel_count"),
    "custom_scorer.py": (["eval", "--task", "tolerant_decimal_arithmetic", "--protocol", "majority_vote",
                          "--items", "20", "--estimator", "loo", "--bootstrap", "50", "--out", "out"],
                         "majority_vote on tolerant_decimal_arithmetic"),
    "custom_backend.py": (["eval", "--pool", "calculator_pool.yaml", "--protocol", "debate", "--items", "20",
                           "--estimator", "loo", "--bootstrap", "50", "--out", "out"], "pool calculator_pool"),
    "custom_pool.py": (["eval", "--pool", "sim:clones-3", "--protocol", "majority_vote", "--items", "20",
                        "--estimator", "loo", "--bootstrap", "50", "--out", "out"], "pool sim:clones-3"),
    "custom_estimator.py": (["eval", "--estimator", "pair_synergy,loo", "--protocol", "majority_vote", "--items", "20",
                             "--bootstrap", "50", "--out", "out"], "pair_synergy [95% CI]"),
    "custom_sampler.py": (["eval", "--pool", "sim:random-8", "--protocol", "majority_vote", "--estimator", "mc",
                           "--sampler", "single_permutation", "--mc-budget", "60", "--items", "20", "--bootstrap",
                           "50", "--out", "out"], "mc_shapley [95% CI]"),
    "custom_training_recipe.py": (["train", "--method", "terse_nudge", "--policy", "zoo:tiny/pico", "--task",
                                   "zoo:arith", "--protocol", "majority_vote", "--set", "eval_items=8", "--set",
                                   "test_items=8"], "| terse_nudge | 0 |"),
    "custom_adversary.py": (["robustness", "--adversary", "echo_last", "--protocols", "majority_vote,debate", "--pool",
                             "sim:demo", "--items", "20", "--out", "out"], "# Robustness to echo_last in seat atlas"),
}


def test_every_example_has_a_cgym_command():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXAMPLE_COMMANDS)
    for name in EXAMPLE_COMMANDS:
        assert f"cgym --import examples/{name}" in (EXAMPLES / name).read_text()


@pytest.mark.parametrize("name", sorted(EXAMPLE_COMMANDS))
def test_each_example_runs_through_cgym(name, tmp_path):
    (tmp_path / "calculator_pool.yaml").write_text(
        "members:\n  - {name: calculator, backend: calculator}\n"
        "  - {name: atlas, backend: sim, model: sim:demo/atlas}\n"
        "  - {name: delta, backend: sim, model: sim:demo/delta}\n")
    args, says = EXAMPLE_COMMANDS[name]
    proc = cgym(["--import", str(EXAMPLES / name), *args], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert says in proc.stdout, proc.stdout[-2000:]
