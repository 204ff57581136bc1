"""Objects shipped to Ray workers in test_ray.py (importable by the workers through PYTHONPATH)."""

import os
import signal
from pathlib import Path


class DiesOnce:
    """A backend wrapper whose first call kills its own worker process (SIGKILL) unless the marker
    file exists, so a shard dies mid-run exactly once."""

    def __init__(self, inner, marker: str, after_calls: int = 1):
        self.inner, self.marker, self.after_calls = inner, marker, after_calls
        self.identity = inner.identity
        self.calls = 0

    def generate(self, asks):
        self.calls += 1
        if self.calls > self.after_calls and not Path(self.marker).exists():
            Path(self.marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return self.inner.generate(asks)
