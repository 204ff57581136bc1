"""benchmarks/crl_table.py end to end on a tiny budget: the mechanics, never an outcome. Every method of every
cell runs and leaves a result; a cell the probe rules out is reported as "no learning signal"; a rerun after
a lost result redoes that run only."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from crl_table import METHODS, Spec, headline_sentence, load_results, plain, result_path, run_table, seated  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

TINY = {"steps": 2, "items_per_step": 2, "group_size": 2, "eval_every": 1, "eval_items": 4, "patience": 5,
        "test_items": 4, "probe_groups": 2, "max_new_tokens": 8, "task_kwargs": {"size": 40}}
VOTE = {"protocol": "majority_vote", "protocol_settings": {"tie_break": "first", "temperature": 1.0},
        "task": "zoo:arith"}
# every seat decodes greedily: no group of G executions can differ, so the probe rules the cell out
GREEDY = {"protocol": "majority_vote", "protocol_settings": {"tie_break": "first", "temperature": 0.0},
          "task": "zoo:arith"}


def tiny_spec(tmp_path: Path) -> Spec:
    return Spec(cells={"majority_vote/zoo:arith": VOTE, "greedy/zoo:arith": GREEDY}, policies=("zoo:tiny/pico",),
                collaborators=("sim:split",), seeds=(0,), budget=dict(TINY), probe={"groups": 2, "seed": 1000},
                results=tmp_path / "results", runs=tmp_path / "runs", out=tmp_path / "table.json", device="cpu")


@pytest.mark.slow
def test_the_table_runs_every_method_reports_a_ruled_out_cell_and_resumes(tmp_path):
    spec = tiny_spec(tmp_path)
    data = run_table(spec, n_jobs=1, log=lambda *_: None)

    results = load_results(spec)
    assert set(results) == {(c, m, 0) for c in spec.cells for m in METHODS}
    plan = json.loads((spec.results / "plan.json").read_text())
    assert plan["greedy/zoo:arith"]["signal"] is False
    assert plan["greedy/zoo:arith"]["chosen_probe"]["informative_groups"] == 0.0
    ruled_out = results[("greedy/zoo:arith", "crl", 0)]
    assert ruled_out["no_signal"] and ruled_out["probe"]["informative_groups"] == 0.0
    assert "(no learning signal)" in spec.out.with_suffix(".md").read_text()
    assert spec.out.with_suffix(".png").is_file()
    for name in ("base", "nudge", "raft"):  # no probe: they always run
        assert "per_item" in results[("majority_vote/zoo:arith", name, 0)]
    assert set(data["headline"]) == set(METHODS) - {"base"}
    assert all(c["n"] == 2 for c in data["headline"].values())

    # a lost result (a run killed before writing it) is redone on rerun; finished ones are kept as they are
    lost = result_path(spec.results, "majority_vote/zoo:arith", "grpo-indiv", 0)
    lost.unlink()
    kept = {p: p.stat().st_mtime_ns for p in spec.results.rglob("*-seed0.json")}
    run_table(spec, n_jobs=1, log=lambda *_: None)
    assert lost.is_file()
    assert all(p.stat().st_mtime_ns == t for p, t in kept.items())


def test_a_bad_cell_name_is_one_clear_line(monkeypatch, capsys):
    import crl_table

    monkeypatch.setattr(sys, "argv", ["crl_table.py", "--cells", "debate/zoo:nope", "--plan"])
    with pytest.raises(SystemExit, match="unknown cell 'debate/zoo:nope'"):
        crl_table.main()


def test_the_readme_and_docs_headline_is_the_committed_result():
    table = ROOT / "benchmarks" / "results" / "crl_table.json"
    if not table.is_file():
        pytest.skip("no crl_table result yet")
    sentence = headline_sentence(json.loads(table.read_text()))
    for page in (ROOT / "README.md", ROOT / "docs" / "train" / "crl-results.md"):  # `crl_table.py --report --docs`
        assert sentence in " ".join(page.read_text().split()), f"{page.relative_to(ROOT)} should say: {sentence}"


def test_a_result_saved_before_seats_were_fields_is_not_run_again(tmp_path):
    """Results written when a run named its ``policy`` (before a policy was a team of one seat) read as today's
    config, so resuming the table reuses them instead of training every cell again."""
    spec = tiny_spec(tmp_path)
    chosen = {"policy": "zoo:tiny/pico", "collaborators": "sim:split"}
    today = plain(spec.config(VOTE, chosen, "crl", 0).to_dict())
    (seat,), (policy,) = today["seats"], today["policies"]
    before = {k: v for k, v in today.items() if k not in ("policies", "seats", "credit", "shared_base")}
    before.update(policy=policy, policy_name=seat)
    assert seated(before) == today and seated(today) == today
