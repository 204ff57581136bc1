"""`cgym gain`: protocols against cost-matched baselines (best single member, self-consistency@k, pool vote),
and the honest token counts the costs rest on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coalition_gym.agents.cache import _decode, _encode
from coalition_gym.agents.openai_api import OpenAIGenerator
from coalition_gym.agents.options import OpenAIOptions
from coalition_gym.agents.pools import load_pool
from coalition_gym.agents.simulated import SimulatedAgent
from coalition_gym.cli import main
from coalition_gym.envs.dispatch import sample_tokens
from coalition_gym.envs.protocols import make_protocol
from coalition_gym.envs.runner import run_episodes
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.errors import BackendError, ConfigError
from coalition_gym.reports.baselines import matched_k
from coalition_gym.reports.gain import GainOptions, gain
from coalition_gym.tasks import make as make_task
from coalition_gym.types import Ask, Sample

# One dominant member; the rest share their blind spots and their wrong answers (they outvote it).
DOMINANT = """name: dominant
members:
  - {name: ace, backend: sim, profile: {skill: 0.95}}
  - {name: herd1, backend: sim, profile: {skill: 0.2, error_group: herd, correlation: 0.9}}
  - {name: herd2, backend: sim, profile: {skill: 0.2, error_group: herd, correlation: 0.9}}
  - {name: herd3, backend: sim, profile: {skill: 0.2, error_group: herd, correlation: 0.9}}
