"""Reports never contradict themselves (issue 41, items 7 and 8): the words and the picture name the same
pairs, a line refers only to columns the table shows, `cgym compare` compares like with like or refuses a
folder it cannot compare before writing, a capped self-consistency is not called cost-matched, progress bars
name what runs, nothing prints -0.000, a sweep too small to test says so."""

import contextlib
import io
import json
from pathlib import Path

import matplotlib.figure
import numpy as np
import pytest

from coalition_gym import CoalitionGame, EvalOptions, System, SystemSpec, evaluate, load_pool, make_protocol, make_task
from coalition_gym.cli import main
from coalition_gym.reports import compare
from coalition_gym.reports.interaction_files import heatmap_png, interaction_summary
from coalition_gym.reports.leaderboard import parse_estimators, table, write_report
from coalition_gym.reports.sweep import SweepGrid, SweepOptions, sweep
from coalition_gym.reports.table import Column, fmt_ci
from coalition_gym.valuation.game import FunctionGame
from coalition_gym.valuation.interactions import interactions


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("COALITION_GYM_HOME", str(tmp_path / "home"))  # the dev-score cache stays in the test


def _eval(estimators, items=30, best_team=None):
    task = make_task("rg/basic_arithmetic", size=items)
    game = CoalitionGame(System.build(SystemSpec(make_protocol("majority_vote"), task, load_pool("sim:demo"),
                                                 split="test")))
    return evaluate(game, estimators, EvalOptions(n_boot=100, best_team=best_team))


def _all_redundant_summary():
    """Every pair redundant: v(S) = 1 for any non-empty S (each player alone does everything)."""
    game = FunctionGame(["a", "b", "c"], lambda s: float(bool(s)), n_items=4)
    return interaction_summary(interactions(game, n_boot=50))


# -- item 7: the words and the picture say the same thing ----------------------------------------------------


def test_the_heatmap_labels_the_pairs_as_the_sentence_does(tmp_path, monkeypatch):
    summary = _all_redundant_summary()
    assert summary["most_complementary"]["shapley"] < 0  # no pair is complementary
    texts: list[str] = []
    original = matplotlib.figure.Figure.text

    def record(self, x, y, s, *args, **kwargs):
        texts.append(s)
        return original(self, x, y, s, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "text", record)
    heatmap_png(summary, tmp_path / "h.png")
    assert "No pair is complementary; the least redundant" in summary["sentence"]
    assert not any("most complementary" in t for t in texts), texts  # the picture does not say it either
    assert any("least redundant" in t for t in texts) and any("most redundant" in t for t in texts)


def test_interactions_alone_show_the_shapley_column_the_best_team_line_names():
    report = _eval(["interactions"], best_team=2)
    headers = table(report).headers()
    ranked_by = report.best_team["ranked_by"]
    assert f"{ranked_by} [95% CI]" in headers, (ranked_by, headers)
    assert "mean pairwise interaction [95% CI]" in headers  # the column says what its number is
    assert report.primary == "shapley" and report.results["shapley"].extras["from"] == "interactions"


def test_sampled_interactions_alone_show_their_sampled_shapley_column(tmp_path):
    task = make_task("rg/basic_arithmetic", size=12)
    game = CoalitionGame(System.build(SystemSpec(make_protocol("majority_vote"), task, load_pool("sim:random-13"),
                                                 split="test")))  # above the exact limit: sampled
    report = evaluate(game, ["interactions"], EvalOptions(n_boot=50, mc={"budget": 60}))
    assert not report.interactions.exact and report.primary == "mc"
    assert "mc_shapley [95% CI]" in table(report).headers()
    write_report(report, tmp_path / "out")  # strict JSON, whatever the sampled values carry
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["mc"]["from"] == "interactions"


def _pipes(lines):
    return [line.replace("\\|", "").count("|") for line in lines if line.startswith("|")]


def test_compare_of_all_and_interactions_runs_shares_their_estimators(tmp_path):
    write_report(_eval(parse_estimators("all")), tmp_path / "all")
    only = _eval(["interactions"])
    write_report(only, tmp_path / "inter | one")  # a pipe in the folder name reaches the tables' labels
    result = compare.compare([tmp_path / "all", tmp_path / "inter | one"])
    assert result["estimators"] == ["shapley", "interaction"]
    assert result["side_by_side"] == "shapley"  # one estimator side by side, never Shapley next to interactions
    text = compare.markdown(result)
    assert "mean pairwise interaction [95% CI]" in text and "Each model's shapley, side by side" in text
    for block in text.split("\n\n"):
        counts = _pipes(block.splitlines())
        assert len(set(counts)) <= 1, block  # header, rule and rows: one column count per table


@pytest.mark.parametrize("kind,file,says", [
    ("gain", "gain.json", "`cgym gain` folder"),
    ("robustness", "robustness.json", "`cgym robustness` folder"),
    ("train", "report.json", "`cgym train` folder"),
    ("train-root", "crl/report.json", "`cgym train` folder"),  # `cgym train --out`: a folder per method
])
def test_compare_refuses_other_run_folders_by_name_before_writing(tmp_path, capsys, kind, file, says):
    write_report(_eval(["loo"], items=12), tmp_path / "eval")
    other = tmp_path / kind
    (other / file).parent.mkdir(parents=True)
    (other / file).write_text("{}")
    out = tmp_path / "cmp"
    assert main(["compare", str(tmp_path / "eval"), str(other), "--out", str(out)]) == 2
    assert says in capsys.readouterr().err
    assert not out.exists()


