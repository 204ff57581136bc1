"""Seeded outputs stay the same through refactors: a fixed leaderboard's summary and a 3-step C-RL run's
metrics, compared with values recorded before (``tests/fixtures/golden/``).

A deliberate change of results (a new seed scheme, a fixed bug) re-records them, and says so in its
commit: ``python tests/test_golden.py --record``. Leaderboard values are pure numpy and compared exactly;
training metrics go through torch, whose CPU reductions depend on the thread count (a gradient norm moved by
1e-6 between two runs here), and are compared to 1e-4 (counts exactly).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "golden"
EVAL = ["eval", "--pool", "sim:demo", "--protocol", "debate", "--items", "40", "--estimator", "all",
        "--bootstrap", "200", "--seed", "3"]
TRAIN = ["train", "--method", "crl", "--steps", "3", "--set", "test_items=20", "--set", "eval_items=16"]
#: what a run record or a clock says: never part of a result
VOLATILE = {"run", "wall_seconds", "rollout_seconds", "update_seconds", "cache", "executor", "train_seconds",
            "policy_weights", "auto", "dev_generations", "cached", "generated"}  # the last three: the dev-score cache


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _run(argv: list[str]) -> None:
    from coalition_gym.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(argv) == 0


def leaderboard(folder: Path) -> dict:
    _run(EVAL + ["--out", str(folder / "eval")])
    summary = json.loads((folder / "eval" / "summary.json").read_text())
    return _strip({k: summary[k] for k in ("full_coalition_score", "models", "correlation", "cost", "dev_scores")})


def training(folder: Path) -> dict:
    _run(TRAIN + ["--out", str(folder / "train")])
    run = folder / "train" / "crl-seed0"
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    report = json.loads((run / "report.json").read_text())
    return _strip({"metrics": metrics, "collab": report["collab"], "solo": report["solo"],
                   "best_step": report["best_step"]})


def close(got, want, rel: float, path: str = "") -> list[str]:
    """Where ``got`` differs from ``want`` (floats within ``rel``), as readable paths."""
    if isinstance(want, dict) and isinstance(got, dict):
        keys = set(got) | set(want)
        return [d for k in sorted(keys) for d in close(got.get(k), want.get(k), rel, f"{path}.{k}")]
    if isinstance(want, list) and isinstance(got, list) and len(got) == len(want):
        return [d for i, (g, w) in enumerate(zip(got, want)) for d in close(g, w, rel, f"{path}[{i}]")]
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        return [] if math.isclose(got, want, rel_tol=rel, abs_tol=rel) else [f"{path}: {got!r} != {want!r}"]
    return [] if got == want else [f"{path}: {got!r} != {want!r}"]


@pytest.mark.parametrize("name,make,rel", [("leaderboard", leaderboard, 0.0), ("training", training, 1e-4)])
def test_seeded_outputs_are_the_recorded_ones(name, make, rel, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    want = json.loads((GOLDEN / f"{name}.json").read_text())
    assert close(make(tmp_path), want, rel) == []


if __name__ == "__main__" and "--record" in sys.argv:
    import tempfile

    GOLDEN.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in (("leaderboard", leaderboard), ("training", training)):
            (GOLDEN / f"{name}.json").write_text(json.dumps(make(Path(tmp)), indent=1, sort_keys=True) + "\n")
            print(f"recorded {GOLDEN / name}.json")
