"""What a model folder says about how to use it as a pool member: ``coalition_gym.json``.

``cgym train`` writes it into every checkpoint (``best/``, ``last/``) so the folder is a pool member as it
stands: the prompt style it was trained on, its system prompt (nudge learns one), the token cap it
generated with, its context, the decoding its checkpoint was selected with, and where it came from
(base model and its fingerprint, method, step, the run's command line). The ``hf`` backend applies the
system prompt and the token cap; pool files take the style unless an entry sets one. Explicit settings
of a pool entry always win.

:func:`best_folder` is the one reader of a path a user names for a trained seat (a pool file's ``model:``,
``--adversary``, ``--export``): a run folder of one seat, a seat folder or the checkpoint itself.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..result_files import write_json
from ..settings_check import check_settings, setting
from .lora import is_adapter_folder

SETTINGS_FILE = "coalition_gym.json"
STYLES = ("chat", "compact")
DECODINGS = ("greedy", "sampled")


@dataclass(frozen=True)
class MemberSettings:
    style: str | None = setting(None, choices=(*STYLES, None), doc="the prompt style the model was trained on")
    system_prompt: str = ""
    max_new_tokens: int | None = setting(None, ge=1, doc="the new tokens the trainer allowed")
    context_length: int | None = setting(None, ge=1, doc="the model's context in tokens")
    decoding: str | None = setting(None, choices=(*DECODINGS, None),
                                   doc="how the trainer evaluated (and selected) this checkpoint")
    provenance: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_settings(self, "member settings")

    def to_dict(self) -> dict[str, Any]:
        return {"format": 1, **asdict(self)}


def read_member_settings(folder: str | Path) -> MemberSettings | None:
    """The folder's settings, or None when it has no ``coalition_gym.json``; a malformed file is a
    ConfigError naming the file and the bad field (never silently ignored: the model would answer in
    a format it was not trained on)."""
    path = Path(folder) / SETTINGS_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not readable JSON ({exc}); rewrite it or delete it") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object, got {type(data).__name__}")
    checks = {"style": lambda v: v is None or v in STYLES, "system_prompt": lambda v: isinstance(v, str),
              "max_new_tokens": lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1),
              "context_length": lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1),
              "decoding": lambda v: v is None or v in DECODINGS, "provenance": lambda v: isinstance(v, dict)}
    known = {"format", *checks}
    stray = sorted(set(data) - known)
    if stray:
        raise ConfigError(f"{path}: unknown field {stray[0]!r}; fields: {', '.join(sorted(known))}")
    for key, ok in checks.items():
        if key in data and not ok(data[key]):
            raise ConfigError(f"{path}: {key}={data[key]!r} is not valid")
    return MemberSettings(**{k: v for k, v in data.items() if k != "format"})


def write_member_settings(folder: str | Path, settings: MemberSettings) -> Path:
    path = Path(folder) / SETTINGS_FILE
    write_json(path, settings.to_dict())
    return path


def has_weights(folder: str | Path) -> bool:
    """``folder`` holds a saved model: an HF model folder, or a LoRA adapter (``lora_r`` > 0)."""
    return (Path(folder) / "config.json").is_file() or is_adapter_folder(folder)


def best_folder(path: str | Path) -> Path:
    """The model folder ``path`` names: a seat folder's ``best/`` (``<run>/<seat>``, where ``cgym train`` puts every
    seat, one or several), the one trained seat's ``best/`` of a run folder (``<run>``; a run of several seats is
    refused, naming them), else ``path`` itself (a ``best/`` or ``last/`` checkpoint, any model folder, a hub name:
    its loader says what is wrong with it)."""
    folder = Path(path).expanduser()
    if has_weights(folder / "best"):
        return folder / "best"
    seats = sorted(d for d in folder.iterdir() if d.is_dir() and has_weights(d / "best")) if folder.is_dir() else []
    if len(seats) > 1:
        raise ConfigError(f"{path} holds {len(seats)} trained seats ({', '.join(d.name for d in seats)}): name one, "
                          f"e.g. {Path(path) / seats[0].name}")
    return seats[0] / "best" if seats else folder


__all__ = ["SETTINGS_FILE", "MemberSettings", "best_folder", "has_weights", "read_member_settings",
           "write_member_settings"]
