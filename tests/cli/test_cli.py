import json
import subprocess
import sys

import pytest

import coalition_gym
from coalition_gym.cli import main


def test_envs_lists_every_id(capsys):
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    for env_id in ("Debate-v0", "LLMBlender-v0", "SLMMux-v0", "MajorityVote-v0", "MixtureOfAgents-v0",
                   "HeterogeneousSwarms-v0", "Feedback-v0", "PromptRouting-v0", "TrainedRouter-v0", "Cascade-v0"):
        assert f"coalition_gym/{env_id}" in out


def test_run_prints_the_system_score_and_writes_files(tmp_path, capsys):
    code = main(["run", "coalition_gym/Debate-v0", "--episodes", "30", "--set", "rounds=2",
                 "--members", "atlas,delta", "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "system score" in out and "n=30" in out
    lines = (tmp_path / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 30 and json.loads(lines[0])["coalition"] == ["atlas", "delta"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["protocol"]["rounds"] == 2 and 0.0 <= summary["system_score"] <= 1.0


def test_run_more_episodes_than_items_reuses_items_with_new_seeds(tmp_path):
    assert main(["run", "coalition_gym/MajorityVote-v0", "--episodes", "12", "--size", "5",
                 "--out", str(tmp_path)]) == 0
    records = [json.loads(x) for x in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 12 and len({(r["item_id"], r["seed"]) for r in records}) == 12


def test_bad_input_gets_a_clear_error(capsys):
    assert main(["run", "coalition_gym/Debat-v0", "--episodes", "2"]) == 2
    assert "Did you mean 'coalition_gym/Debate-v0'" in capsys.readouterr().err
    assert main(["run", "coalition_gym/Debate-v0", "--pool", "sim:nope"]) == 2
    assert "unknown pool preset" in capsys.readouterr().err
    assert main(["run", "coalition_gym/Debate-v0", "--set", "rounds"]) == 2
    assert "key=value" in capsys.readouterr().err
    assert main(["run", "coalition_gym/Debate-v0", "--members", "atlas,atlas"]) == 2
    assert main(["run", "coalition_gym/Debate-v0", "--episodes", "0"]) == 2


def test_demo_shows_the_phenomenon(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "coalition_gym.cli", "demo", "--items", "300",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "nan" not in proc.stdout.split()  # a protocol that never asks the policy shows '-', not nan
    summary = json.loads((tmp_path / "summary.json").read_text())
    debate = next(r for r in summary["protocols"] if r["protocol"] == "debate")
    rows = {m["name"]: m for m in debate["models"]}
    assert rows["atlas"]["solo"] > rows["delta"]["solo"]  # strongest alone ...
    assert rows["delta"]["loo"] > rows["atlas"]["loo"]  # ... but the weakest matters most
    assert rows["delta"]["shapley"] > rows["atlas"]["shapley"]
    assert (tmp_path / "strength.md").exists() and len(summary["seated_policy"]) == len(coalition_gym.ENV_IDS)
    assert (tmp_path / "debate" / "leaderboard.md").exists()


def test_eval_writes_the_leaderboard_files(tmp_path, capsys):
    out = tmp_path / "eval"
    assert main(["eval", "--items", "40", "--estimator", "all", "--out", str(out), "--cache", str(tmp_path / "c"),
                 "--bootstrap", "200"]) == 0
    printed = capsys.readouterr().out
    assert "rank change" in printed and "Spearman" in printed
    summary = json.loads((out / "summary.json").read_text())
    for key in ("protocol", "task", "pool", "estimator", "n_items", "full_coalition_score", "models",
                "correlation", "cost"):
        assert key in summary
    assert summary["pool"] == ["atlas", "borealis", "cirrus", "delta"] and summary["n_items"] == 40
    model = summary["models"][0]
    for key in ("name", "solo", "solo_ci", "loo", "loo_ci", "shapley", "shapley_ci", "banzhaf", "banzhaf_ci",
                "mc_shapley", "mc_shapley_ci", "rescue", "drag"):
        assert key in model
    assert set(summary["correlation"]) >= {"spearman", "spearman_p", "pearson", "pearson_p"}
    assert set(summary["cost"]) >= {"coalitions_evaluated", "generations", "cache_hits"}
    assert sum(m["shapley"] for m in summary["models"]) == pytest.approx(summary["full_coalition_score"])
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 15 * 40 and {"item_id", "coalition", "score"} <= set(json.loads(lines[0]))
    assert (out / "leaderboard.csv").read_text().startswith("rank,model,solo")
    assert (out / "leaderboard.md").read_text().count("\n| ") >= 5
    assert (out / "solo_vs_compositional.png").read_bytes()[:4] == b"\x89PNG"
    # a second run over the same cache generates nothing new and gives the same numbers
    assert main(["eval", "--items", "40", "--estimator", "all", "--out", str(tmp_path / "again"),
                 "--cache", str(tmp_path / "c"), "--bootstrap", "200"]) == 0
    again = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert again["cost"]["generations"] == 0 and again["models"] == summary["models"]


def test_eval_with_no_arguments_uses_the_embedded_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["eval"]) == 0
    summary = json.loads((tmp_path / "runs" / "eval" / "summary.json").read_text())
    assert summary["protocol"] == "debate" and summary["estimator"] == "all"


def test_eval_bad_input(capsys, tmp_path):
    assert main(["eval", "--estimator", "shapely", "--out", str(tmp_path)]) == 2
    assert "unknown estimator 'shapely'" in capsys.readouterr().err
    assert main(["eval", "--pool", "sim:random-13", "--estimator", "shapley", "--items", "2",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "n=13 > 12" in err and "--exact-limit 13" in err
    assert main(["eval", "--pool", "sim:random-8", "--estimator", "banzhaf", "--exact-limit", "7", "--items", "2",
                 "--out", str(tmp_path)]) == 2
    assert "n=8 > 7" in capsys.readouterr().err
    assert main(["eval", "--exact-limit", "0", "--out", str(tmp_path)]) == 2
    assert main(["eval", "--members", "atlas,atlas", "--out", str(tmp_path)]) == 2
    assert "twice" in capsys.readouterr().err
    assert main(["eval", "--items", "0", "--out", str(tmp_path)]) == 2


def test_sweep_summarises_settings_with_bh(tmp_path, capsys):
    assert main(["sweep", "--pools", "sim:demo", "--protocols", "debate,majority_vote",
                 "--tasks", "rg/basic_arithmetic,rg/chain_sum", "--items", "30", "--out", str(tmp_path)]) == 0
    assert "settings" in capsys.readouterr().out
    result = json.loads((tmp_path / "sweep_summary.json").read_text())
    assert result["summary"]["total"] == 2
    setting = result["settings"]["sim:demo / debate"]
    assert len(setting["observations"]) == 8 and setting["correlation"]["n"] == 8
    assert (tmp_path / "sim_demo" / "debate" / "rg_chain_sum" / "leaderboard.md").exists()
    assert "Benjamini-Hochberg" in (tmp_path / "sweep.md").read_text()


@pytest.mark.parametrize("command", [["run", "coalition_gym/MajorityVote-v0"], ["eval"], ["sweep"],
                                     ["train", "--method", "crl"], ["zoo", "build"], ["zoo", "list"], ["demo"]])
def test_an_unwritable_out_is_refused_before_any_work(command, tmp_path, capsys):
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    for out, says in ((a_file, "is a file"), (a_file / "sub", "lies under")):
        assert main([*command, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1  # one actionable line, no traceback


@pytest.mark.parametrize("command, says", [
    (["sweep", "--alpha", "7"], "--alpha: 7 must be <= 0.5"),
    (["eval", "--mc-tolerance", "-1"], "--mc-tolerance: -1 must be >= 0"),
    (["eval", "--items", "0"], "--items: 0 must be >= 1"),
    (["train", "--steps", "abc"], "--steps: 'abc' is not an integer"),
    (["run", "coalition_gym/MajorityVote-v0", "--episodes", "0"], "--episodes: 0 must be >= 1"),
])
def test_numbers_out_of_range_are_refused_by_the_parser(command, says, capsys):
    assert main(command) == 2 and says in capsys.readouterr().err


def test_run_and_eval_give_a_router_the_same_prompt(tmp_path, monkeypatch):
    """Both commands build their system through System.build: a router reads the pool's member descriptions
    in both (cgym run never filled them before)."""
    from coalition_gym.agents.simulated import SimulatedAgent

    seen: dict[str, list] = {"run": [], "eval": []}
    which = ["run"]
    original = SimulatedAgent.generate

    def recording(self, asks):
        seen[which[0]].extend(tuple((m.role, m.content) for m in a.messages) for a in asks if a.role == "route")
        return original(self, asks)

    monkeypatch.setattr(SimulatedAgent, "generate", recording)
    common = ["--pool", "sim:calculators", "--task", "zoo:arith", "--task-seed", "0"]
    assert main(["run", "coalition_gym/PromptRouting-v0", "--episodes", "3", "--size", "3", *common]) == 0
    which[0] = "eval"
    assert main(["eval", "--protocol", "prompt_routing", "--estimator", "loo", "--items", "3", "--bootstrap", "50",
                 "--out", str(tmp_path / "eval"), *common]) == 0
    assert seen["run"] and "strong at arithmetic" in str(seen["run"][0])
    full = set(seen["eval"])  # eval also runs sub-coalitions; the full coalition's prompts are among them
    assert set(seen["run"]) <= full


def test_estimators_are_fitted_to_the_pool_before_any_generation(tmp_path, monkeypatch, capsys):
    """Issue 41.1/41.2: exact estimators above their limit are refused before the first generation; `all`
    becomes what fits (said in one line); the sampling estimator stops at a default budget and says what it
    reached."""
    from coalition_gym.agents.simulated import SimulatedAgent

    calls = []
    original = SimulatedAgent.generate
    monkeypatch.setattr(SimulatedAgent, "generate", lambda self, asks: calls.append(len(asks)) or original(self, asks))
    code = main(["eval", "--pool", "sim:random-16", "--protocol", "majority_vote", "--items", "10",
                 "--estimator", "loo,shapley", "--out", str(tmp_path / "refused")])
    err = capsys.readouterr().err
    assert code == 2 and "n=16 > 12 (the exact limit) is refused (2^16 - 1 = 65535 coalitions)" in err
    assert "--exact-limit 16" in err
    assert calls == [] and not (tmp_path / "refused" / "summary.json").exists()
    code = main(["eval", "--pool", "sim:random-13", "--protocol", "majority_vote", "--items", "10",
                 "--bootstrap", "50", "--out", str(tmp_path / "all")])
    out = capsys.readouterr().out
    assert code == 0 and "n=13 members > the exact limit 12: all = loo, mc, interactions (shapley, banzhaf would " \
        "evaluate" in out
    assert "mc: stopped at its budget of 325 coalitions (the default, 25n" in out and "largest sampling stderr" in out
    assert "mc_shapley" in (tmp_path / "all" / "summary.json").read_text()  # the files were written


def test_the_eval_progress_bar_has_a_fixed_total_from_the_start(monkeypatch):
    """Issue 41.2: the bar's total is set before the first coalition runs (known coalitions plus the sampling
    budget, times the items), so it shows a true share and an ETA instead of a total that grows every round;
    it moves episode by episode (not only when a whole batch of coalitions ends) and shows the generations."""
    import coalition_gym.valuation.game as game_module
    from coalition_gym.envs.system import System, SystemSpec
    from coalition_gym.reports.leaderboard import EvalOptions, evaluate
    from coalition_gym.valuation.game import CoalitionGame

    totals, steps, postfix = [], [], []

    class Bar:
        def __init__(self, total=0, **kwargs):
            self.total, self.n = total, 0

        def refresh(self):
            totals.append(self.total)

        def update(self, k):
            self.n += k
            steps.append(k)

        def set_postfix_str(self, text, refresh=True):
            postfix.append(text)

        def close(self):
            pass

    monkeypatch.setattr(game_module, "tqdm", Bar)
    system = System.build(SystemSpec("majority_vote", "rg/basic_arithmetic", "sim:random-13", split="test",
                                     task_kwargs={"size": 10}))
    game = CoalitionGame(system, progress=True)
    evaluate(game, ["loo", "mc"], EvalOptions(n_boot=50))
    assert totals[0] == (1 + 13 + 13 + 25 * 13) * 10  # the full coalition, loo, the solos, mc's budget; 10 items
    assert len(set(totals)) == 1  # never raised: the sampling stayed within its plan
    episodes = [k for k in steps if k]
    assert max(episodes) == 1 and len(episodes) == sum(episodes)  # one episode at a time
    assert steps.count(0) >= 13  # and the generations after each backend call: 13 members, one call each a wave
    assert postfix[-1] == f"{game.generations} generations"
    totals.clear()  # up to 12 members sampling has no default budget: every coalition is the (upper) bound
    small = System.build(SystemSpec("majority_vote", "rg/basic_arithmetic", "sim:random-5", split="test",
                                    task_kwargs={"size": 10}))
    evaluate(CoalitionGame(small, progress=True), ["mc"], EvalOptions(n_boot=50))
    assert totals[0] == (2 ** 5 - 1) * 10 and len(set(totals)) == 1
    unshared = CoalitionGame(small, progress=True, share_generations=False)  # every Ask generates
    evaluate(unshared, ["loo"], EvalOptions(n_boot=50))
    assert postfix[-1] == f"{unshared.generations} generations"


@pytest.mark.slow
def test_eval_with_a_raised_exact_limit_says_the_cost_then_enumerates(tmp_path, capsys):
    assert main(["eval", "--pool", "sim:random-13", "--protocol", "majority_vote", "--estimator", "shapley",
                 "--exact-limit", "13", "--items", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.index("2^13 - 1 = 8191 coalitions") < out.index("full coalition")  # said before the work
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["primary_estimator"] == "shapley" and summary["cost"]["coalitions_evaluated"] == 2 ** 13 - 1


def test_a_warning_reaches_the_terminal_as_one_cgym_line(tmp_path):
    """A pool whose server is down is named before the run, as one `cgym: warning:` line: no Python warning
    text (category, file, source line) reaches the user."""
    pool = tmp_path / "pool.yaml"
    pool.write_text("name: down\nmembers:\n  - {name: atlas, backend: sim, model: sim:demo/atlas}\n"
                    "  - {name: far, backend: openai, model: m, base_url: 'http://127.0.0.1:9/v1', max_retries: 0}\n")
    done = subprocess.run([sys.executable, "-m", "coalition_gym.cli", "run", "coalition_gym/MajorityVote-v0",
                           "--pool", str(pool), "--episodes", "1", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)
    lines = done.stderr.splitlines()
    said = [line for line in lines if "does not answer" in line]
    assert len(said) == 1 and said[0].startswith("cgym: warning: pool 'down': the server of far"), done.stderr
    assert "UnreachableServerWarning" not in done.stderr and "warnings.warn" not in done.stderr
