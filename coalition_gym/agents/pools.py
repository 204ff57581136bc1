"""Pools: names bound to Generators, plus the fixed helpers (ranker, fuser ...) protocols use.

Helpers are never coalition members. Presets are addressed by name: ``sim:demo``,
``sim:independent``, ``sim:specialists``, ``sim:random-N``, and the tiny transformers zoo
``zoo:default`` / ``zoo:tiny`` (shipped with the package). A pool can also be a YAML or JSON file (or the
same structure as a dict) that mixes backends freely; see :func:`pool_from_config`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import ConfigError, UnknownNameError
from ..types import Ask, Sample, SamplingParams
from .adversaries import ADVERSARIES
from .base import Generator
from .simulated import DEFAULT_HELPERS, SIM_PRESETS, AgentProfile, SimulatedAgent, random_profiles

DEFAULT_POOL = "sim:demo"


@dataclass
class Pool:
    members: dict[str, Generator]
    helpers: dict[str, Generator] = field(default_factory=dict)
    styles: dict[str, str] = field(default_factory=dict)  # prompt style per name; "chat" if absent
    # stated dev scores (a pool file's, zoo_pool(dev_task=...)): used as given on every task; when empty,
    # drivers measure them per task where a protocol needs them (envs.dev_scores)
    dev_scores: dict[str, float] = field(default_factory=dict)
    name: str = "custom"
    descriptions: dict[str, str] = field(default_factory=dict)  # one line per member, read by routers

    def __post_init__(self) -> None:
        clash = set(self.members) & set(self.helpers)
        if clash:
            raise ConfigError(f"pool {self.name!r}: names {sorted(clash)} are both members and helpers")

    @property
    def member_names(self) -> list[str]:
        return list(self.members)

    def backends(self) -> dict[str, Generator]:
        return {**self.members, **self.helpers}

    def select(self, names: Sequence[str]) -> list[str]:
        """Validate a coalition drawn from this pool, keeping the caller's order."""
        unknown = [n for n in names if n not in self.members]
        if unknown:
            raise UnknownNameError(f"member of pool {self.name!r}", unknown[0], self.members)
        if len(set(names)) != len(names):
            raise ConfigError(f"coalition {list(names)} names a member twice")
        return list(names)


def _simulated_pool(groups: Mapping[str, Any], name: str) -> Pool:
    return Pool(members={n: SimulatedAgent(p) for n, p in groups["members"].items()},
                helpers={n: SimulatedAgent(p) for n, p in groups["helpers"].items()}, name=name,
                descriptions=dict(groups.get("descriptions", {})))


#: What each preset models, one line each (``cgym pools``).
POOL_ABOUT = {
    "sim:demo": "the paper's phenomenon: the strongest model alone (atlas) shares blind spots with two "
                "siblings; the weakest (delta) knows what they miss and matters most to the system",
    "sim:independent": "four agents of equal skill with independent errors: the wisdom of crowds",
    "sim:specialists": "each member strong on one category (arithmetic, algorithmic, logic), weak elsewhere",
    "sim:split": "C-RL's pivotal setting: a careless and a careful agent with independent errors; the third "
                 "voter decides their disagreements",
    "sim:calculators": "C-RL's dissociation setting: two calculators, reliable on arithmetic and scattering "
                       "elsewhere",
    "sim:random-N": "N varied agents (N = 1..64) for scale studies: skills 0.35-0.8, half in two error groups",
    "zoo:default": "four tiny GPT-2 models trained on arithmetic, sums and word reversal (heterogeneous "
                   "skills); shipped with the package, the same weights on every machine",
    "zoo:tiny": "two very small GPT-2 models for tests; shipped with the package",
    "zoo:large": "one larger GPT-2 model (scholar) trained on every zoo task; not shipped: build it first "
                 "(cgym zoo build --recipe large, hours on one CPU thread, minutes on a GPU)",
}


def pool_names() -> list[str]:
    from .zoo import RECIPES

    return [f"sim:{name}" for name in SIM_PRESETS] + ["sim:random-N"] + [f"zoo:{name}" for name in RECIPES]


