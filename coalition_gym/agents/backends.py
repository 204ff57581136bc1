"""Backends: the ``backend:`` kinds of pool files (sim, hf, openai, vllm, and any added by
:func:`register_backend`), each a record of how an entry is checked and its Generator built.

The built-ins go through the same registration as a user's: each declares its options (a settings
class whose fields are the entry keys, with types and bounds, checked by ``settings_check``), whether it
needs ``model``, its own rules on an entry (``check``: openai needs ``base_url``; sim's ``profile``) and how
an entry becomes its factory's arguments (``arguments``: a sim entry's AgentProfile; hf and vllm read
``zoo:<recipe>/<model>`` and paths relative to the pool file).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import ConfigError, UnknownNameError
from ..settings_check import check_values, describe_setting, setting_names
from .adversaries import ADVERSARIES
from .base import Generator
from .options import HFOptions, OpenAIOptions, SimOptions, VLLMOptions
from .simulated import SIM_PRESETS, AgentProfile, SimulatedAgent

#: the keys every pool-file entry has, whatever its backend; the rest are the backend's own options
ENTRY_KEYS = {"name", "backend", "model", "style", "sampling"}

#: ``check(entry, where)``: a backend's own rules on a whole entry, beyond its options' types
EntryCheck = Callable[[Mapping[str, Any], str], None]
#: ``arguments(entry, base_dir, where) -> (model, options)``: what the factory is called with
EntryArguments = Callable[[Mapping[str, Any], "Path | None", str], "tuple[str | None, dict[str, Any]]"]


def _as_given(entry: Mapping[str, Any], base_dir: Path | None, where: str) -> tuple[str | None, dict[str, Any]]:
    return entry["model"], dict(entry["options"])


@dataclass(frozen=True)
class Backend:
    """One ``backend:`` kind of pool files: how an entry is checked and its Generator built."""

    kind: str
    factory: Callable[..., Generator]  # factory(model, **options) -> Generator
    options: type | None  # the entry keys it accepts: a settings class (None: none)
    needs_model: bool = False
    check: EntryCheck | None = None
    arguments: EntryArguments = _as_given

    def option_names(self) -> list[str]:
        return setting_names(self.options) if self.options is not None else []

    def check_options(self, entry: Mapping[str, Any], where: str) -> None:
        """The types, bounds and choices of the options an entry gives (the options class's defaults apply
        to the others)."""
        if self.options is not None:
            check_values(self.options, entry, where)

    def describe_options(self) -> str:
        """``device, max_batch_size (>= 1), ...``: the options as ``cgym pools`` lists them."""
        if self.options is None:
            return ""
        return ", ".join(describe_setting(f) for f in dataclasses.fields(self.options))


#: backend kind -> its record, the built-ins first; extended by :func:`register_backend`
BACKENDS: dict[str, Backend] = {}


def register_backend(kind: str, factory: Callable[..., Generator], options: type | None = None,
                     needs_model: bool = False, *, check: EntryCheck | None = None,
                     arguments: EntryArguments | None = None) -> None:
    """Make ``backend: <kind>`` usable in pool files and config dicts: ``factory(model, **options)``
    builds the Generator (``model`` is the entry's model string, or None). ``options`` declares the entry
    keys the backend accepts: a settings class whose fields are those keys, with their types and, through
    ``setting(...)``, bounds and choices (the factory gets the keys the entry gives; the built-ins build
    their options object from them, so the class's defaults fill the rest); None: no options. They are
    checked before anything is built,
    as is ``needs_model``, and ``check(entry, where)`` (raise ConfigError) for any rule of the backend's
    own. ``arguments(entry, base_dir, where)`` may turn the entry into the factory's ``(model, options)``
    (default: as given). Entries whose model and options are equal share one Generator."""
    if not isinstance(kind, str) or not kind or not callable(factory):
        raise ConfigError(f"register_backend needs a kind name and a callable factory, got {kind!r}")
    if options is not None and not (isinstance(options, type) and dataclasses.is_dataclass(options)):
        raise ConfigError(f"backend {kind!r}: options must be a settings dataclass (fields declared with "
                          f"setting(...)), got {options!r}")
    record = Backend(kind, factory, options, needs_model, check, arguments or _as_given)
    clash = set(record.option_names()) & ENTRY_KEYS
    if clash:
        raise ConfigError(f"backend {kind!r}: options {sorted(clash)} clash with the entry's own keys")
    BACKENDS[kind] = record


def _zoo_model_path(model: str) -> str:
    from .zoo import ensure_zoo

    recipe, _, member = model[len("zoo:"):].partition("/")
    if not member:
        raise ConfigError(f"model {model!r}: name a zoo model as zoo:<recipe>/<model>, e.g. zoo:default/abacus")
    build = ensure_zoo(recipe or "default")
    return str(build.model_path(member))


# -- the built-in backends: each checks its own entries and turns them into its factory's arguments ----------

def _profile_fields(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A sim entry's ``profile``: AgentProfile fields, or an adversary profile's name."""
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
    return dict(profile)


def _check_sim(entry: Mapping[str, Any], where: str) -> None:
    _profile_fields(entry, where)


def _sim_arguments(entry: Mapping[str, Any], base_dir: Path | None, where: str) -> tuple[None, dict[str, Any]]:
    """The entry's AgentProfile: a preset member's (``model: sim:<preset>/<member>``) or the defaults, with
    the entry's ``profile`` fields on top and the entry's name."""
    base: dict[str, Any] = {}
    model = entry["model"]
    if model:
        kind, _, rest = model.partition(":")
        preset, _, member = rest.partition("/")
        if kind != "sim" or preset not in SIM_PRESETS:
            raise ConfigError(f"{where}: a sim model is sim:<preset>/<member> with preset "
                              f"one of {', '.join(SIM_PRESETS)}; got {model!r}")
        group = {**SIM_PRESETS[preset]["members"], **SIM_PRESETS[preset]["helpers"]}
        if member not in group:
            raise UnknownNameError(f"member of sim:{preset}", member, group)
        base = {f.name: getattr(group[member], f.name) for f in dataclasses.fields(AgentProfile)}
    base.update(_profile_fields(entry["options"], where))
    base["name"] = entry["name"]
    return None, {"profile": AgentProfile(**base)}


def _sim(model: None, profile: AgentProfile) -> Generator:
    return SimulatedAgent(profile)


def _local_model(model: str, base_dir: Path | None) -> str:
    """A model folder: ``zoo:<recipe>/<model>`` (the shipped or built zoo), a path relative to the pool
    file's folder (``./...``), or as given (an absolute path or a hub name)."""
    if model.startswith("zoo:"):
        return _zoo_model_path(model)
    if base_dir is not None and model.startswith("."):
        return str((base_dir / model).resolve())
    return model


def _hf_arguments(entry: Mapping[str, Any], base_dir: Path | None, where: str) -> tuple[str, dict[str, Any]]:
    opts = dict(entry["options"])
    if entry["model"].startswith("zoo:"):  # the zoo's models answer in a few tokens
        opts = {"max_new_tokens": 16, **opts}
    return _local_model(entry["model"], base_dir), opts


def _vllm_arguments(entry: Mapping[str, Any], base_dir: Path | None, where: str) -> tuple[str, dict[str, Any]]:
    return _local_model(entry["model"], base_dir), dict(entry["options"])


def _check_openai(entry: Mapping[str, Any], where: str) -> None:
    if "base_url" not in entry:
        raise ConfigError(f"{where}: backend 'openai' needs base_url, e.g. http://127.0.0.1:8000/v1")


def _hf(model: str, **opts: Any) -> Generator:
    from .hf import HFGenerator

    return HFGenerator(model, options=HFOptions(**opts))


def _openai(model: str, **opts: Any) -> Generator:
    from .openai_api import OpenAIGenerator

    options = OpenAIOptions(**opts)
    if isinstance(options.base_url, list):  # several replicas of one model: share the work between them
        from .replicas import ReplicaGenerator

        return ReplicaGenerator([OpenAIGenerator(model, dataclasses.replace(options, base_url=str(url)))
                                 for url in options.base_url])
    return OpenAIGenerator(model, options)


def _vllm(model: str, **opts: Any) -> Generator:
    from .vllm_engine import VLLMGenerator

    return VLLMGenerator(model, VLLMOptions(**opts))


register_backend("sim", _sim, SimOptions, check=_check_sim, arguments=_sim_arguments)
register_backend("hf", _hf, HFOptions, needs_model=True, arguments=_hf_arguments)
register_backend("openai", _openai, OpenAIOptions, needs_model=True, check=_check_openai)
register_backend("vllm", _vllm, VLLMOptions, needs_model=True, arguments=_vllm_arguments)