"""
# Five equal members with independent errors that scatter: the wisdom of crowds.
CROWD = "name: crowd\nmembers:\n" + "".join(
    f"  - {{name: a{i}, backend: sim, profile: {{skill: 0.6, diversity: 1.4}}}}\n" for i in range(1, 6))


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("COALITION_GYM_HOME", str(tmp_path / "home"))  # the dev-score cache stays in the test


def _pool(tmp_path: Path, text: str) -> str:
    path = tmp_path / "pool.yaml"
    path.write_text(text)
    return str(path)


def _strict(path: Path):
    def refuse(name):
        raise ValueError(f"non-strict JSON constant {name}")
    return json.loads(path.read_text(), parse_constant=refuse)


def _gain_cli(tmp_path, pool, protocols, *extra):
    out = tmp_path / "out"
    code = main(["gain", "--pool", pool, "--protocols", protocols, "--items", "60", "--bootstrap", "300",
                 "--out", str(out), *extra])
    return code, out


def test_dominant_member_baseline_wins(tmp_path, capsys):
    code, out = _gain_cli(tmp_path, _pool(tmp_path, DOMINANT), "majority_vote,debate")
    assert code == 0
    report = _strict(out / "gain.json")
    assert report["best_member"] == "ace" and report["dev"]["source"] == "measured"
    rows = {r["protocol"]: r for r in report["protocols"]}
    vote = rows["majority_vote"]
    assert vote["verdict"] == "baseline" and vote["gain"]["ci"][1] < 0
    assert vote["best_baseline"] in ("best_single", "self_consistency@4")
    assert rows["debate"]["gain"]["ci"][0] <= 0 and rows["debate"]["verdict"] != "protocol"
    assert report["share_beating_baseline"] == 0.0
    table = capsys.readouterr().out
    assert "| majority_vote |" in table and vote["best_baseline"] in table and "best single (ace)" in table
    assert "cost in tokens" in table  # the unit is stated
    assert (out / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert _strict(out / "run.json")["command"] and (out / "gain.md").read_text().startswith("# Gain")
    header = (out / "gain.csv").read_text().splitlines()[0]
    assert header.startswith("protocol,system,kind,unit,k,score")
    lines = (out / "results.jsonl").read_text().splitlines()
    assert {json.loads(x)["system"] for x in lines} >= {"best_single", "pool_vote", "majority_vote", "debate"}


def test_independent_errors_protocol_wins_and_k_matches_cost(tmp_path):
    code, out = _gain_cli(tmp_path, _pool(tmp_path, CROWD), "majority_vote", "--unit", "calls")
    assert code == 0
    report = _strict(out / "gain.json")
    assert report["unit"] == "calls" and "model calls" in report["unit_meaning"]
    row = report["protocols"][0]
    assert row["verdict"] == "protocol" and row["beats_baseline"] and row["gain"]["ci"][0] > 0
    # 5 members answer once: 5 calls per item, matched by self-consistency@5 exactly
    assert row["cost"]["value"] == 5.0 and row["match"] == {"unit": "calls", "k": 5, "protocol_cost": 5.0,
                                                              "baseline_cost": 5.0, "ratio": 1.0, "capped": False,
                                                              "matched": "mean cost per item"}
    by_kind = {b["kind"]: b for b in row["baselines"]}
    assert by_kind["self_consistency"]["k"] == 5 and by_kind["best_single"]["cost"]["value"] == 1.0
    assert by_kind["pool_vote"]["admissible"] is False  # majority_vote is that baseline
    assert report["share_beating_baseline"] == 1.0


def test_library_gain_matches_tokens_on_average():
    pool, task = load_pool("sim:independent"), make_task("rg/basic_arithmetic", size=30, seed=0)
    systems = [System.build(SystemSpec(make_protocol("debate", rounds=2), task, pool, split="test", n_items=30))]
    report = gain(systems, GainOptions(n_boot=200, max_k=6))
    row = report.rows[0]
    assert report.unit == "tokens" and row.match.k <= 6
    one = report.baselines["best_single"].mean_cost
    assert abs(row.match.k * one - row.cost["value"]) <= one / 2 + 1e-9 or row.match.k == 6
    assert row.match.baseline_cost == pytest.approx(report.baselines[f"self_consistency@{row.match.k}"].mean_cost)


def test_matched_k_picks_the_closest_mean_cost():
    assert matched_k(140, 13, 16) == 11  # 143 is closer than 130
    assert matched_k(5, 13, 16) == 1 and matched_k(0, 13, 16) == 1
    assert matched_k(1000, 13, 16) == 16 and matched_k(52, 13, 16) == 4
    assert matched_k(10, 0, 16) == 1
    with pytest.raises(ConfigError):
        matched_k(10, 1, 0)


@pytest.mark.parametrize("argv, words", [
    (["--pool", "sim:nope"], "sim:nope"),
    (["--protocols", "debat"], "debate"),
    (["--unit", "dollars"], "tokens"),
    (["--items", "5"], ">= 10"),
    (["--set", "nonsense=1"], "nonsense"),
    (["--task", "rg/basic_arithmetic", "--split", "dev", "--items", "10", "--task-seed", "0", "--max-k", "0"], ">= 1"),
])
def test_bad_inputs_fail_before_work(tmp_path, capsys, argv, words):
    out = tmp_path / "out"
    assert main(["gain", "--out", str(out), *argv]) == 2
    assert words in capsys.readouterr().err
    assert not out.exists()


def test_too_few_items_or_no_protocol_is_refused_before_work(monkeypatch):
    pool, task = load_pool("sim:demo"), make_task("rg/basic_arithmetic", size=5, seed=0)
    ran = []
    monkeypatch.setattr(SimulatedAgent, "generate", lambda self, asks: ran.append(asks) or [])
    with pytest.raises(ConfigError, match="at least 10 items"):
        gain([System.build(SystemSpec(make_protocol("debate"), task, pool, split="test", n_items=5))])
    with pytest.raises(ConfigError, match="at least one protocol"):
        gain([])
    with pytest.raises(ConfigError, match="unit=.dollars.; use one of tokens, calls"):
        spec = SystemSpec("debate", "rg/basic_arithmetic", pool, split="test", task_kwargs={"size": 20, "seed": 0})
        gain([System.build(spec)], GainOptions(unit="dollars"))
    assert not ran


def test_failed_episodes_exit_3_and_keep_files(tmp_path, monkeypatch, capsys):
    real = SimulatedAgent.reply

    def flaky(self, ask):
        if self.profile.name == "agent2" and ask.role != "dev":
            raise BackendError("agent2 is down")
        return real(self, ask)

    monkeypatch.setattr(SimulatedAgent, "reply", flaky)
    code, out = _gain_cli(tmp_path, "sim:independent", "majority_vote")
    assert code == 3
    err = capsys.readouterr().err
    assert "episodes failed" in err and "agent2 is down" in err
    assert _strict(out / "gain.json")["failures"]["failed"] >= 60


# -- honest token counts ---------------------------------------------------------------------------

def test_simulated_replies_report_token_counts_of_their_text():
    pool, task = load_pool("sim:demo"), make_task("rg/basic_arithmetic", size=20, seed=0)
    items = task.items("test")[:20]
    for name in ("debate", "llm_blender", "majority_vote"):
        for r in run_episodes(System.build(SystemSpec(name, task, pool, split="test", n_items=20)), items):
            outcome = r.outcome
            assert outcome is not None
            words = sum(len(t.text.split()) for t in outcome.transcript)
            if name != "llm_blender":  # the blender's ranker and fuser replies are not all in the transcript
                assert outcome.details["cost"]["tokens"] == words
            assert outcome.details["cost"]["tokens"] >= outcome.details["cost"]["calls"]
    for role in ("answer", "rank_pair", "rank_list", "fuse"):
        info = {} if role == "answer" else {"answers": ("1", "2")}
        reply = pool.backends()["judge" if role != "answer" else "atlas"].generate(
            [Ask(member="atlas", messages=(), seed=3, role=role, item=items[0], info=info)])[0]
        assert sample_tokens(reply) == len(reply.text.split())  # a simulated token is a word of its text


def test_openai_counts_tokens_from_usage_logprobs_or_tokenizer():
    gen = OpenAIGenerator("m", OpenAIOptions(base_url="http://127.0.0.1:9/v1", api_key_env=None))
    reply = {"choices": [{"message": {"content": "one two three"}, "finish_reason": "stop"}]}
    assert sample_tokens(gen._sample({**reply, "usage": {"completion_tokens": 7, "prompt_tokens": 30}})) == 7
    with_lp = {"choices": [{**reply["choices"][0], "logprobs": {"content": [{"logprob": -0.1}] * 5}}]}
    assert gen._sample(with_lp).n_tokens == 5
    plain = gen._sample(reply)
    assert plain.n_tokens is None and sample_tokens(plain) == 3  # no count from the server: whitespace words

    class CharTokenizer:
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": list(range(len(text)))}

    counted = OpenAIGenerator("m", OpenAIOptions(base_url="http://127.0.0.1:9/v1", api_key_env=None),
                              tokenizer=CharTokenizer())
    assert counted._sample(reply).n_tokens == len("one two three")
    assert _decode(_encode(Sample("x y", n_tokens=9))).n_tokens == 9  # the cache keeps the count


# -- the sweep statistic ---------------------------------------------------------------------------

def test_sweep_summary_gives_each_protocols_share_of_settings_beating_the_baseline(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", "--pools", "sim:demo,sim:independent", "--protocols", "debate,majority_vote",
            "--tasks", "rg/basic_arithmetic", "--estimator", "loo", "--items", "40", "--out", str(out)]
    assert main([*argv, "--gain", "calls"]) == 0
    summary = _strict(out / "sweep_summary.json")["summary"]["gain"]
    assert summary["unit"] == "calls" and set(summary["per_protocol"]) == {"debate", "majority_vote"}
    for entry in summary["per_protocol"].values():
        assert entry["settings"] == 2 and entry["share"] == entry["beats"] / 2
        assert {r["pool"] for r in entry["rows"]} == {"sim:demo", "sim:independent"}
        assert entry["beats"] == sum(r["verdict"] == "protocol" for r in entry["rows"])
    assert summary["per_protocol"]["debate"]["beats"] == 2  # debate's independent errors beat one model's spend
    assert "beats best cost-matched baseline" in (out / "sweep.md").read_text()
    assert "Gain (cost in calls)" in capsys.readouterr().out
    assert (out / "sim_demo" / "gain" / "rg_basic_arithmetic" / "gain.json").is_file()
    assert main([*argv[:-2], "--items", "5", "--gain", "tokens", "--out", str(tmp_path / "few")]) == 2
    assert not (tmp_path / "few").exists()