def load_pool(spec: "str | os.PathLike | Pool | Mapping[str, Any] | Sequence[tuple[str, Generator]]") -> Pool:
    """A Pool from a preset name, a YAML/JSON pool file, an existing Pool, a mapping of names to
    Generators, a pool config dict (with a ``members`` list), or a list of ``(name, Generator)``
    pairs (names must be unique)."""
    if isinstance(spec, Pool):
        return spec
    if isinstance(spec, os.PathLike) or (isinstance(spec, str) and _looks_like_file(spec)):
        return pool_from_file(spec)
    if isinstance(spec, Mapping):
        if isinstance(spec.get("members"), (list, tuple)):
            return pool_from_config(spec)
        return Pool(members=dict(spec))
    if isinstance(spec, (list, tuple)):
        names = [pair[0] for pair in spec]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ConfigError(f"pool lists {repeated[0]!r} more than once; member names must be unique")
        return Pool(members=dict(spec))
    if not isinstance(spec, str):
        raise ConfigError(f"a pool is a preset name, a Pool, a mapping or a list of (name, Generator) pairs, "
                          f"not {type(spec).__name__}")
    check_pool_name(spec)
    kind, _, preset = spec.partition(":")
    if kind == "sim" and preset in SIM_PRESETS:
        return _simulated_pool(SIM_PRESETS[preset], spec)
    if kind == "sim":
        return _simulated_pool(random_profiles(int(preset[len("random-"):])), spec)
    return zoo_pool(preset)


def check_pool_name(spec: str) -> None:
    """Refuse, without building anything, a pool name that :func:`load_pool` would refuse: an unknown
    preset, a bad ``sim:random-N``, or a pool file that does not exist."""
    if _looks_like_file(spec):
        if not Path(spec).is_file():
            raise ConfigError(f"pool file {spec!r} does not exist")
        return
    from .zoo import RECIPES

    kind, _, preset = spec.partition(":")
    if kind == "sim" and preset.startswith("random-"):
        size = preset[len("random-"):]
        if not size.isdigit() or not 1 <= int(size) <= 64:
            raise ConfigError(f"pool {spec!r}: sim:random-N takes N from 1 to 64")
        return
    if not ((kind == "sim" and preset in SIM_PRESETS) or (kind == "zoo" and preset in RECIPES)):
        raise UnknownNameError("pool preset", spec, pool_names())


# -- the tiny transformers zoo -----------------------------------------------------------------------

def zoo_pool(recipe: str = "default", root: str | Path | None = None, device: str = "auto",
             dev_task: str | None = None) -> Pool:
    """The zoo's models as HF-backed members in the ``compact`` prompt style (the format they were
    trained on): the shipped copy, built only for a recipe the package does not ship. With ``dev_task``
    (a zoo task name), each member's dev-split accuracy on it, from the build, is the pool's stated dev
    score on every task; without (the default), drivers measure dev scores on the task being run when a
    protocol needs them (``envs.dev_scores``: skills differ too much across tasks for one score). LLM-Blender's
    ranker and fuser (``judge``, ``fuser``) are simulated helpers: a character-level model this small
    cannot judge or merge the long chat-style helper prompts, and helpers are fixed, never players."""
    from .hf import HFGenerator
    from .zoo import RECIPES, ZOO_TASKS, ensure_zoo

    if recipe not in RECIPES:
        raise UnknownNameError("pool preset", f"zoo:{recipe}", pool_names())
    build = ensure_zoo(recipe, root)
    cap = RECIPES[recipe].max_new_tokens
    members: dict[str, Generator] = {
        name: HFGenerator(str(build.model_path(name)), device=device, max_new_tokens=cap, max_batch_size=64)
        for name in build.models}
    dev: dict[str, float] = {}
    if dev_task is not None:
        if dev_task not in ZOO_TASKS:
            raise UnknownNameError("zoo task", dev_task, ZOO_TASKS)
        dev = {name: float(m["dev_accuracy"][dev_task]) for name, m in build.models.items()}
    return Pool(members=members, helpers={n: SimulatedAgent(p) for n, p in DEFAULT_HELPERS.items()},
                styles={name: "compact" for name in members}, dev_scores=dev, name=f"zoo:{recipe}")


