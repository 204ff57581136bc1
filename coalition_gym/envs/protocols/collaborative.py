"""The collaborative-training family: methods that *train* the coalition's members before answering.

A coalition S is worth what S's members answer after the method trained copies of them on the task's
train split (the originals are never touched). These classes hold the settings and the evaluation
program; the training itself lives in :mod:`coalition_gym.training.collaborative`, and
``TrainedCoalitionGame`` runs one after the other for every coalition. They have no environment id:
an episode cannot train its members (``cgym envs`` does not list them; ``cgym eval`` values them).

- **Sparta alignment** (Jiang et al. 2025): members answer in pairs, the others judge, reputations move
  Elo-style, everyone is trained by DPO on the judged preferences; after the last iteration the best
  checkpoint on dev, whichever member and iteration it is, answers alone.
- **Multi-agent finetuning** (Subramaniam et al. 2025): members debate; each is fine-tuned on its own
  debate turns that agree with the final majority; at test time the fine-tuned members debate again
  and the majority answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...errors import ConfigError
from ...types import Outcome
from .base import EpisodeContext, ProgramGen, Protocol, answer_independently
from .debate import Debate

JUDGE_MODES = ("auto", "prompt", "likelihood")


@dataclass
class TrainingSettings:
    """Settings every collaborative-training method has (the data and the optimiser). Listed first among a
    method's bases, its class attributes mark the method as training its members (two at least)."""

    min_members: ClassVar[int] = 2
    trains_members: ClassVar[bool] = True

    iterations: int = 1
    train_items: int = 500  # items of the task's train split used as training prompts, per iteration
    dev_items: int = 100  # items of the dev split for checkpoint selection (Sparta) and dev scores
    learning_rate: float = 1e-5
    epochs: int = 1
    batch_size: int = 16

    def check_training_settings(self, name: str) -> None:
        for key in ("iterations", "train_items", "dev_items", "epochs", "batch_size"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{name}: {key}={getattr(self, key)} must be >= 1")
        if not self.learning_rate > 0:
            raise ConfigError(f"{name}: learning_rate={self.learning_rate} must be > 0")


@dataclass
class SpartaAlignment(TrainingSettings, Protocol):
    name: ClassVar[str] = "sparta"
    description: ClassVar[str] = ("Sparta alignment: members duel, peers judge, reputation-weighted DPO; the best "
                                  "checkpoint on dev answers")

    iterations: int = 3
    learning_rate: float = 1e-6  # the reference DPO learning rate (7B models); tiny CPU models need more
    beta: float = 0.1  # DPO temperature
    random_match_prob: float = 0.2  # P(a random opponent) instead of one of the closest in reputation
    num_opponents: int = 3  # how many closest-reputation members an opponent is drawn from
    judge: str = "auto"  # prompt: the judge writes a 1-10 score; likelihood: 1 + 9 * its mean token prob
    initial_k: float = 10.0  # reputation step size, decayed to min_k
    min_k: float = 5.0
    decay_rate: float = 0.9
    decay_steps: int = 10
    scaling_factor: float = 20.0
    window: int = 10  # recent reputation changes whose spread is a member's deviation
    min_deviation: float = 0.1
    epsilon: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_training_settings(self.name)
        if self.judge not in JUDGE_MODES:
            raise ConfigError(f"sparta: judge={self.judge!r}; use one of {', '.join(JUDGE_MODES)}")
        if not 0.0 <= self.random_match_prob <= 1.0:
            raise ConfigError(f"sparta: random_match_prob={self.random_match_prob} must be in [0, 1]")
        for key in ("beta", "initial_k", "min_k", "scaling_factor", "min_deviation", "epsilon"):
            if not getattr(self, key) > 0:
                raise ConfigError(f"sparta: {key}={getattr(self, key)} must be > 0")
        for key in ("num_opponents", "decay_steps", "window"):
            if getattr(self, key) < 1:
                raise ConfigError(f"sparta: {key}={getattr(self, key)} must be >= 1")
        if not 0.0 < self.decay_rate <= 1.0:
            raise ConfigError(f"sparta: decay_rate={self.decay_rate} must be in (0, 1]")

    def program(self, ctx: EpisodeContext) -> ProgramGen:
        """Evaluation: the coalition is the one selected checkpoint, which answers alone."""
        if len(ctx.members) != 1:
            raise ConfigError(f"sparta answers with its one selected checkpoint, got members {list(ctx.members)}")
        _, transcript = yield from answer_independently(ctx, self.params)
        return Outcome(answer=transcript[0].answer, text=transcript[0].text, transcript=tuple(transcript))

    def start(self, ctx: EpisodeContext) -> ProgramGen:
        # The evaluation coalition has one member even though training needed two: skip the size check.
        return self.program(ctx)


@dataclass
class MultiagentFinetuning(TrainingSettings, Debate):
    name: ClassVar[str] = "multiagent_finetuning"
    description: ClassVar[str] = ("Multi-agent finetuning: members debate, each is fine-tuned on its turns that "
                                  "agree with the majority; the fine-tuned members debate")

    rounds: int = 2  # the reference's debate length (round 0 answers, round 1 critiques)
    fixed_weight: float = 0.5  # loss weight of critique turns that fixed a wrong first answer (1 - it: stayed right)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_training_settings(self.name)
        if not 0.0 <= self.fixed_weight <= 1.0:
            raise ConfigError(f"multiagent_finetuning: fixed_weight={self.fixed_weight} must be in [0, 1]")


TRAINING_PROTOCOLS: tuple[type[Protocol], ...] = (SpartaAlignment, MultiagentFinetuning)


def check_episodic(protocol: "Protocol | type[Protocol]") -> None:
    """Refuse a collaborative-training method where episodes are asked for (environments, ``cgym run``,
    a C-RL trainer): training the members is not something one episode can do."""
    if protocol.trains_members:
        raise ConfigError(f"protocol {protocol.name!r} trains its members before answering, so it has no episodes "
                          f"and no environment; value it with `cgym eval --protocol {protocol.name}` "
                          "(or TrainedCoalitionGame in Python)")
