"""Pools: names bound to Generators, plus the fixed helpers (ranker, fuser ...) protocols use.

Helpers are never coalition members. Presets are addressed by name (:data:`POOL_PRESETS`, extended by
:func:`register_pool`): ``sim:demo``, ``sim:independent``, ``sim:specialists``, ``sim:random-N``, and the
tiny transformers zoo ``zoo:default`` / ``zoo:tiny`` (shipped with the package). A pool can also be a YAML or
JSON file (or the same structure as a dict) that mixes backends freely (see :func:`pool_from_config`; the
backends are in :mod:`.backends`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import ConfigError, UnknownNameError
from ..settings_check import check_values, setting, setting_names
from ..types import Ask, Sample, SamplingParams
from .backends import BACKENDS, ENTRY_KEYS
from .base import Generator
from .simulated import DEFAULT_HELPERS, SIM_PRESETS, SimulatedAgent, random_profiles
from .zoo import ZOO_RECIPES, shipped, zoo_dir

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
        return checked_coalition(self.name, names, list(self.members))


def checked_coalition(pool: str, names: Sequence[str], known: Sequence[str]) -> list[str]:
    """``names`` as a list when each is one of pool ``pool``'s members ``known`` and none repeats."""
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UnknownNameError(f"member of pool {pool!r}", unknown[0], known)
    if len(set(names)) != len(names):
        raise ConfigError(f"coalition {list(names)} names a member twice")
    return list(names)


# -- presets: pools by name ----------------------------------------------------------------------------

@dataclass(frozen=True)
class PoolPreset:
    """A pool by name (``--pool NAME``, ``load_pool(NAME)``): one name, or a family of names that share a
    prefix (``sim:random-N``)."""

    name: str  # as listings show it; a family's shows its parameter (sim:random-N)
    build: Callable[[str], Pool]  # build(the name given) -> Pool
    description: str  # what the pool models, one line (`cgym pools`)
    prefix: str | None = None  # a family: every name that starts with it
    check: Callable[[str], None] | None = None  # refuses a bad name of a family before anything is built
    summary: Callable[[str], str] | None = None  # the listing's line on the members (builds nothing heavy)


#: preset name -> record, the built-ins first; extended by :func:`register_pool`
POOL_PRESETS: dict[str, PoolPreset] = {}


def register_pool(name: str, build: Callable[[str], Pool], description: str, *, prefix: str | None = None,
                  check: Callable[[str], None] | None = None, summary: Callable[[str], str] | None = None) -> None:
    """Make a pool available by ``name`` everywhere a pool is named (``--pool``, ``--collaborators``,
    ``load_pool``, ``cgym pools``): ``build(name)`` returns the Pool. With ``prefix``, the record stands for
    a family: every name starting with ``prefix`` is built by ``build(that name)`` after ``check(that
    name)`` (raise ConfigError for a bad one). ``summary(name)`` is the listing's line on its members."""
    if not isinstance(name, str) or not name or not callable(build) or not isinstance(description, str):
        raise ConfigError(f"register_pool needs a name, a callable build and a description, got {name!r}")
    if name in POOL_PRESETS:
        raise ConfigError(f"pool preset {name!r} is already registered")
    POOL_PRESETS[name] = PoolPreset(name, build, description, prefix, check, summary)


def _preset_of(spec: str) -> PoolPreset | None:
    if spec in POOL_PRESETS and POOL_PRESETS[spec].prefix is None:
        return POOL_PRESETS[spec]
    return next((p for p in POOL_PRESETS.values() if p.prefix is not None and spec.startswith(p.prefix)), None)


def pool_names() -> list[str]:
    return list(POOL_PRESETS)


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
    return _preset_of(spec).build(spec)  # type: ignore[union-attr]  # check_pool_name found it


def check_pool_name(spec: str) -> None:
    """Refuse, without building anything, a pool name that :func:`load_pool` would refuse: an unknown
    preset, a bad name of a family (``sim:random-N``), or a pool file that does not exist."""
    if _looks_like_file(spec):
        if not Path(spec).is_file():
            raise ConfigError(f"pool file {spec!r} does not exist")
        return
    preset = _preset_of(spec)
    if preset is None:
        raise UnknownNameError("pool preset", spec, pool_names())
    if preset.check is not None:
        preset.check(spec)


def check_member_names(spec: str, members: Sequence[str]) -> None:
    """Refuse ``members`` that pool ``spec`` would refuse, before anything is built where that is cheap: a
    simulated preset is built (microseconds), a zoo preset's names are its recipe's; a pool file's members
    are checked when it is loaded."""
    check_pool_name(spec)
    if _looks_like_file(spec):
        return
    if spec.startswith("zoo:") and spec[len("zoo:"):] in ZOO_RECIPES:
        checked_coalition(spec, members, [m.name for m in ZOO_RECIPES[spec[len("zoo:"):]].models])
        return
    if spec.startswith("sim:"):
        load_pool(spec).select(list(members))


