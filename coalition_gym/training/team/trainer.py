"""The team trainer (recipe ``team-crl``, ``cgym train --policy A --policy B ...``): K >= 2 trainable seats
learning together inside one protocol, beside frozen collaborators.

Every seat has its own model (any architecture or tokenizer), its own :class:`RecordingPolicy`, AdamW optimiser
and :class:`~coalition_gym.training.policy_updates.PolicyUpdates` (the one update loop), as the single-seat
trainer has for its policy. One step: ``items_per_step`` train items, G executions each in which every seat
samples and the collaborators' draws are shared within the group (:func:`.rollouts.collect_team`, with the
counterfactual sub-teams the credit mode needs); each seat's group-relative advantages on *its own* credit
(:func:`~coalition_gym.training.advantages.group_advantages`), broadcast to its calls of that execution; each
seat's clipped policy gradient on its own calls (C-RL's loss and settings). Frozen collaborators and the
pool's models are only ever asked, never updated.

Every ``eval_every`` steps the team is scored on dev (one greedy execution per item with the run's evaluation
seed), with each seat's solo score (the seat alone), leave-one-out and Shapley value over the seats on the same
executions (the compositional-strength view of training). Selection: each seat's ``best/`` is its weights at
the step with the best *team* dev score (see :meth:`TeamTrainer.record_best`). After every step the whole state
(every seat's weights, optimiser, the RNGs, the step, the history) is committed at once (see
:meth:`TeamTrainer.save_state`), so a run killed at any point resumes where the last commit left it and ends
with the same weights and metrics as a run never interrupted.

Files: ``out/config.json``, ``out/metrics.jsonl`` (per step the team reward and every seat's diagnostics,
:mod:`.diagnostics`), ``out/report.json`` (system score before/after on test with CIs, each seat's solo /
leave-one-out / Shapley before and after, the counterfactual cost, seconds per step), and per seat
``out/<seat>/`` with ``best/`` and ``last/`` (HF model folders with their ``coalition_gym.json``: a pool
member as they stand; with LoRA, adapter folders; ``last/`` also holds the optimiser state), ``config.json`` and
``report.json``. With ``shared_base`` every seat is one adapter of one shared model (:mod:`.config`).
"""

from __future__ import annotations

import os
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ...agents.base import stable_hash
from ...agents.member_settings import MemberSettings
from ...agents.pools import load_pool
from ...envs.protocols import Protocol, make_protocol
from ...envs.system import System
from ...errors import ConfigError
from ...failures import FailureSummary
from ...result_files import dumps, write_json, write_text
from ...tasks import make as make_task
from ...types import Item
from ...valuation.stats import bootstrap_mean, rescue_drag
from .. import checkpoints
from ..advantages import group_advantages
from ..evaluation import EvalResult, RunItems, improves, run_evaluation
from ..policy_model import load_policy, load_shared_base, policy_weights, resolve_policy
from ..reporting import MetricsLog
from ..rollouts import PolicyCall, RecordingPolicy, RolloutPlan, protocol_asks
from ..update_loop import UpdateLoop
from .config import TeamConfig
from .credit import SHAPLEY_SEAT_LIMIT
from .diagnostics import loo_credit, seat_signal, summarise_seats, team_signal
from .rollouts import CounterfactualCost, TeamRollout, collect_team

#: written last into ``out/.pending`` once every seat's new state is there: the step is committed
COMMIT = checkpoints.COMMIT  # the joint-state marker (training/checkpoints.py)
#: per-step timings: left out when two runs' metrics are compared (everything else is deterministic)
TIMING_KEYS = ("rollout_seconds", "credit_seconds", "update_seconds", "step_seconds")


def _summary(mode: str, scores: Sequence[float], seed: int) -> EvalResult:
    """Mean and bootstrap 95% CI over items, as the single-seat evaluation reports them."""
    scores = [float(s) for s in scores]
    if not scores:
        return EvalResult(mode, [], 0.0, (0.0, 0.0))
    _, _, lo, hi = bootstrap_mean(np.asarray([scores]), n_boot=1000, seed=seed)
    return EvalResult(mode, scores, float(np.mean(scores)), (float(lo[0]), float(hi[0])))