# -- pool config files -------------------------------------------------------------------------------

STYLES = ("chat", "compact")
_ENTRY_KEYS = {"name", "backend", "model", "style", "sampling", "profile"}
#: Backend options a config entry may set, with their types (checked before anything is built).
BACKEND_OPTIONS: dict[str, dict[str, tuple[type, ...]]] = {
    "sim": {},
    "hf": {"device": (str,), "dtype": (str,), "max_batch_size": (int,), "max_new_tokens": (int,),
           "trust_remote_code": (bool,), "allow_download": (bool,), "revision": (str,)},
    "openai": {"base_url": (str, list), "api_key_env": (str, type(None)), "max_concurrency": (int,),
               "timeout": (int, float), "max_retries": (int,), "backoff_base": (int, float),
               "backoff_max": (int, float), "logprobs": (bool,), "send_seed": (bool,), "max_new_tokens": (int,),
               "extra_body": (dict,)},
    "vllm": {"dtype": (str,), "tensor_parallel_size": (int,), "gpu_memory_utilization": (int, float),
             "max_model_len": (int,), "max_new_tokens": (int,), "logprobs": (bool,), "trust_remote_code": (bool,)},
}
_SAMPLING_TYPES = {"temperature": (int, float), "top_p": (int, float), "max_new_tokens": (int,)}
#: backend kind -> factory(model, **options) -> Generator; extended by :func:`register_backend`
BACKEND_FACTORIES: dict[str, Callable[..., Generator]] = {}
_NEEDS_MODEL: set[str] = set()


def register_backend(kind: str, factory: Callable[..., Generator],
                     options: Mapping[str, tuple[type, ...]] | None = None, needs_model: bool = False) -> None:
    """Make ``backend: <kind>`` usable in pool files and config dicts: ``factory(model, **options)``
    builds the Generator (``model`` is the entry's model string, or None). ``options`` names the
    entry keys the backend accepts with their types; they are checked before anything is built."""
    if not isinstance(kind, str) or not kind or kind in ("sim",) or not callable(factory):
        raise ConfigError(f"register_backend needs a new kind name and a callable factory, got {kind!r}")
    clash = set(options or {}) & _ENTRY_KEYS
    if clash:
        raise ConfigError(f"backend {kind!r}: options {sorted(clash)} clash with the entry's own keys")
    BACKEND_FACTORIES[kind] = factory
    BACKEND_OPTIONS[kind] = dict(options or {})
    if needs_model:
        _NEEDS_MODEL.add(kind)


class WithSampling(Generator):
    """Applies a member's own sampling settings to every Ask it gets: ``temperature`` and ``top_p``
    replace the protocol's, ``max_new_tokens`` caps it. The identity records the settings, so cached
    generations are never shared with the unmodified backend."""

    def __init__(self, inner: Generator, temperature: float | None = None, top_p: float | None = None,
                 max_new_tokens: int | None = None):
        self.inner = inner
        self.settings = {k: v for k, v in (("temperature", temperature), ("top_p", top_p),
                                           ("max_new_tokens", max_new_tokens)) if v is not None}
        shown = ",".join(f"{k}={v}" for k, v in sorted(self.settings.items()))
        self.identity = f"{inner.identity}|{shown}"

    def adjust(self, params: SamplingParams) -> SamplingParams:
        cap = self.settings.get("max_new_tokens")
        return SamplingParams(temperature=self.settings.get("temperature", params.temperature),
                              top_p=self.settings.get("top_p", params.top_p),
                              max_new_tokens=(params.max_new_tokens if cap is None
                                              else int(min(cap, params.max_new_tokens))))

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        return self.inner.generate([dataclasses.replace(a, params=self.adjust(a.params)) for a in asks])


def _looks_like_file(spec: str) -> bool:
    return spec.lower().endswith((".yaml", ".yml", ".json")) or (os.sep in spec and Path(spec).is_file())


