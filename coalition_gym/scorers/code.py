"""Generated code: extraction from replies and execution-based scoring in the sandbox.

Extraction rule (``extract_code``): the last fenced block labelled ``python``/``py``/``python3``;
else the last fenced block of any label; else the whole reply when it is not prose (some line
starts with indentation or a Python keyword). A reply with no code is None.

Scoring goes through the split harness (``split.py``): the generated code runs in one sandboxed
process that only answers calls with plain data, the tests (``assert`` statements for MBPP, a
``check(candidate)`` function for HumanEval) in another that never runs the generated code, and the
verdict is the tests' process running to its end (``sandbox.py``).
"""

from __future__ import annotations

import re
from typing import Sequence

from ..sandbox.launcher import Limits, RunResult
from ..sandbox.two_process import SplitProgram, assert_split, humaneval_split, run_splits
from .result import ScoreResult, as_text, unparsed

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_CODE_LINE = re.compile(r"^(?:[ \t]+\S|(?:def|class|import|from|return|if|for|while|with|try|async|@)\b)", re.M)
MAX_CODE_CHARS = 200_000
CODE_LIMITS = Limits(wall_seconds=10.0, cpu_seconds=10, memory_bytes=1 << 30, processes=16)


def extract_code(text: object) -> str | None:
    reply = as_text(text, limit=MAX_CODE_CHARS)
    if reply is None:
        return None
    blocks = _FENCE.findall(reply)
    python = [body for label, body in blocks if label.lower() in ("python", "py", "python3")]
    chosen = python[-1] if python else (blocks[-1][1] if blocks else None)
    if chosen is None and _CODE_LINE.search(reply):
        chosen = reply
    if chosen is None or not chosen.strip():
        return None
    return chosen.rstrip() + "\n"


def verdict(run: RunResult) -> ScoreResult:
    """The score of a run; its details name the isolation it got and what of the host (the checkout,
    the task's data, other processes) stayed visible to the candidate there (``RunResult.visible``)."""
    if run.passed:
        return ScoreResult(1.0, True, "passed", {"wall_seconds": run.wall_seconds, **run.exposure()})
    return ScoreResult(0.0, True, f"{run.status}: {run.reason}",
                       {"status": run.status, **run.exposure(), "stderr": run.stderr[-2000:]})


def score_programs(programs: Sequence[SplitProgram | None], limits: Limits = CODE_LIMITS,
                   workers: int | None = None, mode: str = "auto", hidden: Sequence[str] = ()) -> list[ScoreResult]:
    """Run many split programs in parallel in the sandbox; None (no code) scores 0 unparsed.
    ``hidden``: host paths the programs must not see (the task's data files)."""
    todo = [(i, p) for i, p in enumerate(programs) if p is not None]
    runs = run_splits([p for _, p in todo], limits=limits, workers=workers, mode=mode, hidden=hidden)
    out: list[ScoreResult] = [unparsed("no code")] * len(programs)
    for (i, _), run in zip(todo, runs):
        out[i] = verdict(run)
    return out


__all__ = ["extract_code", "humaneval_split", "assert_split", "verdict", "score_programs", "CODE_LIMITS",
           "MAX_CODE_CHARS"]