@dataclass
class TeamEval:
    """One evaluation pass: the team's system score per item, and per seat its ``solo`` score (the seat alone),
    ``own`` score (its own answer inside the team), ``loo`` and ``shapley`` value over the seats (None above
    SHAPLEY_SEAT_LIMIT seats), each with a CI; and what the counterfactuals cost."""

    system: EvalResult
    seats: dict[str, dict[str, EvalResult | None]]
    cost: CounterfactualCost

    def to_dict(self) -> dict[str, Any]:
        return {"system": {**self.system.to_dict(), "per_item": list(self.system.per_item)},
                "seats": {s: {k: (r.to_dict() if r is not None else None) for k, r in parts.items()}
                          for s, parts in self.seats.items()},
                "cost": asdict(self.cost)}

    def row(self, prefix: str = "dev") -> dict[str, Any]:
        """Flat numbers for metrics.jsonl: ``dev_score``, ``dev_ci`` and ``<seat>/dev_<kind>``."""
        out: dict[str, Any] = {f"{prefix}_score": self.system.mean, f"{prefix}_ci": list(self.system.ci)}
        for seat, parts in self.seats.items():
            for kind, result in parts.items():
                out[f"{seat}/{prefix}_{kind}"] = result.mean if result is not None else None
        return out


@dataclass
class TeamState:
    step: int = 0
    best_score: float = float("-inf")  # the team's best dev system score so far
    best_ci: list[float] = field(default_factory=list)
    best_step: int = -1
    evals_without_gain: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    cost: dict[str, int] = field(default_factory=lambda: asdict(CounterfactualCost()))  # training's, summed
    test_before: dict[str, Any] | None = None  # the untrained team on test (TeamEval.to_dict)


def team_protocol(config: TeamConfig) -> Protocol:
    """The protocol with the run's generation cap and, where it has rounds and none were set, ``config.rounds``
    (as the single-seat trainer builds it)."""
    settings = dict(config.protocol_settings)
    proto = make_protocol(config.protocol, **settings)  # a coalition-training recipe is refused here
    overrides: dict[str, Any] = {"max_new_tokens": config.max_new_tokens}
    if hasattr(proto, "rounds") and "rounds" not in settings:
        overrides["rounds"] = config.rounds
    return make_protocol(proto, **overrides)


def build_team_system(config: TeamConfig) -> System:
    """The system the team trains in: the frozen members in pool order, then the seats (answered from outside,
    in ``policy_style``)."""
    pool = load_pool(config.collaborators)
    members = pool.select(config.members) if config.members is not None else pool.member_names
    seats = list(config.seats or [])
    clash = [s for s in seats if s in pool.backends()]
    if clash:
        raise ConfigError(f"seat name {clash[0]!r} clashes with a name in pool {pool.name!r}; choose other seat "
                          "names (--set seats=[a,b])")
    return System(team_protocol(config), make_task(config.task, **config.task_kwargs), pool, [*members, *seats],
                  seats={s: config.policy_style for s in seats})


