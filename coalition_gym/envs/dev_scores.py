"""Dev scores: each member's solo accuracy on the *task's* dev split, for protocols that break ties or pick
a member by it (``tie_break="dev"``, Mixture-of-Agents without an aggregator, routing's ``"dev"``
fallback, feedback without a summariser).

Why measured here and not read off the pool: a pool has one task-free ``dev_scores`` dict, and a model's
skill differs too much across tasks for one number (the zoo's quill spells words backward perfectly and
cannot add). Without dev scores a ``"dev"`` rule falls back to coalition order, so the first member wins
every tie whatever it knows, and a leaderboard built on that is wrong, not just noisy.

:func:`dev_scores_for` is the one call every driver makes, through :attr:`~coalition_gym.envs.system.System.dev`
(once per System, for
its frozen members, unless the System was given ``dev_scores``). Precedence: dev scores the pool states
explicitly (a pool file's ``dev_scores``, ``zoo_pool(dev_task=...)``) win as given; otherwise, when the
protocol needs them (:meth:`~coalition_gym.envs.protocols.base.Protocol.needs_dev_scores`), each member answers the
first ``n_items`` items
of the dev split alone (greedy, the protocol's ``max_new_tokens``, one batched call per backend through
the runner's :func:`~coalition_gym.envs.runner.dispatch`, behind the caller's generation cache when one
is given) and the task scores the answers. Seeds do not depend on the member's name, so a score is a
function of the backend's identity, its prompt style, the dev items and the decoding settings: the key
of a persistent JSON cache (``dev_scores.json`` in the caller's cache folder, else under
``$COALITION_GYM_HOME`` or ``~/.cache/coalition_gym``). A second run measures nothing.

A task without a dev split (held out) cannot give dev scores: the protocol then falls back as its
documentation says, with a :class:`DevScoreWarning` and the reason in the record.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import typing
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..agents.base import Generator, derive_seed
from ..agents.cache import CachedGenerator, GenerationCache
from ..errors import ConfigError
from ..tasks.base import Task
from ..types import Ask, Item, Sample, SamplingParams
from .dispatch import dispatch


class SystemParts(typing.Protocol):
    """What measuring reads of a System (a structural type: this module sits below the System)."""

    @property
    def protocol(self) -> Any: ...
    @property
    def task(self) -> Any: ...
    @property
    def pool(self) -> Any: ...
    @property
    def styles(self) -> Mapping[str, str]: ...

#: Dev items measured per member by default (fewer when the task's dev split is smaller).
DEFAULT_DEV_ITEMS = 200
#: Bump when what a cached score means changes (the measuring procedure), so old entries are not read.
CACHE_VERSION = 1
CACHE_FILE = "dev_scores.json"
DEV_SEED = 0

#: path of a cache file -> its entries, read once per process (and kept in step with what we write)
_MEMORY: dict[str, dict[str, dict[str, Any]]] = {}


class DevScoreWarning(UserWarning):
    """A protocol needs dev scores that cannot be measured (the task has no dev split); it falls back."""


@dataclass(frozen=True)
class DevScores:
    """The dev scores a driver hands to ``EpisodeContext.dev_scores``, and where they came from.

    ``source``: ``"explicit"`` (stated by the pool), ``"given"`` (handed to the System by its caller),
    ``"measured"`` (this module; ``cached`` names the members read back from the cache rather than generated
    now), ``"not needed"`` (the protocol reads none, or a coalition of one) or ``"unavailable"`` (needed, but
    ``why`` says why they could not be measured)."""

    scores: dict[str, float] = field(default_factory=dict)
    source: str = "not needed"
    task: str | None = None
    split: str | None = None
    n_items: int = 0
    cached: tuple[str, ...] = ()
    why: str = ""
    generated: int = 0  # generations measuring cost here (Asks a generation cache did not answer)

    def record(self) -> dict[str, Any]:
        """The small record drivers add to their results (run record, summary)."""
        out: dict[str, Any] = {"source": self.source}
        if self.scores:
            out["scores"] = {m: round(s, 4) for m, s in self.scores.items()}
        if self.source == "measured":
            out.update(task=self.task, split=self.split, n_items=self.n_items, decoding="greedy",
                       cached=list(self.cached), generated=self.generated)
        if self.why:
            out["why"] = self.why
        return out


def default_cache_file() -> Path:
    """``$COALITION_GYM_HOME/dev_scores.json``, or ``~/.cache/coalition_gym/dev_scores.json``."""
    home = os.environ.get("COALITION_GYM_HOME")
    root = Path(home) if home else Path.home() / ".cache" / "coalition_gym"
    return root / CACHE_FILE


def cache_file_for(cache: "GenerationCache | str | os.PathLike | None") -> Path:
    """Where dev scores are kept: next to a file-backed generation cache, in a folder given as a path,
    else the default (:func:`default_cache_file`)."""
    if isinstance(cache, GenerationCache):
        return cache.path.parent / CACHE_FILE if cache.path is not None else default_cache_file()
    if cache is not None:
        return Path(cache) / CACHE_FILE
    return default_cache_file()


def fingerprinted(backend: Generator) -> bool:
    """Whether ``backend.identity`` names its model exactly enough to keep its dev score across runs: the
    built-in backends whose identity pins the model (a simulated profile's hash, an HF folder's weight
    fingerprint or an identity given with a loaded model, a server's model id), wrappers of one, or any
    Generator that sets ``stable_identity = True``. Other backends (test doubles, a custom Generator left
    with a generic identity) are measured afresh by every driver that needs them, never cached: two of
    them may share an identity and answer differently."""
    from ..agents.hf import HFGenerator
    from ..agents.openai_api import OpenAIGenerator
    from ..agents.pools import WithSampling
    from ..agents.replicas import ReplicaGenerator
    from ..agents.simulated import SimulatedAgent
    from ..agents.vllm_engine import VLLMGenerator

    declared = getattr(backend, "stable_identity", None)
    if declared is not None:
        return bool(declared)
    if isinstance(backend, (CachedGenerator, WithSampling)):
        return fingerprinted(backend.inner)
    if isinstance(backend, ReplicaGenerator):
        return fingerprinted(backend.replicas[0])
    if isinstance(backend, HFGenerator):  # a folder's identity carries its weights; a loaded model's, if given
        if backend.folder is not None:
            return True
        model = backend.model
        return backend.identity != f"hf:{getattr(model.config, '_name_or_path', '') or type(model).__name__}:" \
                                   f"{backend.dtype}"
    return isinstance(backend, (SimulatedAgent, OpenAIGenerator, VLLMGenerator))


def dev_items(task: Task, split: str = "dev", n_items: int = DEFAULT_DEV_ITEMS) -> tuple[list[Item], str]:
    """The first ``n_items`` items of ``split``, or ``([], why)`` when the task has none."""
    try:
        items = list(task.items(split))[:n_items]
    except ConfigError as exc:  # a held-out task refuses every split but test
        return [], str(exc)
    return items, "" if items else f"task {task.name!r} has no items in split {split!r}"


def score_key(identity: str, style: str, task: Task, split: str, items: Sequence[Item],
              params: SamplingParams) -> str:
    """The cache key of one member's dev score: the backend's identity (for HF models it carries the
    weights' fingerprint), its prompt style, the task, the split and the exact dev items as the member
    is asked them (ids, rendered prompts, golds: so a task's seed, size or config and a changed prompt
    all change it), and the decoding settings."""
    digest = hashlib.sha256()
    for it in items:
        prompt = [[m.role, m.content] for m in task.prompt(it, style)]
        digest.update(json.dumps([it.id, prompt, it.gold], ensure_ascii=False, default=str).encode())
    payload = [CACHE_VERSION, identity, style, task.name, split, len(items), digest.hexdigest(),
               params.temperature, params.top_p, params.max_new_tokens, DEV_SEED]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()


def _load(path: Path) -> dict[str, dict[str, Any]]:
    key = str(path)
    if key not in _MEMORY:
        entries: dict[str, dict[str, Any]] = {}
        try:
            data = json.loads(path.read_text())
            ok = isinstance(data, dict) and data.get("version") == CACHE_VERSION
            if ok and isinstance(data.get("entries"), dict):
                entries = {k: v for k, v in data["entries"].items() if isinstance(v, dict)
                           and isinstance(v.get("score"), (int, float))}
        except (OSError, ValueError):
            pass  # no file yet, or unreadable: measure again and write a fresh one
        _MEMORY[key] = entries
    return _MEMORY[key]


def _store(path: Path, new: Mapping[str, dict[str, Any]]) -> None:
    """Merge ``new`` into the file (re-read first, so concurrent runs lose nothing but a race's entries)
    and replace it atomically. A folder that cannot be written only costs a re-measure next time."""
    memory = _load(path)
    memory.update(new)
    try:
        on_disk = json.loads(path.read_text()).get("entries", {}) if path.is_file() else {}
    except (OSError, ValueError, AttributeError):
        on_disk = {}
    merged = {**(on_disk if isinstance(on_disk, dict) else {}), **memory}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".dev_scores.", dir=path.parent)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache is as readable as the zoo next to it
        with os.fdopen(fd, "w") as fh:
            json.dump({"version": CACHE_VERSION, "entries": merged}, fh, indent=0, sort_keys=True)
        os.replace(tmp, path)
    except OSError as exc:
        warnings.warn(f"dev scores not cached ({path}: {exc}); they will be measured again next run",
                      DevScoreWarning, stacklevel=3)


def measure_dev_scores(task: Task, backends: Mapping[str, Generator], members: Sequence[str],
                       styles: Mapping[str, str] | None = None, *, split: str = "dev",
                       n_items: int = DEFAULT_DEV_ITEMS, max_new_tokens: int = 512,
                       cache: "GenerationCache | str | os.PathLike | None" = None) -> DevScores:
    """Each member's greedy solo accuracy on the first ``n_items`` of ``split`` (see the module doc).
    Members whose score is cached are not asked; the rest answer in one batched call per backend.
    An Ask that fails scores 0 and keeps its member's score out of the cache (measured again next run)."""
    styles = styles or {}
    items, why = dev_items(task, split, n_items)
    if not items:
        return DevScores(source="unavailable", task=task.name, split=split, why=why)
    params = SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens)
    path = cache_file_for(cache)
    known = _load(path)
    keys: dict[str, str] = {}
    stored: set[str] = set()  # keys kept in the file (fingerprinted backends only)
    for m in dict.fromkeys(members):
        key = score_key(backends[m].identity, styles.get(m, "chat"), task, split, items, params)
        if fingerprinted(backends[m]):
            stored.add(key)
        else:
            key = f"{key}:{id(backends[m])}"  # one backend object measured once per call, never cached
        keys[m] = key
    todo = list(dict.fromkeys(k for k in keys.values() if k not in known))  # members sharing a key: once
    scores: dict[str, float] = {}
    fresh: dict[str, dict[str, Any]] = {}
    generated = 0
    if todo:
        asker = {k: next(m for m in keys if keys[m] == k) for k in todo}
        asks = [Ask(member=asker[k], messages=tuple(task.prompt(it, styles.get(asker[k], "chat"))), params=params,
                    seed=derive_seed(DEV_SEED, it.id, "dev-score", 0), role="dev", round=0, item=it,
                    info={"dev": True})
                for k in todo for it in items]
        bound = {asker[k]: backends[asker[k]] for k in todo}
        generated = len(asks)
        if isinstance(cache, GenerationCache):
            wrapped: dict[int, CachedGenerator] = {}
            bound = {m: wrapped.setdefault(id(g), CachedGenerator(g, cache)) for m, g in bound.items()}
        replies = dispatch(asks, bound)
        if isinstance(cache, GenerationCache):
            generated = sum(g.misses for g in wrapped.values())
        answers = [task.extract(r.text, a.item) if isinstance(r, Sample) else None for a, r in zip(asks, replies)]
        results = task.score_batch(answers, [a.item for a in asks])  # type: ignore[misc]
        for j, k in enumerate(todo):
            rows = range(j * len(items), (j + 1) * len(items))
            value = sum(results[r].score for r in rows) / len(items)
            failed = sum(isinstance(replies[r], BaseException) for r in rows)
            entry = {"score": value, "identity": backends[asker[k]].identity, "task": task.name, "split": split,
                     "n_items": len(items)}
            if failed:
                first = next(replies[r] for r in rows if isinstance(replies[r], BaseException))
                warnings.warn(f"measuring dev scores: {failed} of {len(items)} dev answers of {asker[k]!r} failed "
                              f"(first: {first}); they score 0 and the score is not cached", DevScoreWarning,
                              stacklevel=2)
            elif k in stored:
                fresh[k] = entry
            scores.update({m: value for m in keys if keys[m] == k})
        if fresh:
            _store(path, fresh)
    cached = tuple(m for m in keys if keys[m] not in todo)
    for m in cached:
        scores[m] = float(known[keys[m]]["score"])
    return DevScores({m: scores[m] for m in keys}, "measured", task.name, split, len(items), cached,
                     generated=generated)


def dev_scores_for(system: SystemParts, members: Sequence[str] | None = None, *,
                   backends: Mapping[str, Generator] | None = None,
                   cache: "GenerationCache | str | os.PathLike | None" = None,
                   n_items: int = DEFAULT_DEV_ITEMS, split: str = "dev") -> DevScores:
    """The dev scores for running ``system``'s protocol on its task with ``members`` of its pool (default:
    all the pool's members; pass only the members a driver can ask, never a seat answered from outside).
    ``backends`` default to the pool's (a driver with other generators for those names, e.g. trained
    copies, passes its own); prompt styles are the system's. Explicit pool dev scores win; otherwise they
    are measured when the protocol needs them, and cached (see the module doc). A System measures its own
    once (:attr:`~coalition_gym.envs.system.System.dev`); call this for other members, backends or dev sets."""
    protocol, task, pool, styles = system.protocol, system.task, system.pool, system.styles
    explicit = getattr(pool, "dev_scores", None)
    if explicit:
        return DevScores(dict(explicit), "explicit")
    if not protocol.needs_dev_scores():
        return DevScores()
    if backends is None:
        backends = pool.backends()
    names = list(pool.member_names if members is None else members)
    if not names:
        return DevScores(source="unavailable", task=task.name, split=split,
                         why="no member can be asked outside an episode (every one is a seat)")
    missing = [m for m in names if m not in backends]
    if missing:
        raise ConfigError(f"dev scores: no backend is bound to {missing[0]!r}")
    found = measure_dev_scores(task, backends, names, styles, split=split, n_items=n_items,
                               max_new_tokens=protocol.max_new_tokens, cache=cache)
    if found.source == "unavailable":
        warnings.warn(f"{protocol.name} needs dev scores (it breaks ties or picks a member by them), but "
                      f"{found.why}; it falls back to its documented rule (set a tie_break of 'first' or 'random', "
                      "or give dev_scores in the pool file, to choose)", DevScoreWarning, stacklevel=2)
    return found
