"""Coalition members during collaborative training: a trainable copy of an HF member (never the
original), or a member that takes part without being trained (a simulated agent: it answers and
judges, it has no weights)."""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ...agents.base import Generator
from ...agents.pools import Pool, WithSampling
from ...errors import ConfigError


@dataclass
class Member:
    name: str
    generator: Generator  # what answers for this member now
    style: str = "chat"
    model: Any = None  # the torch model being trained (None: frozen)
    tokenizer: Any = None
    frozen_reason: str = ""  # why it is not trained, shown in the coalition's record
    versions: list[str] = field(default_factory=list)  # the identity after each update

    @property
    def trainable(self) -> bool:
        return self.model is not None

    def mark_updated(self, tag: str) -> None:
        """New weights: a new identity, so the generation cache never serves the old model's replies."""
        base = self.versions[0] if self.versions else self.generator.identity
        self.versions = self.versions or [base]
        self.versions.append(f"{base}|{tag}")
        self.generator.identity = self.versions[-1]

    def save(self, folder: Path) -> None:
        from ...agents.hf import quiet_loading

        with quiet_loading():
            self.model.save_pretrained(folder)
            self.tokenizer.save_pretrained(folder)


def _hf_generator(gen: Generator) -> Any:
    from ...agents.hf import HFGenerator

    inner = gen.inner if isinstance(gen, WithSampling) else gen
    return inner if isinstance(inner, HFGenerator) else None


def frozen_reason(gen: Generator) -> str:
    """Why a backend cannot be trained here ("" when it can: an HF model)."""
    from ...agents.simulated import SimulatedAgent

    if _hf_generator(gen) is not None:
        return ""
    kind = "simulated agent" if isinstance(gen, SimulatedAgent) else f"{type(gen).__name__} backend"
    return f"{kind}: no trainable weights here (it answers and judges, untrained)"


def copy_member(name: str, pool: Pool) -> Member:
    """A member ready for training: HF members get a deep copy of their model (the pool's stays as it
    was); others are frozen, with the reason recorded."""
    from ...agents.hf import HFGenerator
    from ...agents.options import HFOptions

    gen = pool.members[name]
    style = pool.styles.get(name, "chat")
    reason = frozen_reason(gen)
    if reason:
        return Member(name, gen, style, frozen_reason=reason)
    hf = _hf_generator(gen)
    model = copy.deepcopy(hf.model)
    copied = HFGenerator(model, hf.tokenizer, HFOptions(max_batch_size=hf.max_batch_size,
                                                        max_new_tokens=hf.max_new_tokens), identity=hf.identity)
    return Member(name, copied, style, model=model, tokenizer=hf.tokenizer)


def load_member(name: str, pool: Pool, folder: Path | None, identity: str) -> Member:
    """A trained member back from its saved folder (or the pool's frozen member when it has none)."""
    from ...agents.hf import HFGenerator
    from ...agents.options import HFOptions

    if folder is None:
        return Member(name, pool.members[name], pool.styles.get(name, "chat"), frozen_reason="not trained")
    hf = _hf_generator(pool.members[name])
    gen = HFGenerator(str(folder), options=HFOptions(device=hf.device if hf is not None else "auto",
                                                     max_batch_size=hf.max_batch_size if hf is not None else 32,
                                                     max_new_tokens=hf.max_new_tokens if hf is not None else 512),
                      identity=identity)
    return Member(name, gen, pool.styles.get(name, "chat"), model=gen.model, tokenizer=gen.tokenizer)


def check_trainable(coalition: Mapping[str, Member], method: str) -> None:
    """A coalition none of whose members has weights cannot be trained: say so before any work."""
    if not any(m.trainable for m in coalition.values()):
        reasons = "; ".join(f"{m.name}: {m.frozen_reason}" for m in coalition.values())
        raise ConfigError(f"{method}: no member of coalition {sorted(coalition)} has trainable weights ({reasons}); "
                          "collaborative training needs at least one HF member (e.g. a zoo:default pool)")


def fingerprint(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]