def check_team(config: TeamConfig, system: System, models: Mapping[str, Any] | None = None) -> None:
    """The refusals that need the system or the models (the settings' own are in :class:`TeamConfig`), all
    before any model is loaded or any rollout runs: two seats of one model without ``shared_base`` (or, with it,
    seats naming different models); a coalition too small for the protocol; a seat the protocol never asks."""
    seats = list(system.seats)
    if config.shared_base:
        if models:
            raise ConfigError("shared_base=True loads the one base model itself and adds the seats' adapters; pass "
                              "no preloaded models")
        paths = {os.path.realpath(resolve_policy(spec)) for spec in config.policies}
        if len(paths) != 1:
            raise ConfigError(f"shared_base=True puts every seat on one model, but the policies name {len(paths)} "
                              f"models ({config.policies}); name the same model for every seat, or drop shared_base")
    if models:
        by_object: dict[int, str] = {}
        for seat in seats:
            if seat in models:
                first = by_object.setdefault(id(models[seat][0]), seat)
                if first != seat:
                    raise ConfigError(f"seats {first!r} and {seat!r} are given the same model object: they would "
                                      "train one set of weights twice per step. To share one base, name one model "
                                      "for every seat with shared_base=True and lora_r > 0 (one adapter per seat); "
                                      "otherwise give each seat its own model")
    by_path: dict[str, str] = {}
    for seat, spec in config.seat_policies.items():
        if config.shared_base or (models and seat in models):
            continue
        path = os.path.realpath(resolve_policy(spec))
        first = by_path.setdefault(path, seat)
        if first != seat:
            raise ConfigError(f"seats {first!r} and {seat!r} are given the same model ({path}). Two seats of one "
                              "model need shared_base=True with lora_r > 0 (one LoRA adapter per seat over the "
                              "shared base); to train two independent full copies, copy the model folder and give "
                              "each seat its own")
    proto = system.protocol
    if len(system.members) < proto.min_members:
        raise ConfigError(f"{proto.name} needs at least {proto.min_members} members; the team's coalition is "
                          f"{list(system.members)}")
    probe = list(system.task.items("train"))[:4]
    for seat in seats:
        if protocol_asks(system, probe, seat) is False:
            raise ConfigError(f"{proto.name} never asks seat {seat!r} anything with coalition "
                              f"{list(system.members)}: it would train on no call of its own; seat it where the "
                              "protocol asks it (e.g. majority_vote, debate, slm_mux) or drop it")


