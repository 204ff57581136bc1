"""The one trainer: trainable seats inside a live system, rewarded by its outcome. A single policy (C-RL and its
baselines) is a team of one with credit ``system``; ``team-crl`` trains K >= 1 seats, each on its own credit. One
path for any number of seats: the config says who sits where (``seat_policies``, ``credit``, ``shared_base``), the
strategy what a step rewards, updates and logs and what the report scores; nothing here asks how many seats train.
Each job lives in its own module: loading the models and the vLLM engine (:mod:`.policy_model`), rollouts (one
collector for one seat or K, :mod:`.rollouts`), the updates (:mod:`.policy_updates` over the one
:mod:`.update_loop`), evaluation and selection (:mod:`.evaluation`), checkpoints (:mod:`.checkpoints`), files
(:mod:`.reporting`), learning-signal numbers (:mod:`.diagnostics`, :mod:`.team.diagnostics`). What differs per
recipe is its strategy (:mod:`.strategies`; the team's in :mod:`.team.strategy`: rollouts, reward, update, the
step's signal, the report's scores), which gets every seat's updates object, never the trainer. Rollouts run in
this process or, with a Ray executor, on its workers (every seat's weights shipped; the same rollouts).

Every seat has its own model (any architecture or tokenizer; with ``shared_base`` one adapter each of one model),
its own :class:`RecordingPolicy`, AdamW optimiser and :class:`PolicyUpdates`. Frozen collaborators and the pool's
models are only ever asked, never updated.

Checkpoint selection: every ``eval_every`` steps the seats are scored on ``eval_items`` dev items in the mode the
method optimises (collaborative for crl/raft, solo for the indiv methods, the team's system score with each seat's
solo / own / leave-one-out / Shapley view for a team); the best is saved (every seat's weights of that step: the
seats co-adapt, so a team is selected as it was measured together); training stops after ``patience`` evaluations
without improvement. After every step the full state (weights, optimisers, step, RNGs, history) is saved, committed
for all seats at once (:func:`.checkpoints.commit_pending`; every seat's ``best/`` and ``last/`` in ``<run>/<seat>/``,
:func:`.checkpoints.seat_folders`), so a killed run resumes where it stopped and ends with the same weights and
metrics as a run never interrupted. The report scores both the best
and the last checkpoint on the test split, which selection never sees.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..agents.member_settings import MemberSettings
from ..envs.protocols import Protocol, make_protocol
from ..envs.system import System, SystemSpec
from ..errors import ConfigError
from ..failures import FailureSummary
from ..result_files import dumps, write_json, write_text
from ..types import Item
from . import checkpoints
from .batches import gather_batch
from .config import RunSettings, TrainConfig, check_methods, default_run, make_config, preset_for
from .credit import SHAPLEY_SEAT_LIMIT
from .curves import run_curves
from .evaluation import MODES, EvalResult, RunItems, improves, summarise
from .policy_model import (
    RolloutFallbackWarning,
    load_policy,
    load_shared_base,
    policy_weights,
    push_weights,
    resolve_policy,
    start_engine,
)
from .policy_updates import PolicyUpdates
from .probe import NoSignalError, ProbeResult, ProbeSetting, refuse_without_signal, run_probe
from .recipes import RecipeContext, get_recipe, make_strategy
from .reporting import MetricsLog, ReportInputs, run_summary, summary_table
from .rollouts import (
    CounterfactualCost,
    RecordingPolicy,
    Rollout,
    RolloutPlan,
    collect,
    collect_distributed,
    protocol_asks,
)
from .team.strategy import TeamEval, check_team_models
from .update_loop import UpdateLoop
from .verdict import direction_of


@dataclass
class TrainState:
    step: int = 0
    best_score: float = float("-inf")  # the best dev score so far (a team's: its system score)
    best_ci: list[float] = field(default_factory=list)
    best_step: int = -1
    evals_without_gain: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    system_prompt: str = ""
    probe: dict[str, Any] | None = None  # the pre-training probe (see training/probe.py)
    cost: dict[str, int] = field(default_factory=lambda: asdict(CounterfactualCost()))  # training's, summed
    test_before: dict[str, Any] | None = None  # a team untrained, on test (TeamEval.to_dict)


def build_protocol(config: RunSettings) -> Protocol:
    """The run's protocol with its generation cap and, where it has rounds and none were set, ``config.rounds``."""
    settings = dict(config.protocol_settings)
    proto = make_protocol(config.protocol, **settings)  # a coalition-training recipe is refused here
    overrides: dict[str, Any] = {"max_new_tokens": config.max_new_tokens}
    if hasattr(proto, "rounds") and "rounds" not in settings:
        overrides["rounds"] = config.rounds
    return make_protocol(proto, **overrides)


