"""The extension examples run as written (examples/*.py): a protocol, a task, a scorer, a backend, an
estimator, a sampler, a pool preset, a training recipe, an adversary."""

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXPECTED = {
    "custom_protocol.py": ["system score:", "shapley [95% CI]", "gym episode: 2 policy turns"],
    "custom_task.py": ["majority vote on vowel_count:", "vowel_count/train/"],
    "custom_scorer.py": ["'12.5' for gold 12.3 -> ScoreResult(score=0.9304", "tolerant_decimal_arithmetic:"],
    "custom_backend.py": ["calculator  1.000 [1.000, 1.000]", "'identity': 'example:calculator-v1'"],
    "custom_pool.py": ["clone3    0.657 [0.595, 0.730]  0.173 [0.150, 0.200]",  # exact copies: one row each
                       "outsider  0.555 [0.490, 0.625]  0.139", "most redundant: clone"],
    "custom_estimator.py": ["pair_synergy [95% CI]", "ranked by: loo"],
    "custom_sampler.py": ["single_permutation   coalitions  40", "permutation          coalitions  39  max error "
                          "vs exact Shapley 0.000"],
    "custom_training_recipe.py": ["chose '", "on the test items"],
    "custom_adversary.py": ["debate         honest 0.950  with echo_last 0.867  effect +0.083 [+0.017, +0.150]"],
}


def test_every_example_is_tested():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(name, tmp_path):
    proc = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for line in EXPECTED[name]:
        assert line in proc.stdout, proc.stdout
