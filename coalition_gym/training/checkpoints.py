"""Checkpoints: the full resumable state after every step (``last/``) and the best weights by dev
score (``best/``). A killed run resumes where it stopped; a kill mid-write never leaves a torn file."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np

from ..agents.member_settings import MemberSettings, write_member_settings
from ..errors import ConfigError
from ..redaction import write_text

STATE_FILE = "trainer_state.pt"


def save_state(out: Path, model: Any, optimizer: Any, state: dict[str, Any], trainer_rng: random.Random,
               config: dict[str, Any]) -> None:
    import torch

    last = out / "last"
    last.mkdir(parents=True, exist_ok=True)
    tmp = last / (STATE_FILE + ".tmp")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "state": state,
                "python_rng": random.getstate(), "trainer_rng": trainer_rng.getstate(),
                "numpy_rng": np.random.get_state(), "torch_rng": torch.get_rng_state(), "config": config}, tmp)
    tmp.replace(last / STATE_FILE)  # atomic


def load_state(out: Path, model: Any, optimizer: Any, trainer_rng: random.Random,
               config: dict[str, Any]) -> dict[str, Any] | None:
    """Restore weights, optimiser and RNGs from ``out/last``; the saved trainer state, or None if absent."""
    import torch

    path = out / "last" / STATE_FILE
    if not path.is_file():
        return None
    saved = torch.load(path, weights_only=False)
    if saved["config"] != config:
        raise ConfigError(f"{path} was written with a different configuration; use a fresh --out folder "
                          "or delete it to start over")
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    random.setstate(saved["python_rng"])
    trainer_rng.setstate(saved["trainer_rng"])
    np.random.set_state(saved["numpy_rng"])
    torch.set_rng_state(saved["torch_rng"])
    return saved["state"]


def save_best(out: Path, model: Any, tokenizer: Any, system_prompt: str,
              settings: MemberSettings | None = None) -> None:
    """``out/best``: an HF folder with the policy's system prompt and, given ``settings``, its
    ``coalition_gym.json`` (how to use it as a pool member, and where it came from)."""
    best = out / "best"
    model.save_pretrained(best)
    tokenizer.save_pretrained(best)
    write_text(best / "system_prompt.txt", system_prompt)
    if settings is not None:
        write_member_settings(best, settings)


def load_best(out: Path, model: Any) -> str | None:
    """Load ``out/best`` into ``model``; its system prompt, or None when there is no best yet."""
    best = out / "best"
    if not (best / "config.json").is_file():
        return None
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(best, local_files_only=True)
    model.load_state_dict(loaded.state_dict())
    return (best / "system_prompt.txt").read_text()