def pool_from_file(path: "str | os.PathLike") -> Pool:
    """A pool from a YAML (``.yaml``/``.yml``) or JSON file; see :func:`pool_from_config`."""
    import yaml

    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"pool file {str(path)!r} does not exist")
    text = file.read_text()
    try:
        data = json.loads(text) if file.suffix.lower() == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"pool file {str(file)!r} is not valid {'JSON' if file.suffix == '.json' else 'YAML'}: "
                          f"{exc}") from exc
    if not isinstance(data, Mapping):
        raise ConfigError(f"pool file {str(file)!r} must hold a mapping with a 'members' list, "
                          f"not {type(data).__name__}")
    data = dict(data)
    data.setdefault("name", file.stem)
    return pool_from_config(data, base_dir=file.parent)


def pool_from_config(config: Mapping[str, Any], base_dir: str | Path | None = None) -> Pool:
    """A pool from a config mapping::

        name: mixed                     # optional
        members:                        # required, at least one
          - {name: abacus, backend: hf, model: zoo:default/abacus, style: compact}
          - {name: remote, backend: openai, model: gpt-4o-mini, base_url: https://api.openai.com/v1,
             sampling: {temperature: 0.3}}
          - {name: atlas, backend: sim, model: sim:demo/atlas}
          - {name: rookie, backend: sim, profile: {skill: 0.4}}
          - {name: mole, backend: sim, profile: confidently_wrong}   # an adversary (agents/adversaries.py)
          - {name: big, backend: vllm, model: /models/qwen, tensor_parallel_size: 2}
        helpers:                        # optional; the same entry format (judge, fuser ...)
          - {name: judge, backend: sim, profile: {judge_skill: 0.8}}
        dev_scores: {abacus: 0.9}       # optional, for tie-breaks

    ``backend`` is one of sim, hf, openai, vllm. ``model`` is required except for sim: an HF folder
    (relative paths are read from the file's folder), ``zoo:<recipe>/<model>``, a server's model id,
    or for sim a preset member ``sim:<preset>/<name>``. ``style`` is chat or compact (zoo models
    default to compact, a ``cgym train`` checkpoint folder to the style in its ``coalition_gym.json``).
    ``sampling`` (temperature, top_p, max_new_tokens) is applied to every Ask of that member (see
    :class:`WithSampling`). Other keys are backend options (:data:`BACKEND_OPTIONS`). Members with the same
    backend, model and options share one loaded model. Without ``helpers``,
    the simulated ``judge`` and ``fuser`` are added."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"a pool config is a mapping with a 'members' list, not {type(config).__name__}")
    unknown = set(config) - {"name", "members", "helpers", "dev_scores"}
    if unknown:
        raise ConfigError(f"pool config: unknown key {sorted(unknown)[0]!r}; accepted: name, members, helpers, "
                          "dev_scores")
    name = str(config.get("name", "config"))
    members_cfg = config.get("members")
    if not isinstance(members_cfg, (list, tuple)) or not members_cfg:
        raise ConfigError(f"pool {name!r}: 'members' must be a non-empty list of member entries")
    helpers_cfg = config.get("helpers")
    if helpers_cfg is not None and not isinstance(helpers_cfg, (list, tuple)):
        raise ConfigError(f"pool {name!r}: 'helpers' must be a list of entries, not {type(helpers_cfg).__name__}")
    entries = [("member", e) for e in members_cfg] + [("helper", e) for e in (helpers_cfg or [])]
    checked = [_check_entry(name, kind, k, e) for k, (kind, e) in enumerate(entries)]
    names = [e["name"] for e in checked]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"pool {name!r}: name {repeated[0]!r} is used twice; member and helper names must be "
                          "unique")
    dev_scores = config.get("dev_scores") or {}
    if not isinstance(dev_scores, Mapping) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in dev_scores.values()):
        raise ConfigError(f"pool {name!r}: dev_scores must map member names to numbers")
    stray = sorted(set(dev_scores) - set(names))
    if stray:
        raise UnknownNameError(f"member of pool {name!r} (in dev_scores)", stray[0], names)

    shared: dict[str, Generator] = {}
    members: dict[str, Generator] = {}
    helpers: dict[str, Generator] = {}
    styles: dict[str, str] = {}
    for (kind, _), entry in zip(entries, checked):
        gen = _build_backend(name, entry, shared, Path(base_dir) if base_dir is not None else None)
        trained = getattr(gen, "member_settings", None)  # a folder's coalition_gym.json (a cgym train checkpoint)
        styles[entry["name"]] = (trained.style if not entry["style_given"] and trained is not None and trained.style
                                 else entry["style"])
        if entry["sampling"]:
            gen = WithSampling(gen, **entry["sampling"])
        (members if kind == "member" else helpers)[entry["name"]] = gen
    if helpers_cfg is None:
        helpers = {n: SimulatedAgent(p) for n, p in DEFAULT_HELPERS.items() if n not in members}
    return Pool(members=members, helpers=helpers, styles=styles,
                dev_scores={k: float(v) for k, v in dev_scores.items()}, name=name)


def _check_entry(pool: str, kind: str, index: int, entry: Any) -> dict[str, Any]:
    """Validate one entry's shape and types; returns it normalised (nothing is built yet)."""
    where = f"pool {pool!r}, {kind} #{index + 1}"
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: an entry is a mapping with name and backend, not {type(entry).__name__}")
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: 'name' must be a non-empty string, got {name!r}")
    where = f"pool {pool!r}, {kind} {name!r}"
    backend = entry.get("backend")
    if backend not in BACKEND_OPTIONS:
        raise ConfigError(f"{where}: backend={backend!r}; use one of {', '.join(BACKEND_OPTIONS)}")
    options = BACKEND_OPTIONS[backend]
    unknown = [k for k in entry if k not in _ENTRY_KEYS and k not in options]
    if unknown:
        accepted = sorted(_ENTRY_KEYS | set(options))
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} for backend {backend!r}; accepted: "
                          f"{', '.join(accepted)}")
    for key, types in options.items():
        if key in entry and (not isinstance(entry[key], types) or (bool not in types and isinstance(entry[key], bool))):
            raise ConfigError(f"{where}: {key}={entry[key]!r} must be {' or '.join(t.__name__ for t in types)}")
    model = entry.get("model")
    if backend in _NEEDS_MODEL and (not isinstance(model, str) or not model.strip()):
        raise ConfigError(f"{where}: backend {backend!r} needs 'model' (a folder, hub name or server model id)")
    if model is not None and not isinstance(model, str):
        raise ConfigError(f"{where}: model={model!r} must be a string")
    if backend == "openai" and "base_url" not in entry:
        raise ConfigError(f"{where}: backend 'openai' needs base_url, e.g. http://127.0.0.1:8000/v1")
    if "profile" in entry and backend != "sim":
        raise ConfigError(f"{where}: 'profile' is only for backend 'sim'")
    default_style = "compact" if isinstance(model, str) and model.startswith("zoo:") else "chat"
    style = entry.get("style", default_style)
    if style not in STYLES:
        raise ConfigError(f"{where}: style={style!r}; use one of {', '.join(STYLES)}")
    sampling = entry.get("sampling") or {}
    if not isinstance(sampling, Mapping):
        raise ConfigError(f"{where}: sampling must be a mapping of temperature, top_p, max_new_tokens")
    for key, value in sampling.items():
        if key not in _SAMPLING_TYPES:
            raise ConfigError(f"{where}: unknown sampling key {key!r}; use {', '.join(_SAMPLING_TYPES)}")
        if not isinstance(value, _SAMPLING_TYPES[key]) or isinstance(value, bool):
            raise ConfigError(f"{where}: sampling {key}={value!r} must be a number")
    if (sampling.get("temperature", 0) < 0 or not 0 < sampling.get("top_p", 1) <= 1
            or sampling.get("max_new_tokens", 1) < 1):
        raise ConfigError(f"{where}: sampling {dict(sampling)} needs temperature >= 0, top_p in (0, 1], "
                          "max_new_tokens >= 1")
    profile = entry.get("profile") or {}
    if isinstance(profile, str):  # an adversary profile by name: `profile: confidently_wrong`
        if profile not in ADVERSARIES:
            raise ConfigError(f"{where}: profile {profile!r} is not an adversary profile; use one of "
                              f"{', '.join(ADVERSARIES)}, or a mapping of AgentProfile fields")
        profile = {"adversary": profile}
    if not isinstance(profile, Mapping):
        raise ConfigError(f"{where}: profile must be a mapping of AgentProfile fields or an adversary profile "
                          f"name ({', '.join(ADVERSARIES)})")
    fields = {f.name for f in dataclasses.fields(AgentProfile)} - {"name"}
    bad = [k for k in profile if k not in fields]
    if bad:
        raise ConfigError(f"{where}: unknown profile field {bad[0]!r}; accepted: {', '.join(sorted(fields))}")
    if profile.get("adversary") not in (None, *ADVERSARIES):
        raise ConfigError(f"{where}: adversary={profile['adversary']!r}; use one of {', '.join(ADVERSARIES)}")
    opts = {k: entry[k] for k in options if k in entry}
    return {"name": name, "backend": backend, "model": model, "style": style, "style_given": "style" in entry,
            "sampling": dict(sampling), "profile": dict(profile), "options": opts}


