"""CollaborationVectorEnv: ``num_envs`` episodes of one protocol stepped together.

Every sub-environment is a :class:`CollaborationEnv`-style episode with one policy seat. After the
policy's actions are given, the collaborators' Asks of *all* sub-environments go to the backends in
one batched call per backend per wave (:func:`.seated.drive`), which is where the speed comes from
with real models. Autoreset follows Gymnasium's default ``NEXT_STEP`` mode: the step after a
sub-environment terminates resets it (its action is ignored, reward 0) and returns the new first
observation. ``gym.make_vec(id, num_envs=n)`` builds this class for every registered id.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ..agents.base import render_plain
from ..errors import ActionError, ConfigError
from ..types import Sample
from .gym_env import CollaborationEnv
from .protocols import EpisodeContext
from .seated import SeatedEpisode, drive, final_infos
from .spaces import UnicodeText


class CollaborationVectorEnv(VectorEnv):
    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, **env_kwargs: Any):
        if num_envs < 1:
            raise ConfigError(f"num_envs={num_envs} must be >= 1")
        env_kwargs.pop("max_episode_steps", None)
        # One template env holds the system (protocol, task, pool) that every sub-environment shares.
        self.template = CollaborationEnv(**env_kwargs)
        self.num_envs = num_envs
        self.single_observation_space: UnicodeText = self.template.observation_space
        self.single_action_space = self.template.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.stats = self.template.stats
        self._episodes: list[SeatedEpisode | None] = [None] * num_envs
        self._contexts: list[EpisodeContext | None] = [None] * num_envs
        self._needs_reset = np.zeros(num_envs, dtype=bool)

    # -- sub-episode lifecycle ------------------------------------------------------------------
    def _start(self, i: int, options: dict[str, Any]) -> None:
        env = self.template
        ctx = env.system.context(*env.system.draw(self.np_random, options))
        self._contexts[i] = ctx
        self._episodes[i] = SeatedEpisode(env.system.protocol.start(ctx), [env.policy_name], None, self.stats)

    def _observation(self, i: int) -> tuple[str, dict[str, Any]]:
        episode, ctx = self._episodes[i], self._contexts[i]
        assert episode is not None and ctx is not None
        ask = episode.pending(self.template.policy_name)
        info: dict[str, Any] = {"item_id": ctx.item.id, "policy_asked": ask is not None}
        if ask is None:
            return "", info
        info.update(round=ask.round, role=ask.role)
        return render_plain(ask.messages)[-self.single_observation_space.max_length:], info

    def _collect(self, indices: Sequence[int], rewards: np.ndarray, terminated: np.ndarray
                 ) -> tuple[tuple[str, ...], dict[str, Any]]:
        observations = [""] * self.num_envs
        infos: dict[str, Any] = {}
        policy = self.template.policy_name
        ending = [i for i in indices if self._episodes[i].done and not self._needs_reset[i]]  # type: ignore[union-attr]
        finished: list[Any] = [(self._contexts[i], self._episodes[i]) for i in ending]
        finals = dict(zip(ending, final_infos(self.template.system, finished, [policy])))
        for i in range(self.num_envs):
            if i in finals:  # every ending episode's answers were scored in one batch
                info = finals[i]
                info["policy_answer"], info["policy_score"] = info.pop("own")[policy]
                info.pop("transcript", None)  # kept out of the batched info: arrays of lists are unwieldy
                info.pop("details", None)
                rewards[i], terminated[i] = info["system_score"], True
                self._needs_reset[i] = True
            else:
                observations[i], info = self._observation(i)
            infos = self._add_info(infos, info, i)
        return tuple(observations), infos

    # -- gymnasium vector API -----------------------------------------------------------------------
    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None):
        if seed is not None:  # one generator drives every sub-environment's item and episode seed
            self._np_random, self._np_random_seed = seeding.np_random(seed if isinstance(seed, int) else int(seed[0]))
        options = options or {}
        for i in range(self.num_envs):
            self._start(i, options)
            self._needs_reset[i] = False
        drive([e for e in self._episodes if e is not None], self.template.system.backends, self.stats)
        observations, infos = self._collect([], np.zeros(self.num_envs), np.zeros(self.num_envs, dtype=bool))
        return observations, infos

    def step(self, actions: Sequence[str]):
        if len(actions) != self.num_envs:
            raise ActionError(f"got {len(actions)} actions for {self.num_envs} sub-environments")
        policy = self.template.policy_name
        stepped = []
        for i, action in enumerate(actions):
            episode = self._episodes[i]
            if episode is None:
                raise ActionError("step() before reset(): call reset() first")
            if self._needs_reset[i]:  # NEXT_STEP autoreset: this step only starts a new episode
                self._start(i, {})
                self._needs_reset[i] = False
                continue
            if not isinstance(action, str):
                raise ActionError(f"sub-environment {i}: an action is a str reply, not {type(action).__name__}")
            if episode.pending(policy) is not None:
                episode.answer(policy, Sample(text=action))
            stepped.append(i)
        drive([e for e in self._episodes if e is not None], self.template.system.backends, self.stats)
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=bool)
        observations, infos = self._collect(stepped, rewards, terminated)
        return observations, rewards, terminated, np.zeros(self.num_envs, dtype=bool), infos

    def close_extras(self, **kwargs: Any) -> None:
        self.template.close()
