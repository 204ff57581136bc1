"""Task registry: names, categories, sizes and sources; splits; the `cgym tasks` listing; code tasks."""

from __future__ import annotations

import pytest
from conftest import FIXTURES as _FIXTURES  # noqa: E402

from coalition_gym.cli import main
from coalition_gym.errors import ConfigError, UnknownNameError
from coalition_gym.scorers.result import ScoreResult
from coalition_gym.tasks import SPECS, Task, describe_tasks, make, task_names, train_dev_split

FIXTURES = _FIXTURES / "datasets"


@pytest.fixture(autouse=True)
def data_root(monkeypatch, tmp_path):
    monkeypatch.setenv("COALITION_GYM_DATA", str(FIXTURES))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))


def test_every_name_makes_a_task_with_a_category_and_source():
    names = task_names()
    assert "humaneval" in names and "rg/basic_arithmetic" in names
    assert set(SPECS) <= set(names)
    for name in ["humaneval", *SPECS, "rg/basic_arithmetic"]:
        task = make(name)
        assert isinstance(task, Task) and task.name == name
        assert task.category and (task.source or name.startswith("rg/"))
    categories = {make(n).category for n in ["humaneval", *SPECS]}
    assert {"QA", "math", "coding", "science", "reasoning"} <= categories


def test_unknown_names_and_options():
    with pytest.raises(UnknownNameError, match="gsm8k"):
        make("gsm8kk")
    with pytest.raises(ConfigError, match="unknown option"):
        make("humaneval", language="fr")
    with pytest.raises(ConfigError, match="size"):
        make("gsm8k", size=0)


def test_describe_tasks_lists_sizes_sources_and_groups_reasoning_gym():
    rows = {r.name: r for r in describe_tasks()}
    assert rows["humaneval"].size == "164" and rows["humaneval"].held_out
    assert rows["gsm8k"].size == "2" and "openai/gsm8k" in rows["gsm8k"].source and not rows["gsm8k"].held_out
    assert rows["gpqa_diamond"].held_out
    rg_rows = [r for r in rows.values() if r.name.startswith("rg/*")]
    assert len(rg_rows) > 5 and all(r.size == "procedural" for r in rg_rows)
    assert sum(int(r.name.split(": ")[1].rstrip(")")) for r in rg_rows) == len([n for n in task_names()
                                                                                if n.startswith("rg/")])


def test_cli_tasks_subcommand(capsys, monkeypatch, tmp_path):
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    assert "humaneval" in out and "164" in out and "gpqa_diamond" in out and "held-out" in out
    monkeypatch.setenv("COALITION_GYM_DATA", str(tmp_path / "none"))
    assert main(["tasks", "--all"]) == 0
    out = capsys.readouterr().out
    assert "rg/basic_arithmetic" in out and "not found" in out


def test_train_dev_split_helper():
    items = list(range(50))
    train, dev = train_dev_split(items, seed=3)
    assert len(dev) == 10 and len(train) == 40 and sorted(train + dev) == items
    assert train_dev_split(items, seed=3) == (train, dev)
    assert train_dev_split(items, seed=4)[1] != dev
    assert train_dev_split([1, 2], seed=0)[1] and train_dev_split([1, 2], seed=0)[0]
    with pytest.raises(ConfigError, match="dev_fraction"):
        train_dev_split(items, dev_fraction=1.0)


def test_score_is_score_batchs_score():
    task = make("rg/basic_arithmetic", size=3)
    item = task.items("test")[0]
    detail = task.score_batch([item.gold], [item])[0]
    assert isinstance(detail, ScoreResult) and detail.score == task.score(item.gold, item) == 1.0
    assert task.score_batch([None], [item])[0].parsed is False
    assert [r.score for r in task.score_batch([item.gold, None], [item, item])] == [1.0, 0.0]


def test_mbpp_is_executed_against_its_asserts_in_the_sandbox():
    task = make("mbpp")
    items = task.items("test")
    good = [f"```python\n{i.gold}\n```" for i in items]
    answers = [task.extract(t) for t in good] + [task.extract("```python\ndef add(a, b):\n    return a - b\n```"),
                                                 None]
    scores = [r.score for r in task.score_batch(answers, [items[0], items[1], items[0], items[0]])]
    assert scores == [1.0, 1.0, 0.0, 0.0]
    assert task.score(answers[0], items[0]) == 1.0
    assert len(task.items("train")) + len(task.items("dev")) == 5


@pytest.mark.slow
def test_kernelbench_task_scores_candidates_in_the_sandbox():
    task = make("kernelbench")
    item = task.items("test")[0]
    same = item.meta["reference"].replace("class Model", "class ModelNew")
    reply = f"```python\n{same}```"
    result = task.score_batch([task.extract(reply)], [item])[0]
    assert 0 < result.score < 1 and "speedup" in result.reason
    wrong = same.replace("torch.relu(x) * 2", "x")
    assert task.score(task.extract(f"```python\n{wrong}```"), item) == 0.0


def test_assaybench_ranking_task():
    task = make("assaybench")
    item = task.items("test")[0]
    perfect = task.extract("1. TP53\n2. KRAS\n3. EGFR")
    assert task.score(perfect, item) == pytest.approx(1.0)
    invented = task.extract("FAKE1\nFAKE2\nFAKE3")
    assert task.score(invented, item) == 0.0
    assert task.score(task.extract(""), item) == 0.0


def test_a_mixture_extracts_each_item_with_its_own_task():
    mix = make("mix:humaneval,rg/basic_arithmetic", size=4)
    items = mix.items("test")
    code_item = next(i for i in items if i.id.startswith("HumanEval"))
    number_item = next(i for i in items if not i.id.startswith("HumanEval"))
    reply = f"```python\n{code_item.meta['prompt']}{code_item.gold}```"
    extracted = mix.extract(reply, code_item)
    assert extracted is not None and "def " in extracted  # code, as humaneval itself extracts it
    assert mix.score(extracted, code_item) == 1.0
    assert mix.extract("so the answer is\nAnswer: 12", number_item) == "12"
    with pytest.raises(ConfigError, match="pass the item"):
        mix.extract(reply)  # its parts extract differently: which one is meant?