# -- the built-in presets: the simulated pools and the zoo, registered like a user's --------------------------

def _simulated_pool(groups: Mapping[str, Any], name: str) -> Pool:
    return Pool(members={n: SimulatedAgent(p) for n, p in groups["members"].items()},
                helpers={n: SimulatedAgent(p) for n, p in groups["helpers"].items()}, name=name,
                descriptions=dict(groups.get("descriptions", {})))


def _sim_members(name: str) -> str:
    pool = load_pool(name)
    described = [f"{m} ({pool.descriptions[m]})" if m in pool.descriptions else m for m in pool.members]
    return f"members: {', '.join(described)}; helpers: {', '.join(pool.helpers) or 'none'}"


def _check_random_size(name: str) -> None:
    size = name[len("sim:random-"):]
    if not size.isdigit() or not 1 <= int(size) <= 64:
        raise ConfigError(f"pool {name!r}: sim:random-N takes N from 1 to 64")


def _zoo_members(name: str) -> str:
    recipe = ZOO_RECIPES[name[len("zoo:"):]]
    state = ("shipped" if shipped.shipped_manifest(recipe) is not None
             else "built" if (zoo_dir(recipe) / "zoo.json").is_file() else "not built yet")
    return f"members: {', '.join(m.name for m in recipe.models)} ({state})"


_SIM_ABOUT = {
    "demo": "the paper's phenomenon: the strongest model alone (atlas) shares blind spots with two "
            "siblings; the weakest (delta) knows what they miss and matters most to the system",
    "independent": "four agents of equal skill with independent errors: the wisdom of crowds",
    "specialists": "each member strong on one category (arithmetic, algorithmic, logic), weak elsewhere",
    "split": "C-RL's pivotal setting: a careless and a careful agent with independent errors; the third "
             "voter decides their disagreements",
    "calculators": "C-RL's dissociation setting: two calculators, reliable on arithmetic and scattering "
                   "elsewhere",
}
_ZOO_ABOUT = {
    "default": "four tiny GPT-2 models trained on arithmetic, sums and word reversal (heterogeneous "
               "skills); shipped with the package, the same weights on every machine",
    "tiny": "two very small GPT-2 models for tests; shipped with the package",
    "large": "one larger GPT-2 model (scholar) trained on every zoo task; not shipped: build it first "
             "(cgym zoo build --recipe large, hours on one CPU thread, minutes on a GPU)",
}


def _sim_preset(name: str) -> Pool:
    return _simulated_pool(SIM_PRESETS[name[len("sim:"):]], name)


def _random_pool(name: str) -> Pool:
    return _simulated_pool(random_profiles(int(name[len("sim:random-"):])), name)


def _zoo_preset(name: str) -> Pool:
    return zoo_pool(name[len("zoo:"):])


for _name in SIM_PRESETS:
    register_pool(f"sim:{_name}", _sim_preset, _SIM_ABOUT.get(_name, ""), summary=_sim_members)
register_pool("sim:random-N", _random_pool,
              "N varied agents (N = 1..64) for scale studies: skills 0.35-0.8, half in two error groups",
              prefix="sim:random-", check=_check_random_size)
