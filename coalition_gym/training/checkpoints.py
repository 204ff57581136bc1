"""Checkpoints: the full resumable state after every step (``last/``) and the best weights by dev
score (``best/``), both HF model folders with their ``coalition_gym.json`` (pool members as they stand);
with LoRA they hold the adapter only (a peft adapter folder: the base weights never change). Every seat's
are in ``<run>/<seat>/`` (:func:`seat_folders`), one seat or several. A killed run resumes where it stopped;
a kill mid-write never leaves a torn checkpoint."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..agents.lora import AdapterModel, load_adapter_weights
from ..agents.member_settings import MemberSettings, has_weights, write_member_settings
from ..errors import ConfigError
from ..result_files import write_text

STATE_FILE = "trainer_state.pt"


def save_state(out: Path, model: Any, optimizer: Any, state: dict[str, Any], trainer_rng: random.Random,
               config: dict[str, Any], tokenizer: Any = None, settings: MemberSettings | None = None) -> None:
    """``out/last``: everything a resume needs (optimiser, RNGs, trainer state) and, given the tokenizer,
    the weights as an HF model folder with its ``coalition_gym.json``, so the last step is a pool member
    too. Written into ``last.new`` and swapped in; a kill between the two renames leaves ``last.old``,
    which :func:`load_state` reads."""
    import torch

    last, fresh, old = out / "last", out / "last.new", out / "last.old"
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir(parents=True)
    weights = None
    if tokenizer is not None:
        model.save_pretrained(fresh)
        tokenizer.save_pretrained(fresh)
        write_text(fresh / "system_prompt.txt", str(state.get("system_prompt", "")))
        if settings is not None:
            write_member_settings(fresh, settings)
    else:  # no tokenizer to make a model folder: the weights go into the state file
        weights = model.state_dict()
    torch.save({"model": weights, "optimizer": optimizer.state_dict(), "state": state,
                "python_rng": random.getstate(), "trainer_rng": trainer_rng.getstate(),
                "numpy_rng": np.random.get_state(), "torch_rng": torch.get_rng_state(), "config": config},
               fresh / STATE_FILE)
    if last.exists():
        shutil.rmtree(old, ignore_errors=True)
        last.replace(old)
    fresh.replace(last)
    shutil.rmtree(old, ignore_errors=True)


def _last(out: Path) -> Path:
    """The last complete state: ``last/``, or ``last.old/`` when a kill fell between the swap's renames."""
    return out / "last" if (out / "last" / STATE_FILE).is_file() else out / "last.old"


def load_state(out: Path, model: Any, optimizer: Any, trainer_rng: random.Random,
               config: dict[str, Any]) -> dict[str, Any] | None:
    """Restore weights, optimiser and RNGs from ``out/last``; the saved trainer state, or None if absent."""
    import torch

    path = _last(out) / STATE_FILE
    if not path.is_file():
        return None
    saved = torch.load(path, weights_only=False)
    if saved["config"] != config:
        raise ConfigError(f"{path} was written with a different configuration; use a fresh --out folder "
                          "or delete it to start over")
    if saved["model"] is not None:  # written without a tokenizer, or before last/ was a model folder
        model.load_state_dict(saved["model"])
    else:
        _load_folder(path.parent, model)
    optimizer.load_state_dict(saved["optimizer"])
    random.setstate(saved["python_rng"])
    trainer_rng.setstate(saved["trainer_rng"])
    np.random.set_state(saved["numpy_rng"])
    torch.set_rng_state(saved["torch_rng"])
    return saved["state"]


def _load_folder(folder: Path, model: Any) -> None:
    from transformers import AutoModelForCausalLM

    if isinstance(model, AdapterModel):  # LoRA: the folder holds the adapter; the base never changed
        load_adapter_weights(model, folder)
        return
    loaded = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True,
                                                  dtype=next(model.parameters()).dtype)
    model.load_state_dict(loaded.state_dict())


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
    if not has_weights(best):
        return None
    _load_folder(best, model)
    return (best / "system_prompt.txt").read_text()


#: written into ``out/.pending/`` once every folder of a joint state is there (see :func:`commit_pending`)
COMMIT = "COMMIT"


def seat_folders(out: Path, seats: Sequence[str]) -> dict[str, Path]:
    """seat -> where its ``best/`` and ``last/`` go: ``out/<seat>/``, one layout for any number of seats (a single
    policy's seat is named ``policy`` unless ``seats`` says otherwise). A path a user names for a trained seat (the
    run folder of one seat, a seat folder or its ``best/``) is resolved by
    :func:`~coalition_gym.agents.member_settings.best_folder`."""
    return {seat: out / seat for seat in seats}


def commit_pending(out: Path, folders: Mapping[str, Path], label: str) -> None:
    """Make the states in ``out/.pending/<name>/last`` (one per name, written by :func:`save_state`) every
    name's ``folders[name]/last`` at once: write the ``COMMIT`` marker (atomically), then swap them in. A kill
    before the marker leaves the previous states everywhere; a kill after it is finished by
    :func:`finish_commit` on resume. So the states always belong to one step (every trained seat's)."""
    pending = out / ".pending"
    marker = pending / (COMMIT + ".tmp")
    write_text(marker, label)
    marker.replace(pending / COMMIT)
    finish_commit(out, folders)


def finish_commit(out: Path, folders: Mapping[str, Path]) -> None:
    """Swap a committed pending state into every name's ``last/`` (idempotent); drop an uncommitted one."""
    pending = out / ".pending"
    if not pending.exists():
        return
    if not (pending / COMMIT).is_file():
        shutil.rmtree(pending)
        return
    for name, folder in folders.items():
        fresh, last, old = pending / name / "last", folder / "last", folder / "last.old"
        if not fresh.is_dir():
            continue  # swapped in before the kill
        last.parent.mkdir(parents=True, exist_ok=True)
        if last.exists():
            shutil.rmtree(old, ignore_errors=True)
            last.replace(old)
        fresh.replace(last)
    for folder in folders.values():
        shutil.rmtree(folder / "last.old", ignore_errors=True)
    shutil.rmtree(pending)
