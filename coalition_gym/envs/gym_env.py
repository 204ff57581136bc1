"""CollaborationEnv: a Gymnasium environment with one policy seat inside a collaboration protocol.

Environments are for training, so they draw items from the task's *train* split by default
(``split="train"``); pass ``split="test"`` to evaluate (``cgym run``/``cgym eval`` and the reports
use test by default). A held-out, evaluation-only task (HumanEval) needs ``split="test"``.

``reset()`` draws an item and runs the frozen collaborators until the policy is asked; the
observation is the policy's prompt as plain text (the chat messages are in ``info["messages"]``).
``step(text)`` feeds the policy's reply and runs on until the policy is asked again or the protocol
ends. The reward is the *system's* score at the end and 0 before. The final ``info`` also carries the
policy's own answer and its score, so solo and system outcomes can be compared.

The policy sits after the frozen members (coalition order matters for "first" tie-breaks and for
the A/B order of pairwise rankings). With ``helper_seat="ranker"`` (or "fuser", "router" ...) the
policy instead takes the decisions of that fixed helper and the coalition is the frozen members
alone: the way to train a router or a ranker. If a protocol ends without ever asking the policy, ``reset``
returns an empty observation with ``info["policy_asked"] = False`` and the next step, whatever its
action, ends the episode with the system's reward.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym

from ..agents.base import render_plain
from ..errors import ActionError, ConfigError, EpisodeStateError
from ..tasks.base import check_style
from ..types import Ask, Sample
from .protocols import EpisodeContext, make_protocol
from .runner import RunStats
from .seated import SeatedEpisode, final_infos, messages_info
from .spaces import UnicodeText
from .system import System, SystemSpec, seated_system, system_source


class CollaborationEnv(gym.Env[str, str]):
    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(self, system: System | SystemSpec | str | None = None, *, policy_name: str = "policy",
                 policy_style: str = "chat", helper_seat: str | None = None, max_prompt_chars: int = 1 << 20,
                 max_action_chars: int = 1 << 16, render_mode: str | None = None, **spec: Any):
        """``system``: the System (or spec, or protocol name) the policy plays in; else ``spec`` are a
        :class:`SystemSpec`'s fields and protocol settings (what ``gym.make(env_id, **kwargs)`` passes)."""
        check_style(policy_style)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode={render_mode!r}; use one of {self.metadata['render_modes']} or None")
        source = system_source(system, spec)
        if helper_seat is None:
            self.policy_name = policy_name
            self.system = seated_system(source, {policy_name: policy_style})
        else:  # the policy takes a fixed helper's decisions (router, ranker, fuser ...); members stay frozen
            proto = source.protocol if isinstance(source, System) else make_protocol(
                source.protocol, **dict(source.protocol_settings))
            if helper_seat not in proto.helper_fields or not getattr(proto, helper_seat):
                raise ConfigError(f"helper_seat={helper_seat!r}: protocol {proto.name!r} has "
                                  f"helpers {list(proto.helper_fields) or 'none'}")
            self.policy_name = getattr(proto, helper_seat)
            self.system = seated_system(source, {self.policy_name: policy_style}, in_coalition=False)
        self.coalition = tuple(self.system.members)
        self.styles = self.system.styles
        # what a method learns before episodes (a trained router's dev outcomes) is learned now, once
        self.system.prepare()
        #: the frozen members' dev scores on this task (measured once when the protocol needs them)
        self.dev_scores = self.system.dev
        self.observation_space: UnicodeText = UnicodeText(max_prompt_chars)
        self.action_space: UnicodeText = UnicodeText(max_action_chars)
        self.render_mode = render_mode
        self.stats = RunStats()
        self._episode: SeatedEpisode | None = None
        self._ctx: EpisodeContext | None = None
        self._finished = False
        self._last_obs = ""

    # -- gymnasium API --------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        item, episode_seed = self.system.draw(self.np_random, options or {})
        self._ctx = self.system.context(item, episode_seed)
        program = self.system.protocol.start(self._ctx)
        self._episode = SeatedEpisode(program, [self.policy_name], self.system.backends, self.stats)
        self._finished = False
        return self._observe()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._episode is None:
            raise EpisodeStateError("step() before reset(): call reset() to start an episode")
        if self._finished:
            raise EpisodeStateError("step() after the episode ended: call reset() to start a new one")
        if not isinstance(action, str):
            raise ActionError(f"an action is the policy's reply as a str, not {type(action).__name__}")
        if len(action) > self.action_space.max_length:
            raise ActionError(f"action of {len(action)} characters exceeds max_action_chars="
                              f"{self.action_space.max_length}; raise it in gym.make(...)")
        if self._episode.pending(self.policy_name) is not None:
            self._episode.answer(self.policy_name, Sample(text=action))
        if not self._episode.done:
            obs, info = self._observe()
            return obs, 0.0, False, False, info
        self._finished = True
        assert self._ctx is not None  # set by reset, with the episode
        info = final_infos(self.system, [(self._ctx, self._episode)], [self.policy_name])[0]
        info["policy_answer"], info["policy_score"] = info.pop("own")[self.policy_name]
        self._last_obs = ""
        if self.render_mode == "human":
            self.render()
        return "", float(info["system_score"]), True, False, info

    @property
    def pending_ask(self) -> Ask | None:
        """The structured request behind the current observation (role, round, item, peers' answers),
        for policies that want more than the rendered prompt; None when the policy is not asked. Its
        item is the policy's view (``Item.for_policy``: no gold answer, no scorer data). On what
        ``gym.make`` returns, read it as ``env.get_wrapper_attr("pending_ask")`` (Gymnasium 1.x
        wrappers do not forward attributes)."""
        ask = self._episode.pending(self.policy_name) if self._episode is not None else None
        if ask is None or ask.item is None:
            return ask
        return dataclasses.replace(ask, item=ask.item.for_policy())

    @property
    def episode_seed(self) -> int | None:
        """The current episode's seed (what ``reset(options={"episode_seed": ...})`` replays), None before reset."""
        return None if self._ctx is None else self._ctx.seed

    def render(self) -> str | None:
        text = self._last_obs if not self._finished else "[episode finished]"
        if self.render_mode == "human":
            print(text)
            return None
        return text

    # -- helpers ----------------------------------------------------------------------------------
    def _observe(self) -> tuple[str, dict[str, Any]]:
        assert self._episode is not None and self._ctx is not None
        ask = self._episode.pending(self.policy_name)
        info: dict[str, Any] = {"item_id": self._ctx.item.id, "policy_asked": ask is not None}
        if ask is None:  # the protocol ended without asking the policy
            self._last_obs = ""
            return "", info
        obs = render_plain(ask.messages)
        limit = self.observation_space.max_length
        info.update(messages=messages_info(ask), round=ask.round, role=ask.role,
                    prompt_clipped=len(obs) > limit)
        self._last_obs = obs[-limit:]
        if self.render_mode == "human":
            self.render()
        return self._last_obs, info

