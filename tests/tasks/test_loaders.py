"""Dataset loaders on small committed fixture files (tests/fixtures/datasets); nothing is downloaded."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import FIXTURES as _FIXTURES  # noqa: E402

from coalition_gym.errors import ConfigError
from coalition_gym.tasks import SPECS, DataFormatError, DataNotFoundError, make
from coalition_gym.tasks.loaders import read_records

FIXTURES = _FIXTURES / "datasets"


@pytest.fixture(autouse=True)
def data_root(monkeypatch, tmp_path):
    monkeypatch.setenv("COALITION_GYM_DATA", str(FIXTURES))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    for name in SPECS:
        monkeypatch.delenv(f"COALITION_GYM_{name.upper()}", raising=False)


EXPECTED_TEST_SIZES = {"gpqa_diamond": 2, "mmlu_pro": 2, "mmlu_prox": 2, "theoremqa": 4, "culturalbench_hard": 2,
                       "chembench": 2, "sciriff": 1, "mbpp": 2, "gsm8k": 2, "math": 2, "arc_challenge": 2, "bbh": 2,
                       "kernelbench": 1, "assaybench": 1}


def test_every_dataset_has_a_fixture_and_loads():
    assert set(EXPECTED_TEST_SIZES) == set(SPECS)
    for name, size in EXPECTED_TEST_SIZES.items():
        task = make(name)
        items = task.items("test")
        assert len(items) == size, name
        assert len({i.id for i in items}) == size, name
        for item in items:  # every prompt renders in both styles
            assert task.prompt(item, "chat")[-1].content and task.prompt(item, "compact")[-1].content


def test_gold_answers_score_one_and_wrong_answers_zero():
    golds = {"gpqa_diamond": None, "mmlu_pro": None, "gsm8k": "Answer: {gold}", "math": "so \\boxed{{{gold}}}",
             "theoremqa": "Answer: {gold}", "bbh": "Answer: {gold}", "sciriff": "{gold}", "arc_challenge": None,
             "culturalbench_hard": None, "chembench": "Answer: {gold}"}
    for name, template in golds.items():
        task = make(name)
        for item in task.items("test"):
            reply = f"Answer: {item.gold}" if template is None else template.format(gold=item.gold)
            answer = task.extract(reply)
            assert task.score(answer, item) == 1.0, (name, item.id, reply, answer)
            assert task.score(None, item) == 0.0
            assert task.score_batch([None], [item])[0].parsed is False


def test_multiple_choice_items_are_shuffled_reproducibly():
    first = make("gpqa_diamond").items("test")
    again = make("gpqa_diamond").items("test")
    assert [i.choices for i in first] == [i.choices for i in again]
    photon = first[0]
    assert photon.choices[ord(photon.gold) - 65] == "Photon"
    assert sorted(photon.choices) == sorted(["Photon", "Gluon", "W boson", "Graviton"])


def test_specific_converters():
    arc = make("arc_challenge").items("test")
    assert arc[1].gold == "A" and arc[1].choices == ("0 C", "50 C", "100 C")  # numeric labels -> letters
    assert [i.gold for i in make("culturalbench_hard").items("test")] == ["A", "B"]
    assert make("mmlu_prox", language="de").items("test")[0].question.startswith("Hauptstadt")
    bbh = make("bbh")
    date = [i for i in bbh.items("test") if i.gold == "(B)"][0]
    assert bbh.score(bbh.extract("the answer is (B)"), date) == 1.0
    theorem = {i.id: i for i in make("theoremqa").items("test")}
    task = make("theoremqa")
    assert task.score("3.141", theorem["theoremqa/t2"]) == 1.0  # within 1%
    assert task.score("[2, 3, 5]", theorem["theoremqa/t3"]) == 1.0
    assert task.score("[2, 3]", theorem["theoremqa/t3"]) == 0.0
    assert task.score("0.5", theorem["theoremqa/t4"]) == 1.0
    assert task.score("maybe", theorem["theoremqa/t1"]) == 0.0


def test_train_dev_split_is_seeded_8_to_2_and_held_out_tasks_refuse():
    task = make("gsm8k", seed=1)
    train, dev = task.items("train"), task.items("dev")
    assert (len(train), len(dev)) == (8, 2)
    assert not {i.id for i in train} & {i.id for i in dev}
    assert [i.id for i in make("gsm8k", seed=1).items("dev")] == [i.id for i in dev]
    assert [i.id for i in make("gsm8k", seed=2).items("dev")] != [i.id for i in dev]
    assert make("gsm8k").held_out is False
    with pytest.raises(ConfigError, match="held out"):
        make("gpqa_diamond").items("train")
    with pytest.raises(ConfigError, match="no training split"):
        make("gpqa_diamond", held_out=False)
    with pytest.raises(ConfigError, match="held out"):
        make("gsm8k", held_out=True).items("dev")
    assert len(make("gsm8k", size=1).items("test")) == 1


def test_missing_data_says_what_to_download_and_where(monkeypatch, tmp_path):
    monkeypatch.setenv("COALITION_GYM_DATA", str(tmp_path / "nothing"))
    with pytest.raises(DataNotFoundError) as err:
        make("gpqa_diamond").items("test")
    message = str(err.value)
    assert "huggingface-cli download Idavidrein/gpqa --repo-type dataset" in message
    assert "COALITION_GYM_GPQA_DIAMOND" in message and "COALITION_GYM_DATA" in message and "path=" in message


def test_path_argument_env_var_and_hub_cache_are_searched(monkeypatch, tmp_path):
    monkeypatch.setenv("COALITION_GYM_DATA", str(tmp_path / "nothing"))
    assert len(make("gsm8k", path=FIXTURES / "gsm8k").items("test")) == 2
    assert len(make("gsm8k", path=FIXTURES / "gsm8k" / "test.jsonl").items("test")) == 2
    monkeypatch.setenv("COALITION_GYM_GSM8K", str(FIXTURES / "gsm8k"))
    assert len(make("gsm8k").items("test")) == 2
    monkeypatch.delenv("COALITION_GYM_GSM8K")
    snapshot = tmp_path / "hub" / "datasets--openai--gsm8k" / "snapshots" / "abc123" / "main"
    snapshot.mkdir(parents=True)
    (snapshot / "test.jsonl").write_text((FIXTURES / "gsm8k" / "test.jsonl").read_text())
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert len(make("gsm8k").items("test")) == 2


def test_missing_field_names_file_line_and_field():
    with pytest.raises(DataFormatError, match=r"test\.jsonl, line 2: missing field 'answer'"):
        make("gsm8k", path=FIXTURES / "broken" / "gsm8k").items("test")
    assert len(make("gsm8k", path=FIXTURES / "broken" / "gsm8k", skip_invalid=True).items("test")) == 1


def test_bad_files_are_reported(tmp_path):
    bad_json = tmp_path / "test.jsonl"
    bad_json.write_text('{"question": "a", "answer": "1"}\n{not json\n')
    with pytest.raises(DataFormatError, match="line 2: not valid JSON"):
        list(read_records(bad_json))
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"question": "caf\xe9"}\n')
    with pytest.raises(DataFormatError, match="not UTF-8"):
        list(read_records(latin))
    scalar = tmp_path / "scalar.json"
    scalar.write_text(json.dumps(42))
    with pytest.raises(DataFormatError, match="expected a list"):
        list(read_records(scalar))
    with pytest.raises(DataFormatError, match="unknown file type"):
        list(read_records(tmp_path / "data.xml"))
    with pytest.raises(ConfigError, match="unknown option"):
        make("gsm8k", langauge="en")


def test_parquet_needs_pyarrow_or_pandas(tmp_path, monkeypatch):
    path = tmp_path / "test-00000.parquet"
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        path.write_bytes(b"PAR1")
        monkeypatch.setitem(sys.modules, "pyarrow", None)
        monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
        monkeypatch.setitem(sys.modules, "pandas", None)
        with pytest.raises(DataFormatError, match="pip install pyarrow"):
            list(read_records(path))
        return
    pq.write_table(pa.Table.from_pylist([{"question": "1+1?", "answer": "#### 2"}]), path)
    items = make("gsm8k", path=tmp_path).items("test")
    assert items[0].gold == "2"