for _name in ZOO_RECIPES:
    register_pool(f"zoo:{_name}", _zoo_preset, _ZOO_ABOUT.get(_name, ""), summary=_zoo_members)


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
    from .options import HFOptions
    from .zoo import ZOO_TASKS, ensure_zoo

    if recipe not in ZOO_RECIPES:
        raise UnknownNameError("pool preset", f"zoo:{recipe}", pool_names())
    build = ensure_zoo(recipe, root)
    cap = ZOO_RECIPES[recipe].max_new_tokens
    members: dict[str, Generator] = {
        name: HFGenerator(str(build.model_path(name)), options=HFOptions(device=device, max_new_tokens=cap,
                                                                         max_batch_size=64))
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


@dataclass(frozen=True)
class MemberSampling:
    """A pool entry's ``sampling``: the member's own settings, applied to every Ask it gets (:class:`WithSampling`)."""

    temperature: float | None = setting(None, ge=0)
    top_p: float | None = setting(None, gt=0, le=1)
    max_new_tokens: int | None = setting(None, ge=1, doc="caps the protocol's")


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

    ``backend`` is one of sim, hf, openai, vllm, or a kind added by :func:`~.backends.register_backend`.
    ``model`` is required except for sim: an HF folder
    (relative paths are read from the file's folder), ``zoo:<recipe>/<model>``, a server's model id,
    or for sim a preset member ``sim:<preset>/<name>``. ``style`` is chat or compact (zoo models
    default to compact, a ``cgym train`` checkpoint folder to the style in its ``coalition_gym.json``).
    ``sampling`` (temperature, top_p, max_new_tokens) is applied to every Ask of that member (see
    :class:`WithSampling`). Other keys are backend options (``BACKENDS[kind].options``). Members with the same
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
    warn_unreachable(name, {**members, **helpers})
    return Pool(members=members, helpers=helpers, styles=styles,
                dev_scores={k: float(v) for k, v in dev_scores.items()}, name=name)


class UnreachableServerWarning(UserWarning):
    """A pool member's server did not accept a connection when the pool was loaded: its requests will be retried,
    and fail when the retries are spent."""


def warn_unreachable(pool: str, backends: Mapping[str, Generator], timeout: float = 3.0) -> list[str]:
    """Probe every remote backend's server once, all at once (``timeout`` seconds at most in all), and warn,
    naming the members, for each that does not answer: a member whose server is down is named before the run,
    not after its retries. Returns the warnings' texts."""
    from concurrent.futures import ThreadPoolExecutor

    remote: dict[str, list[tuple[str, Any]]] = {}
    for member, backend in backends.items():
        inner = getattr(backend, "inner", backend)
        for server in getattr(inner, "replicas", [inner]):
            if hasattr(server, "probe"):
                remote.setdefault(server.base_url, []).append((member, server))
    if not remote:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(remote))) as probes:
        reasons = dict(zip(remote, probes.map(lambda url: remote[url][0][1].probe(timeout), remote)))
    said = []
    for url, reason in reasons.items():
        if reason is not None:
            names = ", ".join(sorted({m for m, _ in remote[url]}))
            said.append(f"pool {pool!r}: the server of {names} at {url} does not answer ({reason}); its requests "
                        "will be retried and then fail: start it, or leave the member out (--members)")
            warnings.warn(said[-1], UnreachableServerWarning, stacklevel=2)
    return said


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
    if backend not in BACKENDS:
        raise ConfigError(f"{where}: backend={backend!r}; use one of {', '.join(BACKENDS)}")
    spec = BACKENDS[backend]
    options = spec.option_names()
    unknown = [k for k in entry if k not in ENTRY_KEYS and k not in options]
    if unknown:
        accepted = sorted(ENTRY_KEYS | set(options))
        owners = [b.kind for b in BACKENDS.values() if unknown[0] in b.option_names()]
        hint = f" ({unknown[0]!r} is only for backend {', '.join(map(repr, owners))})" if owners else ""
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} for backend {backend!r}{hint}; accepted: "
                          f"{', '.join(accepted)}")
    spec.check_options(entry, where)
    model = entry.get("model")
    if spec.needs_model and (not isinstance(model, str) or not model.strip()):
        raise ConfigError(f"{where}: backend {backend!r} needs 'model' (a folder, hub name or server model id)")
    if model is not None and not isinstance(model, str):
        raise ConfigError(f"{where}: model={model!r} must be a string")
    if spec.check is not None:
        spec.check(entry, where)
    default_style = "compact" if isinstance(model, str) and model.startswith("zoo:") else "chat"
    style = entry.get("style", default_style)
    if style not in STYLES:
        raise ConfigError(f"{where}: style={style!r}; use one of {', '.join(STYLES)}")
    sampling = entry.get("sampling") or {}
    if not isinstance(sampling, Mapping):
        raise ConfigError(f"{where}: sampling must be a mapping of temperature, top_p, max_new_tokens")
    keys = setting_names(MemberSampling)
    unknown = [k for k in sampling if k not in keys]
    if unknown:
        raise ConfigError(f"{where}: unknown sampling key {unknown[0]!r}; use {', '.join(keys)}")
    check_values(MemberSampling, sampling, f"{where}, sampling")
    opts = {k: entry[k] for k in options if k in entry}
    return {"name": name, "backend": backend, "model": model, "style": style, "style_given": "style" in entry,
            "sampling": dict(sampling), "options": opts}


def _build_backend(pool: str, entry: Mapping[str, Any], shared: dict[str, Generator],
                   base_dir: Path | None) -> Generator:
    spec = BACKENDS[entry["backend"]]
    model, opts = spec.arguments(entry, base_dir, f"pool {pool!r}, {entry['name']!r}")
    key = json.dumps([spec.kind, model, sorted(opts.items())], default=str)
    if key not in shared:
        shared[key] = spec.factory(model, **opts)
    return shared[key]
