"""LoRA adapters (peft) on a causal LM: one adapter per trained policy, or one per seat over a shared base.

:class:`AdapterModel` shows one adapter of a ``peft.PeftModel`` as the plain causal LM every other part of the
project expects (the HF generator, the log-prob pass, the update loop, the checkpoints):

- calling it runs the base model with *its* adapter active (several seats over one base switch it per call);
- ``parameters()`` are the adapter's weights only, so the optimiser, its state and gradient clipping see
  nothing else and the base weights never change;
- ``save_pretrained(folder)`` writes a standard peft adapter folder (``adapter_config.json`` +
  ``adapter_model.safetensors``) that ``peft.PeftModel.from_pretrained`` reads; :func:`load_adapter_weights`
  reads it back; :func:`merge_adapter_folder` writes base + adapter merged as an ordinary HF model folder
  (what a pool file names).

The base's other attributes (``config``, ``device``, ``dtype`` ...) are the wrapped model's.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..errors import ConfigError
from ..settings_check import check_settings, setting

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


@dataclass(frozen=True)
class LoraSpec:
    """An adapter's shape: rank, scale (``alpha / r``), dropout and the modules it wraps (``all-linear``, or
    comma-separated module names such as ``c_attn,c_proj`` or ``q_proj,v_proj``)."""

    r: int = setting(ge=1, doc="the adapter's rank")
    alpha: int = setting(ge=1, doc="the adapter's scale numerator (scale = alpha / r)")
    dropout: float = setting(0.0, ge=0, le=1, doc="dropout on the adapter's input")
    target: str = setting("all-linear", doc="all-linear, or comma-separated module names")

    def __post_init__(self) -> None:
        check_settings(self, "lora")

    def peft_config(self) -> Any:
        from peft import LoraConfig

        target: Any = self.target if self.target == "all-linear" else [t.strip() for t in self.target.split(",")
                                                                        if t.strip()]
        return LoraConfig(r=self.r, lora_alpha=self.alpha, lora_dropout=self.dropout, target_modules=target,
                          bias="none", task_type="CAUSAL_LM")


def is_adapter_folder(folder: str | Path) -> bool:
    return (Path(folder) / ADAPTER_CONFIG).is_file()


def _peft() -> Any:
    try:
        import peft
    except ImportError as exc:  # an optional extra
        raise ConfigError("LoRA needs peft: pip install 'coalition-gym[lora]' (or pip install peft)") from exc
    return peft


@contextlib.contextmanager
def _peft_notices_off() -> Iterator[None]:
    """Two notices peft prints on every wrap that ask nothing of the user: GPT-2's Conv1D layers (peft sets
    fan_in_fan_out itself) and transformers' rename of ``is_gradient_checkpointing``."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*fan_in_fan_out.*")
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield


def add_adapters(model: Any, spec: LoraSpec, names: list[str], seed: int = 0) -> dict[str, AdapterModel]:
    """Wrap ``model`` (its weights then frozen) with one fresh adapter per name; name -> its view. Each adapter's
    initial weights come from ``seed`` and its position, not from the global RNG, so they are reproducible."""
    import torch

    peft = _peft()
    if not names or len(set(names)) != len(names):
        raise ConfigError(f"adapter names must be distinct and non-empty; got {names}")
    with _peft_notices_off():
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                wrapped = peft.get_peft_model(model, spec.peft_config(), adapter_name=names[0])
                for k, name in enumerate(names[1:], start=1):
                    torch.manual_seed(seed + k)
                    wrapped.add_adapter(name, spec.peft_config())
        except ValueError as exc:  # peft: "Target modules ... not found in the base model"
            raise ConfigError(f"lora_target={spec.target!r} does not fit {type(model).__name__}: {exc}") from exc
    return {name: AdapterModel(wrapped, name) for name in names}