class TeamTrainer(RunItems):
    """Trains ``config``'s seats together into ``out`` (default ``config.out``). ``models``: seat -> (model,
    tokenizer) already loaded, used instead of loading ``config.policies`` (which still name them in records)."""

    def __init__(self, config: TeamConfig, out: str | Path | None = None, log: Callable[[str], None] = print,
                 models: Mapping[str, tuple[Any, Any]] | None = None):
        import torch
        from transformers.utils import logging as hf_logging

        from ..policy_updates import PolicyUpdates

        hf_logging.disable_progress_bar()
        self.config, self.log, self.torch = config, log, torch
        self.out = Path(out or config.out)
        self.seats: list[str] = list(config.seats or [])
        self._seed_everything(config.seed)
        self.system = build_team_system(config)
        check_team(config, self.system, models)  # every refusal before a model loads or a rollout runs
        self.task, self.pool = self.system.task, self.system.pool
        self.members = list(self.system.frozen)
        self.solo_protocol = make_protocol("majority_vote", max_new_tokens=config.max_new_tokens,
                                           temperature=self.system.protocol.temperature)
        self.models: dict[str, Any] = {}
        self.tokenizers: dict[str, Any] = {}
        self.optimizers: dict[str, Any] = {}
        self.updates: dict[str, PolicyUpdates] = {}
        loaded = self._load_models(models)
        for seat, (model, tokenizer) in loaded.items():  # one model (or adapter), optimiser and update loop per seat
            optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
            self.models[seat], self.tokenizers[seat], self.optimizers[seat] = model, tokenizer, optimizer
            self.updates[seat] = PolicyUpdates(model, tokenizer, UpdateLoop(model, optimizer, config.max_grad_norm),
                                               config.micro_batch)
        self.state = TeamState()
        self.rng = random.Random(config.seed)
        self.metrics = MetricsLog(self.out)
        self.failures = FailureSummary()
        self._base_weights: dict[str, dict[str, Any]] = {}

    def _load_models(self, models: Mapping[str, tuple[Any, Any]] | None) -> dict[str, tuple[Any, Any]]:
        """seat -> (model, tokenizer): the given ones, else each seat's model loaded (with its own LoRA adapter when
        ``lora_r`` > 0), or with ``shared_base`` one copy of the model with one adapter per seat. Seat k's adapter
        starts from ``seed + k`` either way."""
        cfg = self.config
        if cfg.shared_base:
            assert cfg.lora is not None  # TeamConfig refuses shared_base without it
            adapters, tokenizer = load_shared_base(cfg.policies[0], self.seats, cfg.lora, cfg.device, cfg.dtype,
                                                   cfg.seed)
            return {seat: (adapters[seat], tokenizer) for seat in self.seats}
        return {seat: (models[seat] if models and seat in models
                       else load_policy(spec, cfg.device, cfg.dtype, cfg.lora, cfg.seed + k))
                for k, (seat, spec) in enumerate(cfg.seat_policies.items())}

    def _seed_everything(self, seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        self.torch.manual_seed(seed)

    # -- policies and systems ----------------------------------------------------------------------------
    def recording(self, seat: str, temperature: float | None = None) -> RecordingPolicy:
        """A fresh recording shim over the seat's current weights (``temperature`` 0: greedy)."""
        from ...agents.hf import HFGenerator
        from ...agents.options import HFOptions

        cfg = self.config
        hf = HFGenerator(self.models[seat], self.tokenizers[seat], HFOptions(max_new_tokens=cfg.max_new_tokens,
                         max_batch_size=cfg.rollout_batch_size, fast_decode=cfg.fast_decode),
                         identity=f"{seat}:{cfg.method}:step{self.state.step}")
        return RecordingPolicy(hf, "", temperature)

    def solo_system(self, seat: str) -> System:
        """The seat alone under a plain single answer (its solo strength, as leaderboards measure it)."""
        return System(self.solo_protocol, self.task, self.pool, [seat], seats={seat: self.config.policy_style},
                      dev_scores={})

    def _count_failures(self, rollouts: Sequence[Any], coalition: Sequence[str]) -> None:
        for r in rollouts:
            self.failures.add(list(coalition), r.error)

    # -- one step ---------------------------------------------------------------------------------------
    def seat_update(self, seat: str, rollouts: Sequence[TeamRollout],
                    advantages: "Sequence[float] | np.ndarray") -> dict[str, float]:
        """The seat's clipped policy gradient on its own calls, each with its execution's advantage."""
        cfg = self.config
        calls: list[PolicyCall] = []
        per_call: list[float] = []
        for r, a in zip(rollouts, advantages):
            for call in r.calls.get(seat, []):
                if call.completion_ids:
                    calls.append(call)
                    per_call.append(float(a))
        if not calls:
            return {}
        return self.updates[seat].policy_gradient(calls, per_call, eps_low=cfg.eps_low, eps_high=cfg.eps_high,
                                                  aggregation=cfg.aggregation, passes=cfg.updates_per_batch)

    def train_step(self, step: int) -> dict[str, Any]:
        cfg = self.config
        t0 = time.perf_counter()
        items = self.draw_items(cfg.items_per_step)
        plan = RolloutPlan(cfg.group_size, stable_hash("step", cfg.seed, step), draws=cfg.collaborator_draws)
        policies = {s: self.recording(s, cfg.rollout_temperature) for s in self.seats}
        rollouts, cost = collect_team(self.system, items, policies, plan, cfg.credit)
        self._count_failures(rollouts, self.system.members)
        t1 = time.perf_counter()
        groups = [r.group for r in rollouts]
        advantages = {s: group_advantages([r.credit[s] for r in rollouts], groups, eps=cfg.advantage_eps,
                                          scale=cfg.scale_advantages) for s in self.seats}
        t2 = time.perf_counter()
        row: dict[str, Any] = {"step": step, **team_signal(rollouts)}
        for seat in self.seats:
            metrics = self.seat_update(seat, rollouts, advantages[seat])
            signal = seat_signal(rollouts, seat, self.seats, advantages[seat])
            row.update({f"{seat}/{k}": v for k, v in {**signal, **metrics}.items()})
        t3 = time.perf_counter()
        total = CounterfactualCost(**self.state.cost)
        total.add(cost)
        self.state.cost = asdict(total)
        # collect_team runs the executions and the counterfactual sub-teams in one call: where its cost says how
        # long the counterfactuals took, that goes to credit; else rollout seconds include them
        counterfactual = float(getattr(cost, "seconds", 0.0) or 0.0)
        row.update({"counterfactuals": cost.counterfactuals, "counterfactual_generations": cost.generations,
                    "counterfactual_replayed": cost.replayed,
                    "rollout_seconds": t1 - t0 - counterfactual, "credit_seconds": t2 - t1 + counterfactual,
                    "update_seconds": t3 - t2, "step_seconds": t3 - t0})
        return row

    # -- evaluation -------------------------------------------------------------------------------------
    def evaluate(self, items: Sequence[Item], seed: int | None = None) -> TeamEval:
        """One execution per item with the run's evaluation seed (``eval_decoding``: greedy by default): the
        team's system score, and per seat its solo score (alone), own score, leave-one-out and Shapley value
        over the seats in the same executions (Shapley up to SHAPLEY_SEAT_LIMIT seats, else leave-one-out)."""
        cfg = self.config
        seed = self.eval_seed if seed is None else seed
        temperature = 0.0 if cfg.eval_decoding == "greedy" else None
        mode = "shapley" if len(self.seats) <= SHAPLEY_SEAT_LIMIT else "loo"
        for model in self.models.values():
            model.eval()
        try:
            policies = {s: self.recording(s, temperature) for s in self.seats}
            rollouts, cost = collect_team(self.system, items, policies, RolloutPlan(1, seed, "episode"), mode)
            solo = {}
            for seat in self.seats:
                solo[seat], alone = run_evaluation(self.solo_system(seat), items, self.recording(seat, temperature),
                                                   "solo", seed)
                self._count_failures(alone, [seat])
        finally:
            for model in self.models.values():
                model.train()
        self._count_failures(rollouts, self.system.members)
        seats: dict[str, dict[str, EvalResult | None]] = {}
        for seat in self.seats:
            loo = [loo_credit(r, seat, self.seats) for r in rollouts]
            seats[seat] = {
                "solo": solo[seat],
                "own": _summary("own", [r.solo_scores.get(seat, 0.0) for r in rollouts], seed),
                "loo": _summary("loo", [v or 0.0 for v in loo], seed),
                "shapley": _summary("shapley", [r.credit[seat] for r in rollouts], seed) if mode == "shapley" else None}
        return TeamEval(_summary("system", [r.reward for r in rollouts], seed), seats, cost)

    # -- checkpoints ------------------------------------------------------------------------------------
    def member_settings(self, seat: str, step: int, dev_score: float | None = None) -> MemberSettings:
        """What a seat's checkpoint needs to be a pool member as it stands, and where it came from
        (``dev_score``: the team's dev score at the checkpoint's step)."""
        from ...agents.hf import context_length

        cfg = self.config
        spec = cfg.seat_policies[seat]
        if seat not in self._base_weights:  # the starting weights never change: hashed once
            self._base_weights[seat] = policy_weights(spec)
        return MemberSettings(
            style=cfg.policy_style, system_prompt="", max_new_tokens=cfg.max_new_tokens,
            context_length=context_length(self.models[seat], self.tokenizers[seat]),
            decoding="greedy" if cfg.eval_decoding == "greedy" else "sampled",
            provenance={"base_model": spec, "base_weights": self._base_weights[seat], "method": cfg.method,
                        "seat": seat, "seats": list(self.seats), "credit": cfg.credit, "step": step,
                        "team_dev_score": dev_score, "eval_seed": self.eval_seed,
                        "run_folder": str(self.out.resolve()), "config": cfg.to_dict()})

    def record_best(self, result: TeamEval, step: int) -> None:
        """Every seat keeps its weights of this step as its ``best/``. Selected by the *team's* dev system score,
        not by the seat's own (solo, leave-one-out or Shapley): the objective is the team's score, and the seats
        co-adapt, so a seat's best by its own number would come from another step than its partners' and the
        checkpoints put together would be a team never measured on dev (nor is a seat's leave-one-out value
        comparable across steps: it is measured against partners that changed). One team score keeps the
        selected checkpoints a team that was measured together."""
        self.state.best_score, self.state.best_ci = result.system.mean, list(result.system.ci)
        self.state.best_step = step
        self.state.evals_without_gain = 0
        for seat in self.seats:
            checkpoints.save_best(self.out / seat, self.models[seat], self.tokenizers[seat], "",
                                  self.member_settings(seat, step, result.system.mean))

    def save_state(self) -> None:
        """Commit the whole state after a step: every seat's ``last/`` (weights as an HF folder, optimiser,
        RNGs, the team's state) is written into ``out/.pending/<seat>/``; then the ``COMMIT`` file; then each is
        swapped into ``out/<seat>/last``. A kill before ``COMMIT`` leaves the previous step's state everywhere
        (the pending one is dropped on resume); a kill after it is finished on resume (:meth:`_finish_commit`).
        So the seats' states always belong to one step."""
        pending = self.out / ".pending"
        shutil.rmtree(pending, ignore_errors=True)
        state = {"team": asdict(self.state)}
        for seat in self.seats:
            checkpoints.save_state(pending / seat, self.models[seat], self.optimizers[seat], {**state, "seat": seat},
                                   self.rng, self.config.to_dict(), self.tokenizers[seat],
                                   self.member_settings(seat, self.state.step))
        checkpoints.commit_pending(self.out, self.seats, str(self.state.step))

    def try_resume(self) -> bool:
        """Restore every seat's weights and optimiser, the RNGs and the team's state from the last commit."""
        checkpoints.finish_commit(self.out, self.seats)
        saved: dict[str, dict[str, Any] | None] = {}
        for seat in self.seats:
            saved[seat] = checkpoints.load_state(self.out / seat, self.models[seat], self.optimizers[seat], self.rng,
                                                 self.config.to_dict())
        found = [s for s in self.seats if saved[s] is not None]
        if not found:
            return False
        steps = {s: saved[s]["team"]["step"] for s in found}  # type: ignore[index]
        if len(found) != len(self.seats) or len(set(steps.values())) != 1:
            raise ConfigError(f"{self.out}: the seats' saved states do not belong to one step ({steps}, none for "
                              f"{[s for s in self.seats if s not in found]}); use a fresh --out folder")
        self.state = TeamState(**saved[found[0]]["team"])  # type: ignore[index]
        self.log(f"resumed {self.config.method} from step {self.state.step}")
        return True

    def load_best(self) -> None:
        for seat in self.seats:
            checkpoints.load_best(self.out / seat, self.models[seat])

    def _keep_metrics_until(self, step: int) -> None:
        """Drop metric rows of steps after the last commit (a kill between writing a row and committing its
        step), so a resumed run's metrics.jsonl equals an uninterrupted one's."""
        rows = [r for r in self.metrics.rows() if r.get("step", 0) <= step]
        fresh = self.metrics.path.with_suffix(".jsonl.tmp")
        write_text(fresh, "".join(dumps(r) + "\n" for r in rows))
        fresh.replace(self.metrics.path)

    def seat_config(self, seat: str) -> dict[str, Any]:
        """The seat folder's config.json: the team's settings, plus ``policy`` and ``policy_name`` as a
        single-seat run folder has them (so ``training.export.pool_line`` reads a seat folder as a run)."""
        return {**self.config.to_dict(), "seat": seat, "policy": self.config.seat_policies[seat], "policy_name": seat}

    # -- the whole run -----------------------------------------------------------------------------------
    def fit(self, progress: bool = True) -> TeamState:
        cfg = self.config
        self.out.mkdir(parents=True, exist_ok=True)
        write_json(self.out / "config.json", cfg.to_dict())
        for seat in self.seats:
            (self.out / seat).mkdir(exist_ok=True)
            write_json(self.out / seat / "config.json", self.seat_config(seat))
        self.metrics = MetricsLog(self.out, cfg.tensorboard)
        if self.try_resume():
            self._keep_metrics_until(self.state.step)
        else:
            self.metrics.path.unlink(missing_ok=True)  # a run killed before its first commit starts over
            self.state.test_before = self.evaluate(self.test_items()).to_dict()  # the untrained team, never selected on
            result = self.evaluate(self.dev_items())
            self.record_best(result, step=0)
            self.metrics.write({"step": 0, **result.row(), "best": True})
        from tqdm.auto import tqdm

        bar = tqdm(total=cfg.steps, initial=self.state.step, desc=cfg.method, unit="step", disable=not progress)
        while self.state.step < cfg.steps and self.state.evals_without_gain < cfg.patience:
            row = self.train_step(self.state.step)
            self.state.step += 1
            row["step"] = self.state.step
            if self.state.step % cfg.eval_every == 0 or self.state.step == cfg.steps:
                result = self.evaluate(self.dev_items())
                row.update(result.row())
                if improves(result.system.mean, self.state.best_score, 1.0):
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

    def report(self) -> dict[str, Any]:
        """Score the last and then the best checkpoints on the test split (selection never saw it) beside the
        untrained team's test scores; write ``report.json`` and each seat's ``<seat>/report.json``."""
        cfg = self.config
        items = self.test_items()
        last = self.evaluate(items).to_dict()
        self.load_best()
        after = self.evaluate(items).to_dict()
        before = self.state.test_before or {}
        rows = self.metrics.rows()
        steps = [r for r in rows if "reward_mean" in r]

        def mean_of(key: str) -> float | None:
            values = [r[key] for r in steps if r.get(key) is not None]
            return float(np.mean(values)) if values else None

        signal = summarise_seats(rows, self.seats)
        moves = None
        if before and len(before["system"]["per_item"]) == len(after["system"]["per_item"]):
            rd = rescue_drag(before["system"]["per_item"], after["system"]["per_item"])
            moves = {"rescue": rd.rescue, "drag": rd.drag}
        weights = {s: policy_weights(p) for s, p in cfg.seat_policies.items()}
        seats = {}
        for seat in self.seats:
            seats[seat] = {
                "seat": seat, "policy": cfg.seat_policies[seat], "policy_weights": weights[seat],
                "best_step": self.state.best_step, "selected_by": "team dev system score",
                "before": before.get("seats", {}).get(seat), "after": after["seats"][seat], "last": last["seats"][seat],
                "signal": signal.get(seat, {}), "folder": str((self.out / seat).resolve())}
        result: dict[str, Any] = {
            "method": cfg.method, "seed": cfg.seed, "credit": cfg.credit, "seats": list(self.seats),
            "policies": dict(cfg.seat_policies), "members": list(self.members),
            "protocol": self.system.protocol.settings(), "best_step": self.state.best_step,
            "dev_at_best": {"mean": self.state.best_score, "ci": self.state.best_ci, "n": len(self.dev_items())},
            "steps_run": self.state.step, "eval_seed": self.eval_seed,
            "system": {"before": before.get("system"), "after": after["system"], "last": last["system"],
                       **({"vs_before": moves} if moves is not None else {})},
            "per_seat": {s: {k: seats[s][k] for k in ("before", "after", "last")} for s in self.seats},
            "counterfactual_cost": {"training": dict(self.state.cost), "test_after": after["cost"]},
            "seconds_per_step": {k.removesuffix("_seconds"): mean_of(k) for k in TIMING_KEYS},
            "signal": signal, "policy_weights": weights, "dev_scores": self.system.dev.record(),
            "config": cfg.to_dict(), "failures": self.failures.to_dict()}
        write_json(self.out / "report.json", result)
        for seat in self.seats:
            write_json(self.out / seat / "report.json", {**seats[seat], "method": cfg.method, "seed": cfg.seed,
                                                          "credit": cfg.credit, "members": list(self.members),
                                                          "protocol": result["protocol"], "eval_seed": self.eval_seed,
                                                          "team_report": str((self.out / "report.json").resolve())})
        return result


def train_team(config: TeamConfig, out: str | Path | None = None, options: Any = None,
               base_per_item: dict[str, list[float]] | None = None) -> dict[str, Any]:
    """The ``team-crl`` recipe's ``train``: fit ``config``'s seats into ``out`` and report them (``options``: a
    ``trainer.RunOptions``; ``base_per_item`` is accepted for the policy recipes' signature and unused: the
    report compares with the untrained team itself)."""
    progress = getattr(options, "progress", True)
    trainer = TeamTrainer(config, out=out)
    trainer.fit(progress=progress)
    report = trainer.report()
    failures = getattr(options, "failures", None)
    if failures is not None:
        failures.merge(trainer.failures)
    return report


def comparable_metrics(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Metric rows without their timings (the only numbers two runs of one configuration may differ in)."""
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]


__all__ = ["TeamTrainer", "TeamState", "TeamEval", "train_team", "build_team_system", "check_team", "team_protocol",
           "comparable_metrics", "COMMIT", "TIMING_KEYS"]