def _zoo_model_path(model: str) -> str:
    from .zoo import ensure_zoo

    recipe, _, member = model[len("zoo:"):].partition("/")
    if not member:
        raise ConfigError(f"model {model!r}: name a zoo model as zoo:<recipe>/<model>, e.g. zoo:default/abacus")
    build = ensure_zoo(recipe or "default")
    return str(build.model_path(member))


def _build_backend(pool: str, entry: Mapping[str, Any], shared: dict[str, Generator],
                   base_dir: Path | None) -> Generator:
    backend, model, opts = entry["backend"], entry["model"], entry["options"]
    if backend == "sim":
        return SimulatedAgent(_sim_profile(pool, entry))
    if backend in ("hf", "vllm") and model.startswith("zoo:"):
        model = _zoo_model_path(model)
        opts = {"max_new_tokens": 16, **opts} if backend == "hf" else opts
    elif backend in ("hf", "vllm") and base_dir is not None and model.startswith("."):
        model = str((base_dir / model).resolve())
    key = json.dumps([backend, model, sorted(opts.items())], default=str)
    if key not in shared:
        shared[key] = BACKEND_FACTORIES[backend](model, **opts)
    return shared[key]


def _sim_profile(pool: str, entry: Mapping[str, Any]) -> AgentProfile:
    base: dict[str, Any] = {}
    model = entry["model"]
    if model:
        kind, _, rest = model.partition(":")
        preset, _, member = rest.partition("/")
        if kind != "sim" or preset not in SIM_PRESETS:
            raise ConfigError(f"pool {pool!r}, {entry['name']!r}: a sim model is sim:<preset>/<member> with preset "
                              f"one of {', '.join(SIM_PRESETS)}; got {model!r}")
        group = {**SIM_PRESETS[preset]["members"], **SIM_PRESETS[preset]["helpers"]}
        if member not in group:
            raise UnknownNameError(f"member of sim:{preset}", member, group)
        base = {f.name: getattr(group[member], f.name) for f in dataclasses.fields(AgentProfile)}
    base.update(entry["profile"])
    base["name"] = entry["name"]
    return AgentProfile(**base)


def _hf(model: str, **opts: Any) -> Generator:
    from .hf import HFGenerator

    return HFGenerator(model, **opts)


def _openai(model: str, **opts: Any) -> Generator:
    from .openai_api import OpenAIGenerator

    base_url = opts.pop("base_url")
    if isinstance(base_url, list):  # several replicas of one model: share the work between them
        from .replicas import ReplicaGenerator

        return ReplicaGenerator([OpenAIGenerator(str(url), model, **opts) for url in base_url])
    return OpenAIGenerator(base_url, model, **opts)


def _vllm(model: str, **opts: Any) -> Generator:
    from .vllm_engine import VLLMGenerator

    return VLLMGenerator(model, **opts)


for _kind, _factory in (("hf", _hf), ("openai", _openai), ("vllm", _vllm)):
    register_backend(_kind, _factory, BACKEND_OPTIONS[_kind], needs_model=True)