class Trainer(RunItems):
    """Trains ``config``'s seats (:attr:`.config.TrainConfig.seat_policies`: one policy's, or a team's) into ``out``
    (default ``config.out``). ``executor``: a Ray executor that spreads the seats'
    rollouts (None: this process); ``models``: seat -> (model, tokenizer) already loaded, used instead of loading
    the configured ones (which still name them in records)."""

    def __init__(self, config: TrainConfig, out: str | Path | None = None,
                 log: Callable[[str], None] = print, *, executor: Any = None,
                 models: Mapping[str, tuple[Any, Any]] | None = None):
        import torch
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # weight loading/saving bars would drown the training bar
        self.config, self.log, self.torch, self.executor = config, log, torch, executor
        self.strategy = make_strategy(config)
        self.out = Path(out or config.out)
        self.seat_policies = config.seat_policies
        self.seats = list(self.seat_policies)
        self.seat_folders = checkpoints.seat_folders(self.out, self.seats)
        self._seed_everything(config.seed)
        check_team_models(config, self.seats, models)
        spec = SystemSpec(build_protocol(config), config.task, config.collaborators, config.members, split=None,
                          task_kwargs=config.task_kwargs)
        # the seats sit after the frozen members: the pool answers the collaborators, the trainer's models the seats
        self.system = System.build(spec, {s: config.policy_style for s in self.seats})
        self.task, self.pool, self.members = self.system.task, self.system.pool, list(self.system.frozen)
        self.solo_protocol = make_protocol("majority_vote", max_new_tokens=config.max_new_tokens,
                                           temperature=self.system.protocol.temperature)
        self.check_signal()  # every refusal before a model loads or a rollout runs
        self.engine: Any = None
        self.models: dict[str, Any] = {}
        self.tokenizers: dict[str, Any] = {}
        self.optimizers: dict[str, Any] = {}
        self.updates: dict[str, PolicyUpdates] = {}
        for seat, (model, tokenizer) in self._load_models(models).items():  # one optimiser and update loop each
            optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
            self.models[seat], self.tokenizers[seat], self.optimizers[seat] = model, tokenizer, optimizer
            self.updates[seat] = PolicyUpdates(model, tokenizer, UpdateLoop(model, optimizer, config.max_grad_norm,
                                                                            after_step=self.sync_weights),
                                               config.micro_batch)  # vLLM samples the new weights
        self.state = TrainState()
        self.rng = random.Random(config.seed)
        self.metrics = MetricsLog(self.out)
        self.failures = FailureSummary()  # failed rollouts and evaluation episodes of this process
        self._base_weights: dict[str, dict[str, Any]] = {}
        self.weight_syncs = 0  # weight pushes into the rollout engine
        self.last_logprob_gap = 0.0  # mean |sampler - trainer| log-prob per token of the last rollouts (vLLM)
        self.last_cost = CounterfactualCost()  # what the last step's counterfactuals cost
        if config.rollout_backend == "vllm":
            self.engine = self._start_engine()
        if self.engine is not None and self.on_ray:
            raise ConfigError("rollout_backend='vllm' serves the policy in this process; drop the Ray executor "
                              "(or use rollout_backend='hf' to spread rollouts over Ray workers)")

    # -- setup helpers --------------------------------------------------------------------------
    @property
    def on_ray(self) -> bool:
        """Rollouts go to a Ray executor's workers (every seat's weights shipped each step)."""
        return getattr(self.executor, "name", "local") == "ray"  # any executor object: only Ray's is named so

    def _seed_everything(self, seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        self.torch.manual_seed(seed)

    def _load_models(self, models: Mapping[str, tuple[Any, Any]] | None) -> dict[str, tuple[Any, Any]]:
        """seat -> (model, tokenizer): the given ones, else each seat's model loaded (with its own LoRA adapter when
        ``lora_r`` > 0), or with ``shared_base`` one copy of the model with one adapter per seat. Seat k's adapter
        starts from ``seed + k`` either way."""
        cfg = self.config
        if cfg.shared_base:
            assert cfg.lora is not None  # TrainConfig refuses shared_base without it
            adapters, tokenizer = load_shared_base(next(iter(self.seat_policies.values())), self.seats, cfg.lora,
                                                   cfg.device, cfg.dtype, cfg.seed)
            return {seat: (adapters[seat], tokenizer) for seat in self.seats}
        return {seat: (models[seat] if models and seat in models
                       else load_policy(spec, cfg.device, cfg.dtype, cfg.lora, cfg.seed + k))
                for k, (seat, spec) in enumerate(self.seat_policies.items())}

    def _policy(self, table: Mapping[str, Any]) -> Any:
        if len(table) != 1:
            raise ConfigError(f"a trainer of seats {self.seats} has no single policy; read trainer.models[seat]")
        return next(iter(table.values()))

    @property
    def model(self) -> Any:
        """The policy's model (a single seat's; ``models[seat]`` for each)."""
        return self._policy(self.models)

    @property
    def tokenizer(self) -> Any:
        return self._policy(self.tokenizers)

    @property
    def optimizer(self) -> Any:
        return self._policy(self.optimizers)

    def solo_system(self, seat: str) -> System:
        """The seat alone under a plain single answer (its solo strength, as leaderboards measure it); a vote of
        one reads no dev scores."""
        return self.system.replace(protocol=self.solo_protocol, members=(seat,), seats={seat: self.config.policy_style},
                                   dev_scores={}, learned=None)

    def check_signal(self) -> None:
        """Refuse, before any model loads or rollout runs, a system in which a trained seat can get no signal: a
        coalition too small for the protocol, or a protocol that never asks the seat (found by driving it with
        canned replies)."""
        if self.strategy.solo or not self.strategy.trains:
            return
        system, proto, method = self.system, self.system.protocol, self.config.method
        if len(system.members) < proto.min_members:
            raise ConfigError(f"{proto.name} needs at least {proto.min_members} members; the training coalition "
                              f"is {list(system.members)}")
        probe = list(self.task.items("train"))[:4]
        for seat in self.seats:
            if protocol_asks(system, probe, seat) is False:
                raise ConfigError(f"{proto.name} never asks the policy seat {seat!r} anything with coalition "
                                  f"{list(system.members)}: {method} would train on no call of its own; seat it "
                                  "where the protocol asks it (e.g. majority_vote, debate, slm_mux)")

    def _start_engine(self) -> Any:
        cfg = self.config
        engine = start_engine(self.seat_policies[self.seats[0]], cfg.dtype, cfg.vllm_settings)
        if engine is not None:
            self.sync_weights(engine)  # a resumed or best checkpoint differs from the folder vLLM read
        return engine

    def sync_weights(self, engine: Any = None) -> None:
        """Push the trainer's current weights into the rollout engine (a no-op without one)."""
        engine = engine if engine is not None else self.engine
        if engine is None:
            return
        push_weights(engine, self.model)
        self.weight_syncs += 1

    def recording(self, seat: str, temperature: float | None = None, system_prompt: str | None = None
                  ) -> RecordingPolicy:
        """A fresh recording shim over the seat's current weights (``temperature`` 0: greedy; None: the
        protocol's), with the run's system prompt unless ``system_prompt`` is given."""
        from ..agents.hf import HFGenerator
        from ..agents.options import HFOptions

        cfg = self.config
        hf = HFGenerator(self.models[seat], self.tokenizers[seat], HFOptions(max_new_tokens=cfg.max_new_tokens,
                         max_batch_size=cfg.rollout_batch_size, fast_decode=cfg.fast_decode),
                         identity=f"{seat}:{cfg.method}:step{self.state.step}")
        gen: Any = hf
        if self.engine is not None:
            from ..agents.vllm_engine import VLLMPolicy

            gen = VLLMPolicy(self.engine, hf, identity=f"{hf.identity}:vllm")
        return RecordingPolicy(gen, self.state.system_prompt if system_prompt is None else system_prompt,
                               temperature)

    # -- rollouts -------------------------------------------------------------------------------------
    def rollouts(self, items: Sequence[Item], step_seed: int, first_group: int = 0) -> list[Rollout]:
        """``group_size`` executions of every item, every seat sampling (with the counterfactuals its credit needs,
        their cost added to ``last_cost``); a solo method's policy alone."""
        cfg = self.config
        system = self.solo_system(self.seats[0]) if self.strategy.solo else self.system
        policies = {s: self.recording(s, cfg.rollout_temperature) for s in self.seats}
        plan = RolloutPlan(cfg.group_size, step_seed, draws=cfg.collaborator_draws, first_group=first_group)
        gather = partial(collect_distributed, self.executor) if self.on_ray else collect
        rollouts = gather(system, items, policies, plan, cfg.credit, cost=self.last_cost)
        if self.engine is not None:
            self.last_logprob_gap = self.updates[self.seats[0]].recompute_logprobs(rollouts)
        self._count_failures(list(system.members), rollouts)
        return rollouts

    def _count_failures(self, coalition: Sequence[str], rollouts: Sequence[Rollout]) -> None:
        for r in rollouts:
            self.failures.add(list(coalition), r.error)

    def rewards(self, rollouts: Sequence[Rollout]) -> list[float]:
        return [self.strategy.reward(r) for r in rollouts]

    def gather_batch(self, step: int) -> tuple[list[Rollout], list[float], dict[str, Any]]:
        """Rollouts for one step, rewarded (see :func:`.batches.gather_batch`: dynamic sampling)."""
        return gather_batch(self.config, step, self.draw_items, self.rollouts, self.rewards)

    def train_step(self, step: int) -> dict[str, Any]:
        """One optimiser step of every seat: rollouts, rewards, the strategy's update; the step's metric row."""
        t0 = time.perf_counter()
        self.last_cost = CounterfactualCost()
        rollouts, rewards, extra = self.gather_batch(step)
        t1 = time.perf_counter()
        metrics, advantages = self.strategy.update(self.updates, rollouts, rewards)
        t2 = time.perf_counter()
        total = CounterfactualCost(**self.state.cost)
        total.add(self.last_cost)
        self.state.cost = asdict(total)
        arr = np.asarray(rewards, dtype=float)
        return {"step": step, "reward_mean": float(arr.mean()) if len(arr) else 0.0,
                "reward_std": float(arr.std()) if len(arr) else 0.0, "rollouts": len(rollouts),
                **self.strategy.step_signal(rollouts, rewards, advantages), **extra, **metrics,
                **({"sampler_logprob_gap": self.last_logprob_gap} if self.engine is not None else {}),
                **self._counterfactual_row(), "rollout_seconds": t1 - t0, "update_seconds": t2 - t1}

    def _counterfactual_row(self) -> dict[str, Any]:
        """What the step's counterfactual sub-teams cost, where the seats' credit runs any (not ``system``)."""
        if self.config.credit == "system":
            return {}
        cost = self.last_cost
        return {"counterfactuals": cost.counterfactuals, "counterfactual_generations": cost.generations,
                "counterfactual_replayed": cost.replayed}

    # -- evaluation -----------------------------------------------------------------------------------
    def evaluate(self, items: Sequence[Item], mode: str | None = None, system_prompt: str | None = None,
                 seed: int | None = None) -> EvalResult | TeamEval:
        """One execution per item, deterministic for the run's seed, in ``mode`` (default: the one the method is
        selected in): ``collab`` inside the protocol with the frozen collaborators, ``solo`` the policy alone,
        ``without`` the collaborators alone (the leave-one-out coalition; the policy is not asked), ``team`` the
        team with every seat's solo / own / leave-one-out / Shapley view (:class:`TeamEval`). The seats decode
        as ``eval_decoding`` says. See :func:`.evaluation.eval_seed` for the seed."""
        mode = mode or self.strategy.selection_mode
        if mode not in MODES:
            raise ConfigError(f"evaluation mode {mode!r}; use collab, solo or without (a team: team)")
        seed = self.eval_seed if seed is None else seed
        plan = RolloutPlan(1, seed, draws="episode")
        for model in self.models.values():
            model.eval()
        try:
            if mode == "team":
                credit, cost = "shapley" if len(self.seats) <= SHAPLEY_SEAT_LIMIT else "loo", CounterfactualCost()
                team = self._pass(self.system, items, plan, credit=credit, cost=cost)
                solo = {s: summarise("solo", [r.own_score for r in self._pass(self.solo_system(s), items, plan)], seed)
                        for s in self.seats}
                return TeamEval.of(team, solo, seed, cost, credit == "shapley")
            system = self.solo_system(self.seats[0]) if mode == "solo" else self.system
            members = list(self.members) if mode == "without" else None
            rollouts = self._pass(system, items, plan, members=members, system_prompt=system_prompt)
            return summarise(mode, [r.own_score if mode == "solo" else r.reward for r in rollouts], seed)
        finally:
            for model in self.models.values():
                model.train()

    def _pass(self, system: System, items: Sequence[Item], plan: RolloutPlan, **options: Any) -> list[Rollout]:
        """One evaluation pass of ``system`` (``options``: :func:`.rollouts.collect`'s, and ``system_prompt``)."""
        temperature = 0.0 if self.config.eval_decoding == "greedy" else None
        prompt = options.pop("system_prompt", None)
        policies = {s: self.recording(s, temperature, prompt) for s in system.seats}
        rollouts = collect(system, items, policies, plan, **options)
        self._count_failures(options.get("members") or system.members, rollouts)
        return rollouts

    # -- checkpoints -------------------------------------------------------------------------------------
    def folder(self, seat: str) -> Path:
        """Where the seat's ``best/`` and ``last/`` go (:func:`.checkpoints.seat_folders`)."""
        return self.seat_folders[seat]

    def record_best(self, result: EvalResult | TeamEval, step: int) -> None:
        """Every seat keeps its weights of this step as its ``best/``. A team is selected by its dev system score,
        not by a seat's own (solo, leave-one-out or Shapley): the seats co-adapt, so a seat's best by its own number
        would come from another step than its partners', and the checkpoints put together would be a team never
        measured on dev."""
        self.state.best_score, self.state.best_ci, self.state.best_step = result.mean, list(result.ci), step
        self.state.evals_without_gain = 0
        for seat in self.seats:
            checkpoints.save_best(self.folder(seat), self.models[seat], self.tokenizers[seat],
                                  self.state.system_prompt, self.member_settings(seat, step, result.mean))

    def member_settings(self, seat: str, step: int, dev_score: float | None = None) -> MemberSettings:
        """What a seat's checkpoint needs to be a pool member as it stands (style, system prompt, token cap, the
        decoding the trainer evaluates with) and its provenance (``dev_score``: the run's dev score of the best
        checkpoint, a team's system score; ``seats``: who trained beside it, ``credit``: on what)."""
        from ..agents.hf import context_length

        cfg = self.config
        spec = self.seat_policies[seat]
        if seat not in self._base_weights:  # the starting weights never change: hashed once
            self._base_weights[seat] = policy_weights(spec)
        return MemberSettings(
            style=cfg.policy_style, system_prompt=self.state.system_prompt, max_new_tokens=cfg.max_new_tokens,
            context_length=context_length(self.models[seat], self.tokenizers[seat]),
            decoding="greedy" if cfg.eval_decoding == "greedy" else "sampled",
            provenance={"base_model": spec, "base_weights": self._base_weights[seat], "method": cfg.method,
                        "seat": seat, "seats": list(self.seats), "credit": cfg.credit, "step": step,
                        "dev_score": dev_score,
                        "eval_seed": self.eval_seed, "run_folder": str(self.out.resolve()), "config": cfg.to_dict()})

    def save_state(self) -> None:
        """Save the whole state after a step, every seat's at once: each seat's ``last/`` (weights as an HF folder,
        optimiser, RNGs, the run's state) is written into ``out/.pending/<seat>/``, then the ``COMMIT`` file, then
        each is swapped into its folder's ``last/`` (:func:`.checkpoints.commit_pending`); a kill before ``COMMIT``
        leaves the previous step's state everywhere, one after it is finished on resume. So the seats' states
        always belong to one step."""
        pending = self.out / ".pending"
        shutil.rmtree(pending, ignore_errors=True)
        for seat in self.seats:
            checkpoints.save_state(pending / seat, self.models[seat], self.optimizers[seat],
                                   {"team": asdict(self.state), "seat": seat}, self.rng, self.config.to_dict(),
                                   self.tokenizers[seat], self.member_settings(seat, self.state.step))
        checkpoints.commit_pending(self.out, self.seat_folders, str(self.state.step))

    def try_resume(self) -> bool:
        """Restore every seat's weights and optimiser, the RNGs and the run's state from the last (commit)."""
        checkpoints.finish_commit(self.out, self.seat_folders)
        saved = {seat: checkpoints.load_state(self.folder(seat), self.models[seat], self.optimizers[seat], self.rng,
                                              self.config.to_dict()) for seat in self.seats}
        states = {s: v["team"] for s, v in saved.items() if v is not None}
        if not states:
            return False
        steps = {s: v["step"] for s, v in states.items()}
        if len(states) != len(self.seats) or len(set(steps.values())) != 1:
            raise ConfigError(f"{self.out}: the seats' saved states do not belong to one step ({steps}, none for "
                              f"{[s for s in self.seats if s not in states]}); use a fresh --out folder")
        self.state = TrainState(**next(iter(states.values())))
        self.sync_weights()
        self.log(f"resumed {self.config.method} from step {self.state.step}")
        return True

    def load_best(self) -> None:
        for seat in self.seats:
            prompt = checkpoints.load_best(self.folder(seat), self.models[seat])
            if prompt is not None:
                self.state.system_prompt = prompt
        self.sync_weights()

    def _keep_metrics_until(self, step: int) -> None:
        """Drop metric rows of steps after the last saved state (a kill between writing a row and saving its
        step), so a resumed run's metrics.jsonl equals an uninterrupted one's."""
        rows = [r for r in self.metrics.rows() if r.get("step", 0) <= step]
        fresh = self.metrics.path.with_suffix(".jsonl.tmp")
        write_text(fresh, "".join(dumps(r) + "\n" for r in rows))
        fresh.replace(self.metrics.path)

    def select_untrained(self) -> None:
        """A method that does not train: the best of its candidate system prompts by collaborative dev
        score (Nudge), or the current prompt evaluated once (Base)."""
        candidates = self.strategy.candidate_prompts()
        if candidates is None:
            self.record_best(self.evaluate(self.dev_items(), "collab"), step=0)
            return
        best: tuple[EvalResult | TeamEval, str] | None = None
        for k, prompt in enumerate(candidates):
            result = self.evaluate(self.dev_items(), "collab", system_prompt=prompt)
            self.metrics.write({"step": k, "candidate": prompt, "dev_score": result.mean})
            if best is None or result.mean > best[0].mean:
                best = (result, prompt)
        if best is None:
            raise ConfigError(f"{self.config.method}: no candidate system prompt to choose from")
        self.state.system_prompt = best[1]
        self.record_best(best[0], step=0)

    # -- the whole run -----------------------------------------------------------------------------------
    def probe(self, force: bool = False) -> dict[str, ProbeResult] | None:
        """The pre-training probe of every trained seat (``probe_groups`` groups; 0, or a method without group-relative
        advantages: none): logged, kept in the state and the report, and a :class:`NoSignalError` naming each seat's
        likely cause when no seat has an informative group, unless ``force`` (:mod:`.probe`)."""
        cfg = self.config
        groups = self.strategy.probe_groups
        if groups < 1:
            return None
        results = run_probe(self, groups)
        probe = self.strategy.probe_record(results)
        self.state.probe = probe
        self.metrics.write({"step": 0, "probe": probe})
        setting = ProbeSetting(cfg.method, cfg.task, cfg.group_size, self.system.protocol.name, cfg.collaborators,
                               self.system.protocol.settings(), self.strategy.solo)
        refuse_without_signal(results, setting, force, self.log,
                              "Pass --force (Trainer.fit(force=True)) to train anyway.")
        return results

    def fit(self, progress: bool = True, force: bool = False) -> TrainState:
        """Train (or, for methods that do not train, evaluate). Before the first update the probe checks
        that the method gets a learning signal (:meth:`probe`; ``force`` trains without one)."""
        cfg = self.config
        self.out.mkdir(parents=True, exist_ok=True)
        write_json(self.out / "config.json", cfg.to_dict())
        for folder in self.seat_folders.values():
            folder.mkdir(exist_ok=True)
        self.metrics = MetricsLog(self.out, cfg.report_to, cfg.to_dict())
        resumed = self.try_resume()
        if not self.strategy.trains:
            if not resumed:
                self.select_untrained()
                self.save_state()
            return self.state
        if resumed:
            self._keep_metrics_until(self.state.step)
        else:
            self.metrics.path.unlink(missing_ok=True)  # a run killed before its first save starts over
            self.probe(force)
            if self.strategy.compares_with_untrained:  # the untrained seats on test, never selected on
                self.state.test_before = self.evaluate(self.test_items()).to_dict()
            result = self.evaluate(self.dev_items())
            self.record_best(result, step=0)
            self.metrics.write({"step": 0, **result.row(), "best": True})
        from tqdm.auto import tqdm

        bar = tqdm(total=cfg.steps, initial=self.state.step, desc=cfg.method, unit="step", disable=not progress)
        while self.state.step < cfg.steps and self.state.evals_without_gain < cfg.patience:
            row = self.train_step(self.state.step)
            self.state.step += 1
            row["step"] = self.state.step
            if self.state.step % cfg.eval_every == 0 or self.state.step == cfg.steps:  # a short run can pick its end
                result = self.evaluate(self.dev_items())
                row.update(result.row())
                # an adversary (reward="negate") keeps its lowest dev score
                if improves(result.mean, self.state.best_score, self.strategy.selection_sign):
                    self.record_best(result, self.state.step)
                    row["best"] = True
                else:
                    self.state.evals_without_gain += 1
            self.state.history.append({k: row[k] for k in ("step", "reward_mean", "dev_score") if k in row})
            self.metrics.write(row)
            self.save_state()
            bar.update(1)
            bar.set_postfix(reward=f"{row['reward_mean']:.3f}", dev=f"{self.state.best_score:.3f}")
        bar.close()
        return self.state

    def report(self, base_per_item: dict[str, list[float]] | None = None) -> dict[str, Any]:
        """Score the last and then the best checkpoint on the test split (which selection never sees) in the
        strategy's report modes, and build its report over the one header (:class:`.reporting.ReportInputs`):
        a policy's against Base's per-item scores (``{"collab": [...], "solo": [...]}``) when given, a team's
        against itself untrained."""
        items = self.test_items()
        modes = [m for m in self.strategy.report_modes if m != "without"]  # "without" asks no seat: scored once
        last = {m: self.evaluate(items, m) for m in modes}
        self.load_best()
        best: dict[str, EvalResult | TeamEval] = {m: self.evaluate(items, m) for m in modes}
        if "without" in self.strategy.report_modes and len(self.members) >= self.system.protocol.min_members:
            best["without"] = self.evaluate(items, "without")
        inputs = ReportInputs(self.report_header(), last, best, self.state.test_before, base_per_item,
                              self.metrics.rows(), self.seat_policies, self.seat_folders, self.out)
        return self.strategy.report(inputs, {seat: policy_weights(spec) for seat, spec in self.seat_policies.items()})

    def report_header(self) -> dict[str, Any]:
        """What every run's report starts with, whatever its seats and strategy."""
        cfg, state = self.config, self.state
        return {"method": cfg.method, "seed": cfg.seed, "seats": list(self.seats),
                "policies": dict(self.seat_policies), "credit": cfg.credit,
                "seat_folders": {seat: str(folder.resolve()) for seat, folder in self.seat_folders.items()},
                "best_step": state.best_step,
                "best_dev_score": state.best_score, "selection_mode": self.strategy.selection_mode,
                "best_direction": direction_of(self.strategy.selection_sign),
                "dev_at_best": {"mean": state.best_score, "ci": state.best_ci, "n": len(self.dev_items())},
                "steps_run": state.step, "system_prompt": state.system_prompt,
                "protocol": self.system.protocol.settings(), "members": list(self.members), "eval_seed": self.eval_seed,
                "dev_scores": self.system.dev.record(), "probe": state.probe, "training_cost": dict(state.cost),
                "config": cfg.to_dict(), "failures": self.failures.to_dict()}


@dataclass
class RunOptions:
    """How policy runs go: a progress bar, a Ray ``executor`` for rollouts (None: this process), a
    ``failures`` summary that every run's failed episodes are added to, ``force`` (train past a probe that
    found no signal) and ``overwrite`` (start over a run folder holding another configuration)."""

    progress: bool = True
    executor: Any = None
    failures: FailureSummary | None = None
    force: bool = False
    overwrite: bool = False


def train_policy(config: TrainConfig, out: str | Path | None = None, options: RunOptions | None = None,
                 base_per_item: dict[str, list[float]] | None = None) -> dict[str, Any]:
    """A recipe's run: train (or just evaluate) ``config`` into ``out`` and report it (a policy against Base's
    per-item scores when given; a team against itself untrained)."""
    options = options or RunOptions()
    trainer = Trainer(config, out=out, executor=options.executor)
    trainer.fit(progress=options.progress, force=options.force)
    report = trainer.report(base_per_item)
    if options.failures is not None:
        options.failures.merge(trainer.failures)
    return report


def run_methods(methods: Sequence[str] = ("crl",), root: str | Path = "runs/train", preset: str = "auto",
                options: RunOptions | None = None, **settings: Any) -> list[dict[str, Any]]:
    """Train (or just evaluate) each method into ``root/<method>-seed<seed>`` and report it against Base,
    which runs first when ``root`` has no Base for this seed yet. A run folder that holds a run with
    another configuration (its ``config.json``) is refused before any work, unless ``options.overwrite``
    (then it starts over); the same configuration resumes. ``settings`` are the recipes' settings over the
    default run (``config.default_run``: what ``cgym train`` trains too); ``preset`` ``auto`` is ``tiny`` for a
    zoo policy, ``paper`` for any other."""
    options = options or RunOptions()
    settings = default_run(settings)
    preset = preset_for(preset, settings["policies"])
    root = Path(root)
    methods = check_methods(methods)
    for method in methods:  # every setting checked before the first run starts
        make_config(method, preset=preset, strict=False, **settings)
    seed = settings.get("seed", 0)
    base_file = root / f"base-seed{seed}" / "per_item.json"
    for method in dict.fromkeys([*methods, "base"]):  # a Base of another configuration must not be compared against
        claim_run_folder(root, make_config(method, preset=preset, strict=False, **settings), options.overwrite)
    if methods != ["base"] and not base_file.is_file():
        methods = ["base"] + [m for m in methods if m != "base"]  # rescue/drag need Base first
    reports = []
    for method in methods:
        config = make_config(method, preset=preset, strict=False, **settings)
        base = json.loads(base_file.read_text()) if config.method != "base" and base_file.is_file() else None
        train = get_recipe(config.method, "policy").train
        reports.append(train(config, RecipeContext(root / f"{config.method}-seed{config.seed}", options, base)))
    run_curves(root)
    write_text(root / "summary.md", run_summary(root))
    return reports


def claim_run_folder(root: Path, config: TrainConfig, overwrite: bool) -> None:
    """Refuse a run folder holding another configuration's run (it would be resumed or compared
    against as if it were this one); with ``overwrite``, clear it so the run starts over."""
    folder = root / f"{config.method}-seed{config.seed}"
    saved = folder / "config.json"
    if not saved.is_file():
        return
    try:
        theirs = json.loads(saved.read_text())
    except ValueError:
        theirs = None
    mine = json.loads(json.dumps(config.to_dict(), default=str))
    if theirs == mine:
        return
    if not overwrite:
        keys = sorted(k for k in set(mine) | set(theirs or {}) if (theirs or {}).get(k) != mine.get(k))
        shown = "; ".join(f"{k} {(theirs or {}).get(k)!r} there, {mine.get(k)!r} here" for k in keys[:3])
        raise ConfigError(f"{folder} holds a {config.method} run with another configuration ({shown}); pass "
                          "--overwrite (run_methods(overwrite=True)) to start it over, or choose another --out")
    shutil.rmtree(folder)


__all__ = ["Trainer", "RunOptions", "NoSignalError", "policy_weights", "RolloutFallbackWarning", "EvalResult",
           "TrainState", "TeamEval", "build_protocol", "load_policy", "resolve_policy", "run_methods", "train_policy",
           "summary_table", "ProbeResult"]
