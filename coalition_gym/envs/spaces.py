"""A Gymnasium Text space that holds arbitrary Unicode, as prompts and model replies do."""

from __future__ import annotations

import string
from typing import Any

from gymnasium import spaces

# Characters used when *sampling*; membership accepts any character.
SAMPLE_CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n" + "éüñßΩπ中文日本語😀→∑"
SAMPLE_MAX_LENGTH = 256  # a sampled string stays short even when max_length is huge


class UnicodeText(spaces.Text):
    """Any ``str`` of length in [min_length, max_length], whatever its characters."""

    def __init__(self, max_length: int, *, min_length: int = 0, seed: Any = None):
        super().__init__(max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is None and probability is None:
            upper = min(self.max_length, max(self.min_length, SAMPLE_MAX_LENGTH))
            length = int(self.np_random.integers(self.min_length, upper + 1))
            mask = (length, None)
        return super().sample(mask=mask, probability=probability)

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"
