"""A coalition-gym system as a verifiers environment: the policy seat is its one trainable agent.

``load_environment(env_id, pool=..., task=..., split=..., n_items=..., seed=..., **protocol_settings)`` returns a
``verifiers.v1`` environment (verifiers 0.4's multi-agent API: an ``Env`` whose roles are agents with a
``trainable`` flag). Its one role, ``policy``, is answered by whatever model verifiers points it at (``vf-eval``'s
``--model``, prime-rl's inference server); the frozen members and helpers run inside the environment, on the
pool's backends. The same environment loads by plugin id, the way ``vf-eval`` and prime-rl load environments::

    vf-eval coalition-gym-verifiers --env.taskset.env-id coalition_gym/Debate-v0 \\
        --env.taskset.pool zoo:default --env.taskset.task-name zoo:arith --env.taskset.settings '{"rounds": 2}'

Tasks are the items of the split; a task's prompt is the policy's first prompt (the item's question in the
policy's prompt style, from :meth:`~coalition_gym.types.Item.for_policy`: no gold answer, no scorer data), its
id the item id. An episode is a :class:`~coalition_gym.training.seat_driver.SeatDriver` episode (the driver every
wire shares): each time the protocol asks the policy (every round of a debate, feedback or Mixture-of-Agents), the
environment runs the policy agent once on that prompt (a fresh conversation, as the in-process seat gets it) and
hands its reply back. Each policy turn's trace then carries the reward ``system_score`` (the system's score, the
same for every turn of the episode) and the metrics ``policy_score`` (its own answer's score), ``parsed`` and
``credit_loo/<member>`` (leave-one-out credit, see ``seat_driver``). Scoring happens inside the environment: the
gold answer never reaches the policy, its prompts or the tasks' data.

Concurrent rollouts (``vf-eval -c N``, prime-rl's batches) share waves: the driver is batched, so the frozen
members' requests of all running episodes go to each backend in one call per wave, as a server's sessions do.

The policy's sampling is verifiers' (the run's ``sampling``: verifiers imposes it on every model call), not the
protocol's; the episode seeds follow the project's rule, so with the same model in the seat and the same
sampling the rewards are the system scores ``cgym run``/``cgym eval`` measure on the same items and seed. All
``-r`` rollouts of one task face the same collaborator draws (common random numbers).

Why the multi-agent ``Env`` and no stable multi-turn env: verifiers 0.4 ships only the v1 API; its ``Env.run``
is exactly the control flow a protocol needs (the environment decides when the one trainable agent speaks and
what it is asked), and the policy's turns are real agent runs whose traces prime-rl trains on. The turns go
through :class:`SeatHarness`, an in-process chat call through verifiers' interception endpoint (so every model
call is recorded on the trace), not a program launched in a sandbox.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import verifiers.v1 as vf
from pydantic import Field, ValidationError
from verifiers.v1.dialects.chat import message_to_wire
from verifiers.v1.runtimes import ProgramResult, SubprocessConfig

from ..agents.pools import DEFAULT_POOL, check_pool_name
from ..envs.registration import protocol_of, register_envs
from ..envs.runner import episode_seed
from ..envs.seated import messages_info
from ..envs.system import SystemSpec
from ..errors import ConfigError
from ..tasks import DEFAULT_TASK
from ..tasks.base import SPLITS
from ..training.seat_driver import SeatDriver, SeatRecord

#: the plugin id verifiers resolves (the ``coalition_gym_verifiers`` package re-exports this module's classes)
PLUGIN_ID = "coalition-gym-verifiers"
REWARD = "system_score"


class CoalitionTasksetConfig(vf.TasksetConfig):
    """Which system the policy plays in: a coalition-gym env id (or protocol name), the pool (a preset name
    or a pool file), the task, its split and first ``n_items``, the run ``seed``, the policy's seat name and
    prompt style, the protocol ``settings`` and whether to compute leave-one-out ``credit``."""

    id: str = PLUGIN_ID
    env_id: str = "coalition_gym/Debate-v0"
    pool: str = DEFAULT_POOL
    members: list[str] | None = None
    task_name: str = DEFAULT_TASK
    task_kwargs: dict[str, Any] = Field(default_factory=dict)
    split: str = "train"
    n_items: int | None = Field(None, ge=1)
    seed: int = 0
    policy_name: str = "policy"
    policy_style: str = "chat"
    credit: bool = True
    settings: dict[str, Any] = Field(default_factory=dict)

    def spec(self) -> SystemSpec:
        register_envs()
        return SystemSpec(protocol_of(self.env_id), self.task_name, self.pool, self.members, self.split,
                          dict(self.task_kwargs), dict(self.settings), self.n_items)


class CoalitionTask(vf.Task):
    """One item (or one policy turn of its episode); keyed by the item id."""

    @property
    def key(self) -> str:
        return self.data.id or self.hash


class CoalitionTaskset(vf.Taskset[CoalitionTask, CoalitionTasksetConfig]):
    """The split's items as tasks; builds the system (and its batched :class:`SeatDriver`) once."""

    def __init__(self, config: CoalitionTasksetConfig) -> None:
        super().__init__(config)
        self.driver = SeatDriver(config.spec(), policy_name=config.policy_name, policy_style=config.policy_style,
                                 batched=True)

    def load(self):
        for item in self.driver.items:
            yield CoalitionTask(vf.TaskData(id=item.id, prompt=self.driver.first_prompt(item)), self.config.task)


