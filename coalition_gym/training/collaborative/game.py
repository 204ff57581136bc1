"""The coalition game of a coalition-training recipe: v(S) is what S's members answer after the recipe
trained copies of them (originals untouched). Each coalition is trained once (or read back from the
store), then the recipe's evaluation protocol runs on the trained members and the test items like any
protocol. The caller that values a trained coalition builds this game and hands it to the estimators
(``reports.leaderboard.evaluate``); ``valuation/`` knows nothing of training."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import yaml
from tqdm.auto import tqdm

from ...envs.dev_scores import DevScores, dev_scores_for
from ...envs.runner import episode_record, episode_seed, score_outcomes
from ...envs.system import System
from ...errors import ConfigError
from ...result_files import write_json, write_text
from ...valuation.game import CoalitionGame
from ..recipes import RecipeContext, get_recipe, recipe_of
from .common import CoalitionTraining
from .members import copy_member, fingerprint, frozen_reason
from .settings import CoalitionTrainingSettings, make_coalition_settings
from .store import TrainedCheckpoints


@dataclass
class TrainingCost:
    trainings: int = 0  # coalitions trained in this run
    reused: int = 0  # coalitions read back from the store (a resumed run)
    training_seconds: float = 0.0
    training_generations: int = 0  # samples generated while training (duels, judging, debates, dev scoring)

    def to_dict(self) -> dict[str, Any]:
        return {"trainings": self.trainings, "reused_trainings": self.reused,
                "training_seconds": round(self.training_seconds, 3),
                "training_generations": self.training_generations}


class TrainedCoalitionGame(CoalitionGame):
    """``recipe``: a coalition recipe's settings (``make_coalition_settings("sparta", ...)``) or its name
    (its default settings). ``system``: the pool, task, coalition and test items (its protocol is
    replaced by the recipe's evaluation protocol, which the trained members run: build it with
    ``settings.evaluation``). ``train_dir`` keeps trained coalitions across runs (resume); None trains
    in a temporary folder. Other options as :class:`CoalitionGame`'s."""

    def __init__(self, recipe: "CoalitionTrainingSettings | str", system: System, *, train_dir: Any = None,
                 **options: Any):
        settings = make_coalition_settings(recipe) if isinstance(recipe, str) else recipe
        owner = recipe_of(settings)
        if owner is None or owner.kind != "coalition":
            raise ConfigError(f"TrainedCoalitionGame needs a coalition-training recipe's settings, got {recipe!r}")
        self.recipe, self.settings = get_recipe(owner.name, "coalition"), settings
        name = self.recipe.name
        if system.protocol is not settings.evaluation:
            system = system.with_protocol(settings.evaluation)
        super().__init__(system, **options)
        pool, task = self.pool, self.task
        self.train_items = list(task.items("train"))[:settings.train_items]
        self.dev_items = list(task.items("dev"))[:settings.dev_items]
        for split, got in (("train", self.train_items), ("dev", self.dev_items)):
            if not got:
                raise ConfigError(f"{name} trains on the task's train split and selects on its dev split; "
                                  f"task {task.name!r} has no {split} items")
        test_ids = {it.id for it in self.items}
        if test_ids & {it.id for it in self.train_items + self.dev_items}:
            raise ConfigError(f"{name}: the evaluated items overlap the train/dev items it trains on; "
                              "evaluate on the test split")
        self._frozen = {p: frozen_reason(pool.members[p]) for p in self.players}  # "" for trainable members
        if all(self._frozen.values()):
            reasons = "; ".join(f"{p}: {why}" for p, why in self._frozen.items())
            raise ConfigError(f"{name}: no member of pool {pool.name!r} has trainable weights ({reasons}); "
                              "use HF members (e.g. --pool zoo:default)")
        self.store = TrainedCheckpoints(train_dir)
        self.trained: dict[frozenset, CoalitionTraining] = {}
        self.notes: dict[frozenset, str] = {}  # coalitions valued without training, and why
        self.cost = TrainingCost()
        self.trained_dev: dict[frozenset, DevScores] = {}  # per trained coalition, what its protocol read

    def solo_game(self) -> CoalitionGame:
        """Solo strength is each member alone, untrained and answering plainly: a coalition of one cannot
        train (its value here is 0), so the trained game's singletons say nothing about it."""
        return self.plain_solo_game()

    @property
    def protocol_name(self) -> str:
        """Results name the recipe (``sparta``), not its evaluation protocol."""
        return self.recipe.name

    def protocol_settings(self) -> dict[str, Any]:
        """The recipe's flat settings: its evaluation protocol's and its own."""
        return self.settings.settings()

    @property
    def dev(self) -> DevScores:
        """Each trained coalition reads its trained copies' dev scores (``training_summary``), not these."""
        return DevScores(source="per trained coalition", why="the trained copies' dev scores are in training")

    def key(self, coalition: frozenset) -> str:
        members = self.ordered(coalition)
        return fingerprint({"method": self.recipe.name, "settings": self.settings.settings(), "members": members,
                            "identities": [self.pool.members[m].identity for m in members],
                            "styles": [self.pool.styles.get(m, "chat") for m in members], "task": self.task.name,
                            "train": [it.id for it in self.train_items], "dev": [it.id for it in self.dev_items],
                            "seed": self.seed})

    def training(self, coalition: frozenset) -> CoalitionTraining:
        """The coalition trained (once; from the store when a previous run finished it)."""
        if coalition in self.trained:
            return self.trained[coalition]
        key = self.key(coalition)
        loaded = self.store.load(key, self.pool)
        if loaded is not None:
            self.cost.reused += 1
            self.trained[coalition] = loaded
            return loaded
        members = {m: copy_member(m, self.pool) for m in self.ordered(coalition)}  # fresh copies of the originals
        work = self.store.work_dir(key)
        start = time.perf_counter()
        result = self.recipe.train(self.settings, RecipeContext(
            out=work, members=members, task=self.task, train_items=self.train_items, dev_items=self.dev_items,
            seed=self.seed))
        seconds = time.perf_counter() - start
        identities = {m: f"{self.pool.members[m].identity}|{self.recipe.name}:{key}" for m in members}
        self.store.save(key, work, result, identities, seconds)
        self.cost.trainings += 1
        self.cost.training_seconds += seconds
        self.cost.training_generations += result.generations
        loaded = self.store.load(key, self.pool)  # evaluate what was saved: each member's selected checkpoint
        assert loaded is not None
        self.trained[coalition] = loaded
        return loaded

    def _compute(self, coalitions: list[frozenset]) -> dict[frozenset, np.ndarray]:
        out: dict[frozenset, np.ndarray] = {}
        bar = tqdm(total=len(coalitions), desc=f"{self.recipe.name}: train + evaluate", unit="coalition",
                   leave=False, disable=not self.progress)
        for c in coalitions:
            if len(c) < self.settings.min_members or all(self._frozen[m] for m in c):
                self.notes[c] = (f"needs at least {self.settings.min_members} members (no opponent or peer to train "
                                 "with)" if len(c) < self.settings.min_members else "no member with trainable weights")
                out[c], self.records[c] = np.zeros(self.n_items), []
                bar.update(1)
                continue
            trained = self.training(c)
            backends = {**self._backends, **{n: m.generator for n, m in trained.members.items()}}
            # the trained copies' own dev scores (their identities name the training), not the originals'
            dev = dev_scores_for(self.system, trained.answerers, backends=backends, cache=self.cache)
            self.trained_dev[c] = dev
            answering = dataclasses.replace(self.system, members=trained.answerers, dev_scores=dev.scores)
            contexts = [answering.context(it, episode_seed(self.seed, it)) for it in self.items]
            outcomes, counts = self.executor.run(self.protocol, contexts, backends, self.cache)
            self._counts.add(counts)
            rows = score_outcomes(self.task, contexts, outcomes)
            out[c] = np.array([r.score for r in rows])
            self.records[c] = [{**episode_record(r, it, self.record_text), "coalition": list(self.ordered(c)),
                                "answered_by": list(trained.answerers)} for r, it in zip(rows, self.items)]
            bar.update(1)
        bar.close()
        return out

    def training_summary(self) -> dict[str, Any]:
        """Cost, and per trained coalition what happened (for summary.json)."""
        return {**self.cost.to_dict(),
                "coalitions": [{"coalition": list(self.ordered(c)), "answered_by": t.answerers, "record": t.record,
                                **({"dev_scores": self.trained_dev[c].record()} if c in self.trained_dev else {})}
                               for c, t in self.trained.items()],
                "valued_without_training": [{"coalition": list(self.ordered(c)), "value": 0.0, "why": why}
                                            for c, why in self.notes.items()]}

    def export(self, coalition: Sequence[str], folder: Path) -> Path:
        """Save the coalition's trained members as HF folders with a pool file next to them, so that
        ``--pool FOLDER/pool.yaml`` uses them like any members. Untrained simulated members are written
        with their profiles; other untrained members cannot be, and the pool file says so."""
        import dataclasses
        import shutil

        from ...agents.simulated import SimulatedAgent

        key = frozenset(coalition)
        if len(key) < self.settings.min_members:
            raise ConfigError(f"coalition {sorted(key)} is too small for {self.recipe.name} to train; "
                              "nothing to save")
        trained = self.training(key)
        stored = self.store.folder(self.key(key))
        folder.mkdir(parents=True, exist_ok=True)
        entries: list[dict[str, Any]] = []
        skipped: list[str] = []
        for name, member in trained.members.items():
            if (stored / name).is_dir():
                shutil.copytree(stored / name, folder / name, dirs_exist_ok=True)
                entries.append({"name": name, "backend": "hf", "model": f"./{name}", "style": member.style})
            elif isinstance(member.generator, SimulatedAgent):
                profile = {k: v for k, v in dataclasses.asdict(member.generator.profile).items() if k != "name"}
                entries.append({"name": name, "backend": "sim", "profile": profile})
            else:
                skipped.append(name)
        config = {"name": f"{self.pool.name}+{self.recipe.name}", "members": entries}
        header = (f"# {self.recipe.name}-trained members of coalition {list(self.ordered(key))} "
                  f"(pool {self.pool.name}, task {self.task.name}); answered by: {', '.join(trained.answerers)}\n")
        if skipped:
            header += f"# not saved (untrained, not a simulated agent): {', '.join(skipped)}\n"
        path = folder / "pool.yaml"
        write_text(path, header + yaml.safe_dump(config, sort_keys=False))
        write_json(folder / "training.json", {"coalition": list(self.ordered(key)), "answerers": trained.answerers,
                                              "record": trained.record})
        return path

