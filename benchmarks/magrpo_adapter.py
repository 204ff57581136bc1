"""CoMLRL's ``MAGRPOTrainer`` on this project's protocols: a reward function that seats the K agents'
completions in *our* protocol (the same System: protocol, task item, frozen collaborators and their seeds)
and returns the system's score. Benchmark code only (``pip install -e '.[bench]'`` brings comlrl 1.4.3);
the package never imports it.

How the two fit together (comlrl 1.4.3, ``comlrl/trainers/reinforce/magrpo.py``):

- MAGRPO trains one dataset row per call: every agent samples ``num_generations`` (G) completions of its
  own prompt (``formatters[i](row)``, tokenised as plain text: we hand it the exact text our HF backend
  renders for that seat, chat template and BOS included), then ``reward_func`` is called once per joint
  completion j (aligned mode: agent i's j-th completion with agent k's j-th) as
  ``reward_func(*[[c_0], ..., [c_K-1]], batch_items=[row])`` and returns ``[score]``.
- Advantages per agent: return - mean over the G joint completions, normalised by their std; loss
  ``-sum(log p(completion)) * advantage`` (no ratio, no clipping), one AdamW step per agent every
  ``rollout_buffer_size`` rows. We set that to ``items_per_step``, so one MAGRPO optimiser step sees the
  same items x G executions as one step of ours.
- Common random numbers: the G joint completions of one row face the same frozen-collaborator draws (the
  episode seed depends on the row's item and how many times it was drawn, never on the completion), as our
  ``collaborator_draws="shared"`` does.

:class:`SystemReward` is the reward (and the formatters and the dataset); :class:`TimedMAGRPO` is the
trainer with its generation, reward and update seconds measured apart.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Mapping, Sequence

from coalition_gym.agents.base import stable_hash
from coalition_gym.agents.cache import GenerationCache
from coalition_gym.envs.executors import wrap_with_cache
from coalition_gym.envs.runner import ProgramFailed
from coalition_gym.envs.seated import SeatedEpisode, own_answer_of
from coalition_gym.envs.system import System
from coalition_gym.errors import ConfigError
from coalition_gym.types import Item, Sample


class SystemReward:
    """MAGRPO's reward: the K agents' completions seated as ``seats`` (in agent order) in ``system``.

    ``system`` has the frozen collaborators in its pool and the seats in its coalition (``system.seats``);
    ``tokenizers`` (seat -> tokenizer) render each seat's prompt as our HF backend does; ``seed``: the run's
    seed (episode seeds derive from it, the item and the row's draw count)."""

    def __init__(self, system: System, seats: Sequence[str], tokenizers: Mapping[str, Any], seed: int):
        missing = [s for s in seats if s not in system.seats]
        if missing:
            raise ConfigError(f"seats {missing} are not seats of the system ({list(system.seats)})")
        self.system, self.seats, self.seed = system, list(seats), seed
        self.tokenizers = dict(tokenizers)
        self.backends = wrap_with_cache(system.backends, GenerationCache(None))  # collaborators: drawn once a group
        self.items: dict[str, Item] = {}
        self.draws: Counter[str] = Counter()  # rows of each item started so far (a new group each time)
        self.reward_seconds = 0.0
        self.calls = 0
        self.solo: dict[str, list[float]] = {s: [] for s in self.seats}  # each seat's own answer, scored alone
        self.__name__ = f"system_score_{system.protocol.name}"

    def dataset(self, items: Sequence[Item]) -> Any:
        """One row per item, in order (MAGRPO walks its dataset in order, one row per call)."""
        from datasets import Dataset

        for it in items:
            self.items[it.id] = it
        return Dataset.from_list([{"item_id": it.id, "prompt": ""} for it in items])

    def _episode_seed(self, item_id: str) -> int:
        return stable_hash("magrpo", self.seed, item_id, self.draws[item_id]) % 2**31

    def _episode(self, item_id: str) -> SeatedEpisode:
        item = self.items[item_id]
        return SeatedEpisode(self.system.start(item, self._episode_seed(item_id)), self.seats, self.backends)

    def formatters(self) -> list[Any]:
        """One formatter per agent: the text our HF backend feeds that seat for the row's item. Agent 0's
        formatter is called once per row, first: it opens the row's group (a new collaborator draw)."""

        def make(k: int, seat: str) -> Any:
            def formatter(row: Mapping[str, Any]) -> str:
                if k == 0:
                    self.draws[row["item_id"]] += 1
                ask = self._episode(row["item_id"]).pending(seat)
                if ask is None:
                    raise ConfigError(f"protocol {self.system.protocol.name!r} does not ask seat {seat!r} in its first "
                                      "wave; MAGRPO's single-turn rollouts need a one-shot protocol (majority_vote)")
                chat = [{"role": m.role, "content": m.content} for m in ask.messages]
                return self.tokenizers[seat].apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
            return formatter

        return [make(k, s) for k, s in enumerate(self.seats)]

    def score(self, item_id: str, texts: Sequence[str]) -> float:
        """The system score with ``texts`` (one per seat, in seat order) as the seats' replies."""
        item = self.items[item_id]
        episode = self._episode(item_id)
        for seat, text in zip(self.seats, texts):
            if episode.pending(seat) is not None:
                episode.answer(seat, Sample(text=text))
        if not episode.done:
            raise ConfigError(f"protocol {self.system.protocol.name!r} asked a seat more than once; the MAGRPO "
                              "adapter supports one-shot protocols only")
        outcome = episode.outcome
        task = self.system.task
        for seat, text in zip(self.seats, texts):
            own = own_answer_of(task, item, [("answer", 0, text)])
            self.solo[seat].append(task.score_batch([own], [item])[0].score)
        if outcome is None or isinstance(outcome, ProgramFailed):
            return 0.0
        return task.score_batch([outcome.answer], [item])[0].score

    def __call__(self, *completions: Sequence[str], batch_items: Sequence[Mapping[str, Any]] | None = None,
                 **_: Any) -> list[float]:
        if batch_items is None or len(completions) != len(self.seats):
            raise ConfigError(f"MAGRPO called the reward with {len(completions)} agents' completions and "
                              f"batch_items={batch_items is not None}; expected {len(self.seats)} and batch_items")
        start = time.perf_counter()
        self.calls += 1
        texts = [c[0] if isinstance(c, (list, tuple)) else c for c in completions]
        reward = self.score(batch_items[0]["item_id"], [str(t) for t in texts])
        self.reward_seconds += time.perf_counter() - start
        return [reward]


def timed_magrpo() -> type:
    """``MAGRPOTrainer`` with generation and update seconds measured (comlrl imported here, on use)."""
    from comlrl.trainers.reinforce import MAGRPOTrainer

    class TimedMAGRPO(MAGRPOTrainer):
        generate_seconds = 0.0
        update_seconds = 0.0
        optimiser_steps = 0

        def _generate_completions(self, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return super()._generate_completions(*args, **kwargs)
            finally:
                self.generate_seconds += time.perf_counter() - start

        def _update_from_samples(self, agent_idx: int, samples: list) -> None:
            start = time.perf_counter()
            try:
                super()._update_from_samples(agent_idx, samples)
            finally:
                self.update_seconds += time.perf_counter() - start
                if agent_idx == 0 and samples:
                    self.optimiser_steps += 1

    return TimedMAGRPO


def train_magrpo(system: System, seats: Sequence[str], models: Mapping[str, tuple[Any, Any]], items: Sequence[Item],
                 settings: Mapping[str, Any]) -> dict[str, Any]:
    """Train the seats' ``models`` (seat -> (model, tokenizer), changed in place) with MAGRPO on ``items``
    (``steps * items_per_step`` rows), with ``settings``: seed, lr, group_size, items_per_step,
    max_new_tokens, temperature. Returns the timings and the reward's counters."""
    from comlrl.trainers.reinforce import MAGRPOConfig

    reward = SystemReward(system, seats, {s: models[s][1] for s in seats}, settings["seed"])
    args = MAGRPOConfig(num_train_epochs=1, agent_learning_rate=settings["lr"], num_agents=len(seats),
                        num_generations=settings["group_size"], max_new_tokens=settings["max_new_tokens"],
                        temperature=settings["temperature"], top_p=1.0, top_k=0,  # full softmax, as ours samples
                        num_turns=1, eval_interval=0, eval_num_samples=0, logging_steps=1,
                        rollout_buffer_size=settings["items_per_step"], train_batch_size=settings["items_per_step"],
                        agent_devices="cpu")
    trainer = timed_magrpo()(agents=[models[s][0] for s in seats], num_agents=len(seats),  # sizes its formatters
                             tokenizer=[models[s][1] for s in seats],
                             reward_func=reward, formatters=reward.formatters(), args=args,
                             train_dataset=reward.dataset(items), wandb_config=None)
    trainer.verbose = False
    start = time.perf_counter()
    trainer.train()
    total = time.perf_counter() - start
    for s in seats:
        models[s][0].eval()
    return {"seconds": total, "generate_seconds": trainer.generate_seconds, "reward_seconds": reward.reward_seconds,
            "update_seconds": trainer.update_seconds, "optimiser_steps": trainer.optimiser_steps,
            "reward_calls": reward.calls, "solo_during_training": {s: (sum(v) / len(v) if v else None)
                                                                   for s, v in reward.solo.items()}}


__all__ = ["SystemReward", "timed_magrpo", "train_magrpo"]
