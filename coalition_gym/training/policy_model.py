"""Loading the policy: its folder (a zoo model or a local path), weights and tokenizer, its provenance
record, and the optional vLLM rollout engine with the weight pushes that keep it current."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from ..agents.lora import LoraSpec, with_causal_lm_loss
from ..agents.member_settings import best_folder
from ..errors import ConfigError


class RolloutFallbackWarning(UserWarning):
    """The configured rollout backend (vLLM) could not start; rollouts use the HF backend."""


def resolve_policy(spec: str) -> str:
    """A model folder: ``zoo:<recipe>/<member>`` (the package's shipped copy where it ships the recipe)
    or a local path (a ``cgym train`` run or seat folder: its seat's ``best/``)."""
    if spec.startswith("zoo:"):
        from ..agents.zoo import ensure_zoo

        recipe, _, name = spec[4:].partition("/")
        build = ensure_zoo(recipe or "default", progress=False)  # the shipped copy where there is one
        names = list(build.models)
        if name.isdigit() and int(name) < len(names):
            name = names[int(name)]
        return str(build.model_path(name or names[0]))
    if not Path(spec).is_dir():
        raise ConfigError(f"policy {spec!r} is neither a zoo model (zoo:<recipe>/<member>) nor a model folder")
    best = best_folder(spec)
    return spec if best == Path(spec).expanduser() else str(best)


def policy_weights(spec: str) -> dict[str, Any]:
    """A policy's starting weights as run records name them (zoo provenance, or a sha256)."""
    from ..agents.hf import weights_record

    return weights_record(resolve_policy(spec))


def load_policy(spec: str, device: str = "auto", dtype: str = "auto", lora: LoraSpec | None = None,
                seed: int = 0) -> tuple[Any, Any]:
    """(model, tokenizer) of the policy ``spec``; with ``lora``, the model is a fresh adapter over the frozen
    weights (an :class:`~coalition_gym.agents.lora.AdapterModel`, its parameters the adapter's only)."""
    if lora is None:
        return _load_model(spec, device, dtype)
    adapters, tokenizer = load_shared_base(spec, ["default"], lora, device, dtype, seed)
    return adapters["default"], tokenizer


def load_shared_base(spec: str, names: list[str], lora: LoraSpec, device: str = "auto", dtype: str = "auto",
                     seed: int = 0) -> tuple[dict[str, Any], Any]:
    """One copy of the model ``spec`` with one LoRA adapter per name (several seats that share a base): name ->
    its adapter's view, and the tokenizer."""
    from ..agents.lora import add_adapters

    model, tokenizer = _load_model(spec, device, dtype)
    return add_adapters(model, lora, names, seed), tokenizer


def _load_model(spec: str, device: str, dtype: str) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..agents.hf import resolve_device_dtype

    path = resolve_policy(spec)
    device, dtype = resolve_device_dtype(device, dtype)
    import torch

    model = with_causal_lm_loss(AutoModelForCausalLM.from_pretrained(path, local_files_only=True,
                                                                      dtype=getattr(torch, dtype)))
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return model.to(device), tokenizer  # type: ignore[arg-type]  # transformers' stubs type .to() oddly


def start_engine(policy: str, dtype: str, vllm_settings: dict[str, Any]) -> Any:
    """The vLLM rollout engine for the policy's folder, or None (with a :class:`RolloutFallbackWarning`)
    when vllm is missing or cannot load it: rollouts then run on the HF backend. The caller pushes the
    trainer's weights into it (:func:`push_weights`) before the first rollout."""
    from ..agents import vllm_engine

    try:
        return vllm_engine.VLLMEngine(resolve_policy(policy), dtype=dtype, **vllm_settings)
    except Exception as exc:  # vllm raises many kinds; any of them means "not this backend"
        warnings.warn(f"rollout_backend='vllm' is unavailable for policy {policy!r} "
                      f"({type(exc).__name__}: {exc}); rolling out with the HF backend instead",
                      RolloutFallbackWarning, stacklevel=4)
        return None


def push_weights(engine: Any, model: Any) -> None:
    """Send ``model``'s current weights to the rollout engine."""
    engine.load_weights([(name, p.detach()) for name, p in model.named_parameters()])


__all__ = ["RolloutFallbackWarning", "resolve_policy", "policy_weights", "load_policy", "load_shared_base",
           "start_engine",
           "push_weights"]
