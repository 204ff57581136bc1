"""PettingZoo ParallelEnv: every coalition member is an agent, acting whenever the protocol asks it.

At each step every agent that the protocol is asking gets its prompt as observation (text; the chat
messages are in ``info[agent]["messages"]``); the others observe ``""`` with ``info["asked"] = False``
and their actions are ignored. When a protocol asks one member several things in one wave (SLM-MUX
samples), they come one per step. Fixed helpers (ranker, fuser) are never agents: the pool's
backends answer them, and so do members listed in ``automated``. All agents share the system's
score as reward at the end (a cooperative game) and terminate together.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np
from pettingzoo import ParallelEnv

from ..agents.base import render_plain
from ..errors import ActionError, ConfigError, EpisodeStateError
from ..types import Sample
from .protocols import EpisodeContext
from .registration import protocol_of
from .runner import RunStats
from .seated import SeatedEpisode, final_infos, messages_info
from .spaces import UnicodeText
from .system import System, SystemSpec, system_source


class CollaborationParallelEnv(ParallelEnv):
    metadata = {"name": "coalition_gym_collaboration_v0", "render_modes": ["ansi"]}

    def __init__(self, system: System | SystemSpec | str | None = None, *, automated: Sequence[str] = (),
                 max_prompt_chars: int = 1 << 20, max_action_chars: int = 1 << 16, render_mode: str | None = None,
                 **spec: Any):
        """``system``: the System (or spec, or protocol name) whose members are the agents; else ``spec`` are
        a :class:`SystemSpec`'s fields and protocol settings."""
        source = system_source(system, spec)
        system = System.build(source) if isinstance(source, SystemSpec) else source
        unknown = [a for a in automated if a not in system.members]
        if unknown:
            raise ConfigError(f"automated member {unknown[0]!r} is not in the coalition {list(system.members)}")
        self.coalition = tuple(system.members)
        self.possible_agents = [m for m in self.coalition if m not in set(automated)]
        if not self.possible_agents:
            raise ConfigError("every member is automated: leave at least one member as an agent")
        # the agents are seats: answered from outside, in their pool prompt styles
        self.system = system.replace(seats={a: system.pool.styles.get(a, "chat")
                                                         for a in self.possible_agents})
        self.system.prepare()
        #: the automated members' dev scores on this task (agents are answered from outside: none)
        self.dev_scores = self.system.dev
        self.agents: list[str] = []
        self.render_mode = render_mode
        self._obs_space = UnicodeText(max_prompt_chars)
        self._act_space = UnicodeText(max_action_chars)
        self.stats = RunStats()
        self._episode: SeatedEpisode | None = None
        self._ctx: EpisodeContext | None = None
        self._seed_rng: np.random.Generator | None = None
        self._last: dict[str, str] = {}

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent: str) -> UnicodeText:
        return self._obs_space

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent: str) -> UnicodeText:
        return self._act_space

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None or self._seed_rng is None:
            self._seed_rng = np.random.default_rng(seed)
            for space in (self._obs_space, self._act_space):
                space.seed(None if seed is None else int(seed))
        item, episode_seed = self.system.draw(self._seed_rng, options or {})
        self._ctx = self.system.context(item, episode_seed)
        self._episode = SeatedEpisode(self.system.protocol.start(self._ctx), self.possible_agents,
                                      self.system.backends, self.stats)
        self.agents = list(self.possible_agents)
        if self._episode.done:  # nobody was asked: the episode is over before it began
            self.agents = []
        observations, infos = self._observe()
        return observations, infos

    def step(self, actions: dict[str, Any]):
        if self._episode is None:
            raise EpisodeStateError("step() before reset(): call reset() to start an episode")
        if not self.agents:
            raise EpisodeStateError("step() after the episode ended: call reset() to start a new one")
        asked = [a for a in self.agents if self._episode.pending(a) is not None]
        for agent in asked:
            if agent not in actions:
                raise ActionError(f"agent {agent!r} is being asked but got no action")
            if not isinstance(actions[agent], str):
                raise ActionError(f"agent {agent!r}: an action is a str reply, not {type(actions[agent]).__name__}")
        for agent in asked:
            self._episode.answer(agent, Sample(text=actions[agent]))
            if self._episode.done:
                break
        live = list(self.agents)
        if self._episode.done:
            # each agent's own answer next to the system's, all scored in one batch
            info = final_infos(self.system, [(self._ctx, self._episode)], live)[0]  # type: ignore[list-item]
            own = info.pop("own")
            reward = float(info["system_score"])
            self.agents = []
            self._last = {}
            observations = {a: "" for a in live}
            infos = {agent: {**info, "policy_answer": own[agent][0], "policy_score": own[agent][1]} for agent in live}
            return (observations, {a: reward for a in live}, {a: True for a in live},
                    {a: False for a in live}, infos)
        observations, infos = self._observe()
        return (observations, {a: 0.0 for a in live}, {a: False for a in live},
                {a: False for a in live}, infos)

    def render(self) -> str:
        return "\n\n".join(f"== {a} ==\n{o}" for a, o in self._last.items() if o) or "[nobody is asked]"

    def close(self) -> None:
        self._episode = None

    def _observe(self) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        assert self._episode is not None and self._ctx is not None
        observations: dict[str, str] = {}
        infos: dict[str, dict[str, Any]] = {}
        limit = self._obs_space.max_length
        for agent in self.agents:
            ask = self._episode.pending(agent)
            infos[agent] = {"item_id": self._ctx.item.id, "asked": ask is not None}
            if ask is None:
                observations[agent] = ""
                continue
            text = render_plain(ask.messages)
            observations[agent] = text[-limit:]
            infos[agent].update(messages=messages_info(ask), round=ask.round, role=ask.role)
        self._last = observations
        return observations, infos


def parallel_env(env_id_or_protocol: str = "coalition_gym/Debate-v0", **kwargs: Any) -> CollaborationParallelEnv:
    """The PettingZoo view of a registered env id (or a protocol name), same keyword arguments."""
    return CollaborationParallelEnv(protocol=protocol_of(env_id_or_protocol), **kwargs)