def test_the_clone_example_pool_is_made_of_exact_copies():
    import importlib.util

    spec = importlib.util.spec_from_file_location("custom_pool", Path(__file__).parents[2] / "examples/custom_pool.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    task = make_task("rg/basic_arithmetic", size=200)  # the example's items
    game = CoalitionGame(System.build(SystemSpec(make_protocol("majority_vote"), task, load_pool("sim:clones-3"),
                                                 split="test")))
    scores = {p: game.per_item([p]) for p in ("clone1", "clone2", "clone3")}
    assert all(np.array_equal(scores["clone1"], s) for s in scores.values())
    found = interaction_summary(interactions(game, n_boot=50))
    worst = found["most_redundant"]
    assert worst["a"].startswith("clone") and worst["b"].startswith("clone")


# -- item 8: smaller things that mislead ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def capped_gain(tmp_path_factory):
    """One `cgym gain` run whose protocol costs more than max_k = 2 answers: its files and its stderr."""
    tmp = tmp_path_factory.mktemp("gain")
    out, err = tmp / "out", io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stderr(err):
        patch.setenv("COALITION_GYM_HOME", str(tmp / "home"))
        code = main(["gain", "--pool", "sim:demo", "--protocols", "majority_vote", "--items", "20", "--max-k", "2",
                     "--bootstrap", "100", "--out", str(out)])
    assert code == 0
    return out, err.getvalue()


def test_capped_self_consistency_is_not_called_cost_matched(capped_gain):
    out, _ = capped_gain
    row = json.loads((out / "gain.json").read_text())["protocols"][0]
    sc = next(b for b in row["baselines"] if b["kind"] == "self_consistency")
    assert row["match"]["k"] == 2 and row["match"]["capped"] and row["match"]["ratio"] < 0.9
    assert sc["cost_matched"] is False
    assert "(k capped at 2: not cost-matched)" in (out / "gain.md").read_text()


def test_baseline_progress_bars_name_what_runs(capped_gain):
    _, err = capped_gain
    assert "self-consistency@2 of atlas" in err and "pool vote of atlas, borealis, cirrus, delta" in err
    assert "slm_mux coalitions" not in err


def test_a_value_that_rounds_to_zero_prints_as_zero():
    from coalition_gym.valuation.stats import signed, signed_ci

    assert fmt_ci(-0.0001, [-0.0004, 0.0002]) == "0.000 [0.000, 0.000]"
    assert signed(-0.0001) == "+0.000" and signed(-0.0123) == "-0.012"
    assert signed_ci([-0.0004, 0.0123]) == "[+0.000, +0.012]"
    assert Column("x", kind="number").text(-1e-6) == "0.000"


def test_a_sweep_too_small_to_test_says_so_instead_of_not_significant():
    from coalition_gym.valuation.stats import smallest_p

    assert smallest_p(4) == pytest.approx(2 / 24) and smallest_p(5) == pytest.approx(2 / 120)
    report = sweep(SweepGrid(["sim:demo"], ["majority_vote"], ["rg/basic_arithmetic"], ["loo"], 12),
                   SweepOptions(), log=lambda line: None)
    assert "not significant" not in report.summary["sentence"]
    assert "smallest possible p is 0.0833" in report.summary["sentence"]
    assert "too few to test" in report.markdown()


def test_hf_models_name_their_loss_and_no_module_passes_torch_dtype():
    pytest.importorskip("transformers")
    import torch

    from coalition_gym.agents.hf import _load

    folder = Path(__file__).parents[2] / "coalition_gym/agents/zoo/shipped/tiny/nano"
    net, _, _ = _load(str(folder), device="cpu", dtype="float32", trust_remote_code=False, allow_download=False,
                      revision=None)
    assert net.loss_type == "ForCausalLM"  # else transformers warns `loss_type=None` on every loss
    ids = torch.tensor([[1, 5, 6, 7]])
    assert torch.isfinite(net(input_ids=ids, labels=ids).loss)
    package = Path(__file__).parents[2] / "coalition_gym"
    assert not [p for p in package.rglob("*.py") if "torch_dtype=" in p.read_text()]


def test_every_result_indexes_a_player_to_a_float_and_a_pair_to_a_float():
    from coalition_gym.valuation import exact_banzhaf, exact_shapley, leave_one_out, solo
    from coalition_gym.valuation.interactions import interaction_estimator

    game = FunctionGame(["a", "b", "c"], lambda s: float(len(s) >= 2) + 0.1 * ("a" in s), n_items=3)
    for estimate in (exact_shapley, exact_banzhaf, leave_one_out, solo, interaction_estimator):
        result = estimate(game, n_boot=20)
        assert isinstance(result["a"], float) and result["a"] == result.as_dict()["a"]["value"]
    found = interactions(game, n_boot=20)
    assert isinstance(found["a", "b"], float) and found["a", "b"] == found.shapley["a", "b"]