class AdapterModel:
    """One adapter of a ``PeftModel`` as a plain causal LM (see the module docstring)."""

    def __init__(self, peft_model: Any, adapter: str):
        self.peft_model, self.adapter = peft_model, adapter
        self.inner = peft_model.get_base_model()  # the HF model with the LoRA layers inside

        @functools.wraps(self.inner.forward)  # the HF generator reads forward's signature (cache, position keywords)
        def forward(*args: Any, **kwargs: Any) -> Any:
            self.activate()
            return self.inner(*args, **kwargs)

        self.forward = forward

    def activate(self) -> None:
        if self.peft_model.active_adapter != self.adapter:
            self.peft_model.set_adapter(self.adapter)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # config, device, dtype, eval, train ...
        return getattr(self.inner, name)

    def named_parameters(self) -> Iterator[tuple[str, Any]]:
        marker = f".{self.adapter}."
        return ((n, p) for n, p in self.peft_model.named_parameters() if "lora_" in n and marker in n)

    def parameters(self) -> Iterator[Any]:
        return (p for _, p in self.named_parameters())

    def state_dict(self) -> dict[str, Any]:
        """The adapter's weights under peft's saved names (without the adapter name), as in a saved folder."""
        peft = _peft()
        return {k: v.detach().clone() for k, v in
                peft.get_peft_model_state_dict(self.peft_model, adapter_name=self.adapter).items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        result = _peft().set_peft_model_state_dict(self.peft_model, state, adapter_name=self.adapter)
        missing = [k for k in result.missing_keys if "lora_" in k and f".{self.adapter}." in k]
        if result.unexpected_keys or missing:
            raise ConfigError(f"adapter weights do not fit adapter {self.adapter!r}: unexpected "
                              f"{list(result.unexpected_keys)[:3]}, missing {missing[:3]}")

    def merged_state_dict(self) -> dict[str, Any]:
        """The plain model's weights (its own names) with this adapter's update added, computed aside: the wrapped
        model is not touched (merging in place and back would not restore the base bitwise). What a process that
        rebuilds the policy from a config (a Ray worker) loads."""
        from peft.tuners.lora import LoraLayer

        state: dict[str, Any] = {}
        for name, module in self.inner.named_modules():
            if isinstance(module, LoraLayer) and self.adapter in module.lora_A:
                delta = module.get_delta_weight(self.adapter)  # type: ignore[attr-defined]  # on every LoRA layer type
                state[f"{name}.weight"] = (module.get_base_layer().weight + delta).detach()
        for key, value in self.inner.state_dict().items():
            if "lora_" not in key:
                state.setdefault(key.replace(".base_layer", ""), value.detach())
        return state

    def save_pretrained(self, folder: str | Path) -> None:
        """A standard peft adapter folder (``PeftModel.from_pretrained(base, folder)`` loads it)."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.peft_model.peft_config[self.adapter].save_pretrained(str(folder))
        save_file({k: v.contiguous() for k, v in self.state_dict().items()}, str(folder / ADAPTER_WEIGHTS))


def load_adapter_weights(model: AdapterModel, folder: str | Path) -> None:
    """Load the adapter weights saved in ``folder`` into ``model``'s adapter."""
    from safetensors.torch import load_file

    path = Path(folder) / ADAPTER_WEIGHTS
    if not path.is_file():
        raise ConfigError(f"{folder}: no {ADAPTER_WEIGHTS} (not an adapter checkpoint)")
    model.load_state_dict(load_file(str(path)))


def adapter_base(folder: str | Path) -> str:
    """The base model an adapter folder was trained on, as its ``adapter_config.json`` names it."""
    base = json.loads((Path(folder) / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path") or ""
    return str(base)


def with_causal_lm_loss(model: Any) -> Any:
    """``model`` with its loss named: transformers picks a model's loss from its class name, and a name
    without ``ForCausalLM`` in it (``GPT2LMHeadModel``, the zoo's) leaves ``loss_type=None``, which warns on
    every forward with labels before falling back to the causal-LM loss. Every causal LM here is trained
    with that loss, so it is named once, where the model is made."""
    if getattr(model, "loss_type", "ForCausalLM") is None:
        model.loss_type = "ForCausalLM"
    return model


def load_merged(folder: str | Path, base: str | Path | None = None, dtype: Any = None) -> Any:
    """Base + the adapter in ``folder``, merged into a plain HF causal LM. ``base``: the base model's folder
    (default: the one the adapter's config names, which must exist on this machine)."""
    from transformers import AutoModelForCausalLM

    peft = _peft()
    base = str(base or adapter_base(folder))
    if not Path(base).is_dir():
        raise ConfigError(f"{folder} is a LoRA adapter whose base model folder {base!r} is not on this machine; "
                          "merge it where the base is (cgym train --export DIR) and name the merged folder")
    kwargs = {"dtype": dtype} if dtype is not None else {}
    model = AutoModelForCausalLM.from_pretrained(base, local_files_only=True, **kwargs)
    with _peft_notices_off():
        return peft.PeftModel.from_pretrained(model, str(folder)).merge_and_unload()


def merge_adapter_folder(folder: str | Path, out: str | Path, base: str | Path | None = None) -> Path:
    """Write ``folder``'s adapter merged into its base as an HF model folder ``out`` (weights, tokenizer, and the
    folder's ``system_prompt.txt`` / ``coalition_gym.json``), so a pool file can name it on any machine."""
    from transformers import AutoTokenizer

    folder, out = Path(folder), Path(out)
    merged = load_merged(folder, base)
    out.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(out)
    tokenizer_source = folder if (folder / "tokenizer_config.json").is_file() else Path(base or adapter_base(folder))
    AutoTokenizer.from_pretrained(str(tokenizer_source), local_files_only=True).save_pretrained(out)
    for extra in ("system_prompt.txt", "coalition_gym.json"):
        if (folder / extra).is_file():
            shutil.copyfile(folder / extra, out / extra)
    return out


__all__ = ["AdapterModel", "LoraSpec", "add_adapters", "adapter_base", "is_adapter_folder", "load_adapter_weights",
           "load_merged", "merge_adapter_folder"]
