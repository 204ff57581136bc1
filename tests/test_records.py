"""Run records: every CLI output folder says what ran, with what, from which code, and when."""

import json

from coalition_gym.agents.pools import load_pool
from coalition_gym.cli import main
from coalition_gym.records import describe_pool


def read(path):
    return json.loads(path.read_text())


def test_run_writes_a_record_and_full_episode_lines(tmp_path):
    assert main(["run", "coalition_gym/MajorityVote-v0", "--episodes", "4", "--seed", "5", "--out", str(tmp_path)]) == 0
    record = read(tmp_path / "run.json")
    assert record == read(tmp_path / "summary.json")["run"]
    assert record["command"] == f"cgym run coalition_gym/MajorityVote-v0 --episodes 4 --seed 5 --out {tmp_path}"
    assert record["version"] and record["versions"]["torch"] and record["versions"]["python"]
    assert record["started"] <= record["finished"] and record["wall_seconds"] >= 0
    assert record["git"] is None or len(record["git"]["commit"]) == 40
    assert record["pool"]["members"]["atlas"]["profile"]["skill"] > 0  # the simulated profile itself
    assert record["task"]["name"] == "rg/basic_arithmetic" and record["task"]["split"] == "test"
    assert record["task"]["size"] == 4 and record["seeds"] == {"seed": 5, "task_seed": 0}
    line = json.loads((tmp_path / "episodes.jsonl").read_text().splitlines()[0])
    assert line["question"].startswith("Calculate") and line["gold"] and line["turns"][0]["text"]
    assert {t["member"] for t in line["turns"]} == {"atlas", "borealis", "cirrus", "delta"}


def test_eval_records_the_run_and_results_carry_questions_answers_and_optionally_texts(tmp_path):
    out = tmp_path / "eval"
    assert main(["eval", "--items", "5", "--estimator", "loo", "--bootstrap", "50", "--out", str(out),
                 "--no-text"]) == 0
    summary = read(out / "summary.json")
    assert summary["run"] == read(out / "run.json") and summary["run"]["command"].startswith("cgym eval --items 5")
    assert summary["run"]["items"] == [f"rg/basic_arithmetic/test/{k}" for k in range(5)]
    assert summary["run"]["protocol"]["name"] == "debate"
    line = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert line["question"] and line["gold"] and line["turns"] and "text" not in line["turns"][0]
    assert all("answer" in t for t in line["turns"])


def test_an_out_holding_another_run_is_refused_unless_overwritten(tmp_path, capsys):
    out = str(tmp_path / "eval")
    args = ["eval", "--items", "4", "--estimator", "loo", "--bootstrap", "20", "--out", out]
    assert main(args) == 0
    assert main(args) == 0  # the same arguments: the run is repeated (or resumed, with --cache)
    assert main(args + ["--cache", str(tmp_path / "cache")]) == 0
    other = args + ["--seed", "1"]
    assert main(other) == 2 and "holds a run with other arguments (--seed 0 there, 1 here)" in capsys.readouterr().err
    assert main(other + ["--overwrite"]) == 0


def test_backends_describe_themselves():
    pool = load_pool({"name": "mixed", "members": [
        {"name": "served", "backend": "openai", "model": "org/model-7b", "base_url": "http://10.0.0.5:8000/v1"},
        {"name": "atlas", "backend": "sim", "model": "sim:demo/atlas"}]})
    described = describe_pool(pool)
    assert described["members"]["served"] == {"kind": "openai", "identity": "openai:org/model-7b@http://10.0.0.5:8000/v1",
                                              "base_url": "http://10.0.0.5:8000/v1", "model": "org/model-7b"}
    assert described["members"]["atlas"]["kind"] == "sim" and described["coalition"] == ["served", "atlas"]


def test_a_zoo_member_is_recorded_with_its_folder_and_weight_fingerprint():
    described = describe_pool(load_pool("zoo:tiny"))["members"]["pico"]
    kind, folder, dtype, fingerprint = described["identity"].split(":", 3)
    assert described["kind"] == kind == "hf" and folder.endswith("pico") and len(fingerprint) >= 8