class SeatHarnessConfig(vf.HarnessConfig):
    id: str = PLUGIN_ID


class SeatHarness(vf.Harness[SeatHarnessConfig]):
    """One chat completion on the task's messages, sent in-process to the rollout's interception endpoint
    (which applies the run's model and sampling and records the call on the trace)."""

    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data,
                     tool_interception_url=None) -> ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages = [{"role": "system", "content": system}] if system else []
        messages += [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [
            message_to_wire(m) for m in prompt or []]
        async with httpx.AsyncClient(timeout=httpx.Timeout(None, connect=30.0)) as client:
            resp = await client.post(f"{endpoint.rstrip('/')}/chat/completions",
                                     json={"model": ctx.model, "messages": messages},
                                     headers={"Authorization": f"Bearer {secret}"})
        if resp.status_code != 200:
            return ProgramResult(1, "", f"chat completion failed: HTTP {resp.status_code}: {resp.text[:500]}")
        return ProgramResult(0, "", "")


class CoalitionEnvConfig(vf.EnvConfig):
    taskset: CoalitionTasksetConfig = CoalitionTasksetConfig()
    policy: vf.AgentConfig = vf.AgentConfig(runtime=SubprocessConfig())


class CoalitionEnv(vf.Env[CoalitionEnvConfig]):
    """The protocol's episodes with the policy as the one trainable agent (see the module doc)."""

    def __init__(self, config: CoalitionEnvConfig) -> None:
        super().__init__(config)
        self.driver: SeatDriver = self.taskset.driver  # type: ignore[attr-defined]
        self.seed, self.credit = config.taskset.seed, config.taskset.credit
        self._records: dict[str, SeatRecord] = {}  # trace id -> its episode's record, until finalize

    async def setup(self, agents) -> None:
        agents.policy.trainable = True

    async def run(self, task, agents) -> None:
        driver = self.driver
        item = driver.system.item(task.data.id)
        run = driver.begin(item, episode_seed(self.seed, item))  # the item's seed: -r rollouts share their draws
        traces = []
        try:
            await driver.advance_async(run)
            while not run.done:
                ask = driver.pending(run)
                assert ask is not None  # a live seated episode waits for its seat
                turn = CoalitionTask(vf.TaskData(id=task.data.id, prompt=messages_info(ask)), task.config)
                trace = await agents.policy.run(turn)
                if not trace.ok:
                    error = trace.last_error
                    raise RuntimeError(f"the policy's turn failed: {error.type}: {error.message}" if error
                                       else "the policy's turn failed")
                traces.append(trace)
                driver.give(run, reply_text(trace))
                await driver.advance_async(run)
        finally:
            driver.close(run)  # a failed turn abandons the episode: waves stop waiting for it
        if not traces:
            raise RuntimeError(f"protocol {driver.system.protocol.name!r} ended item {task.data.id!r} without "
                               "asking the policy: nothing to train on")
        record = await asyncio.to_thread(driver.record, run, self.credit)
        for trace in traces:
            self._records[trace.id] = record

    async def finalize(self, task, episode) -> None:
        for trace in episode.traces:
            record = self._records.pop(trace.id)
            trace.record_reward(REWARD, record.system_score)
            trace.record_metrics(record.metrics())


def reply_text(trace: Any) -> str:
    """The policy's reply: the last assistant message as sampled (not stripped, as a backend returns it)."""
    messages = trace.assistant_messages
    return str(messages[-1].content or "") if messages else ""


_OPTIONS = ("members", "task_kwargs", "policy_name", "policy_style", "credit")


def load_environment(env_id: str = "coalition_gym/Debate-v0", *, pool: str = DEFAULT_POOL, task: str = DEFAULT_TASK,
                     split: str = "train", n_items: int | None = None, seed: int = 0,
                     **options: Any) -> CoalitionEnv:
    """The verifiers environment of ``env_id`` (a coalition-gym env id or protocol name) with ``pool``'s frozen
    members, ``task``'s first ``n_items`` items of ``split`` and the run ``seed``. ``options``: ``members``,
    ``task_kwargs``, ``policy_name``, ``policy_style``, ``credit``; every other keyword is a protocol setting
    (``rounds=2``). Bad names fail here, in one line, before any model is loaded."""
    fields = {k: options.pop(k) for k in list(options) if k in _OPTIONS}
    register_envs()
    protocol_of(env_id)  # an unknown id: UnknownNameError, with the known ones
    if split not in SPLITS:
        raise ConfigError(f"split {split!r} is not one of {', '.join(SPLITS)}")
    if not isinstance(pool, str):
        raise ConfigError(f"pool={pool!r}: give a pool preset name or a pool file path (a verifiers config is text)")
    check_pool_name(pool)
    try:
        taskset = CoalitionTasksetConfig(env_id=env_id, pool=pool, task_name=task, split=split, n_items=n_items,
                                         seed=seed, settings=options, **fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"load_environment: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    return CoalitionEnv(CoalitionEnvConfig(taskset=taskset))

