"""Every subcommand refuses bad input before any work: one actionable line on stderr, exit 2.

``python tests/cli/test_bad_inputs.py`` prints the table (case -> message -> exit code) as Markdown.
"""

from __future__ import annotations

import contextlib
import io
import sys
import time

import pytest

from coalition_gym.cli import main

RUN = ["run", "coalition_gym/Debate-v0"]
#: (argv, a fragment of the message). Every case must exit 2 within a second, before any episode runs.
CASES: list[tuple[list[str], str]] = [
    (["envs", "--nope"], "cgym envs: error: unrecognized argument --nope. See `cgym envs --help`"),
    (["train", "--polcy", "x"], "cgym train: error: unrecognized argument --polcy. Did you mean --policy?"),
    (["eval", "--ouput", "x"], "cgym eval: error: unrecognized argument --ouput. Did you mean --out?"),
    (["eval", "--estimatr=loo"], "Did you mean --estimator"),
    (["run"], "required: env_id"),
    (["run", "coalition_gym/Debat-v0"], "Did you mean 'coalition_gym/Debate-v0'"),
    (RUN + ["--episodes", "0"], "--episodes: 0 must be >= 1"),
    (RUN + ["--episodes", "abc"], "'abc' is not an integer"),
    (RUN + ["--size", "0"], "--size: 0 must be >= 1"),
    (RUN + ["--task", "rg/nope"], "unknown reasoning-gym dataset 'nope'"),
    (RUN + ["--split", "validation"], "unknown split 'validation'. Use one of test, dev, train"),
    (RUN + ["--pool", "sim:nope"], "Did you mean 'sim:demo'"),
    (RUN + ["--pool", "/no/such/pool.yaml"], "pool file '/no/such/pool.yaml' does not exist"),
    (RUN + ["--members", "atlas,zeus"], "unknown member of pool 'sim:demo' 'zeus'"),
    (RUN + ["--members", "atlas,atlas"], "names a member twice"),
    (RUN + ["--set", "rounds"], "--set expects key=value"),
    (RUN + ["--set", "roundz=2"], "has no setting 'roundz'"),
    (RUN + ["--set", "rounds=0"], "rounds=0 must be >= 1"),
    (RUN + ["--set", "rounds=abc"], "rounds='abc' must be an integer"),
    (RUN + ["--set", "temperature=hot"], "temperature='hot' must be a number"),
    (RUN + ["--out", "/dev/null/x"], "lies under /dev/null, which is a file"),
    (RUN + ["--out", "/proc/x"], "--out /proc/x: cannot write there"),
    (RUN + ["--out", "/proc"], "--out /proc: cannot write there"),
    (RUN + ["--max-failures", "-1"], "'-1' is not a failure limit"),
    (["run", "coalition_gym/MajorityVote-v0", "--task", "humaneval", "--split", "train"], "held out"),
    (["eval", "--protocol", "nope"], "unknown protocol 'nope'"),
    (["run", "sparta"], "trains its members before answering, so it has no episodes"),
    (["eval", "--protocol", "sparta"], "no member of pool 'sim:demo' has trainable weights"),
    (["eval", "--protocol", "debate", "--save-trained", "trained"], "'debate' trains nothing"),
    (["eval", "--protocol", "sparta", "--set", "judge=oracle"], "sparta: judge='oracle'"),
    (["eval", "--estimator", "shapely"], "unknown estimator 'shapely'. Did you mean 'shapley'"),
    (["eval", "--items", "0"], "--items: 0 must be >= 1"),
    (["eval", "--bootstrap", "0"], "--bootstrap: 0 must be >= 2"),
    (["eval", "--mc-tolerance", "-1"], "--mc-tolerance: -1 must be >= 0"),
    (["eval", "--mc-budget", "0"], "--mc-budget: 0 must be >= 1"),
    (["eval", "--members", "atlas,zeus"], "unknown member of pool 'sim:demo' 'zeus'"),
    (["eval", "--task", "nope"], "unknown task 'nope'"),
    (["eval", "--split", "tset"], "Did you mean 'test'"),
    (["eval", "--set", "rounds=-2"], "rounds=-2 must be >= 1"),
    (["eval", "--out", "/dev/null/x"], "lies under /dev/null, which is a file"),
    (["eval", "--cache", "/dev/null/c"], "--cache /dev/null/c: lies under /dev/null"),
    (["eval", "--executor", "spark"], "unknown executor 'spark'"),
    (["eval", "--executor", "rya"], "Did you mean 'ray'"),
    (["eval", "--sampler", "hybird"], "Did you mean 'hybrid'"),
    (["eval", "--out", "/proc/x"], "--out /proc/x: cannot write there"),
    (["eval", "--cache", "/proc/c"], "--cache /proc/c: cannot write there"),
    (["eval", "--protocol", "sparta", "--save-trained", "/proc/t"], "--save-trained /proc/t: cannot write there"),
    (["eval", "--max-failures", "5x"], "'5x' is not a failure limit"),
    (["sweep", "--alpha", "7"], "--alpha: 7 must be <= 0.5"),
    (["sweep", "--pools", "sim:demo,sim:nope"], "unknown pool preset 'sim:nope'"),
    (["sweep", "--protocols", "debate,nope"], "unknown protocol 'nope'"),
    (["sweep", "--tasks", "rg/basic_arithmetic,rg/nope"], "unknown reasoning-gym dataset 'nope'"),
    (["sweep", "--estimator", "x"], "unknown estimator 'x'"),
    (["sweep", "--items", "0"], "--items: 0 must be >= 1"),
    (["sweep", "--out", "/dev/null/x"], "lies under /dev/null, which is a file"),
    (["sweep", "--cache", "/dev/null/c"], "--cache /dev/null/c"),
    (["sweep", "--out", "/proc/x"], "--out /proc/x: cannot write there"),
    (["sweep", "--estimator", "lo"], "Did you mean 'loo'"),
    (["serve", "coalition_gym/Debat-v0"], "Did you mean 'coalition_gym/Debate-v0'"),
    (["serve", "coalition_gym/Debate-v0", "--host", "0.0.0.0"], "is not local"),
    (["serve", "coalition_gym/Debate-v0", "--port", "70000"], "--port: 70000 must be <= 65535"),
    (["serve", "coalition_gym/Debate-v0", "--set", "roundz=2"], "has no setting 'roundz'"),
    (["train", "--method", "nope"], "unknown method 'nope'"),
    (["train", "--method", "crll"], "Did you mean 'crl'"),
    (["train", "--preset", "huge"], "unknown preset 'huge'. Use one of auto, paper, tiny"),
    (["train", "--preset", "tyni"], "Did you mean 'tiny'"),
    (["train", "--out", "/proc/x"], "--out /proc/x: cannot write there"),
    (["train", "--steps", "0"], "--steps: 0 must be >= 1"),
    (["train", "--set", "steps=abc"], "steps='abc' must be an integer >= 1"),
    (["train", "--set", "group_size=1"], "group_size=1: group-relative advantages need G >= 2"),
    (["train", "--set", "nope=1"], "no training method has a setting 'nope'"),
    (["train", "--protocol", "nope"], "unknown protocol 'nope'"),
    (["train", "--set", "protocol.rounds=0", "--protocol", "debate"], "rounds=0 must be >= 1"),
    (["train", "--task", "rg/nope"], "unknown reasoning-gym dataset 'nope'"),
    (["train", "--policy", "/does/not/exist"], "neither a zoo model"),
    (["train", "--collaborators", "sim:nope"], "unknown pool preset 'sim:nope'"),
    (["train", "--members", "zeus"], "unknown member of pool 'sim:calculators' 'zeus'"),  # train's default pool
    (["train", "--out", "/dev/null/x"], "lies under /dev/null, which is a file"),
    (["train", "--executor", "spark"], "unknown executor 'spark'"),
    (["train", "--reward", "flip"], "unknown reward 'flip'. Use one of system, negate"),
    (["train", "--reward", "negat"], "Did you mean 'negate'"),
    (["robustness"], "required: --adversary"),
    (["robustness", "--adversary", "saboteur"], "confidently_wrong, persuader, colluders, format_breaker, "
                                                "judge_targeting"),
    (["robustness", "--adversary", "/no/such/model"], "neither a profile nor a model folder"),
    (["robustness", "--adversary", "persuader", "--seat", "zeus"], "unknown seat (a member of the coalition) "
                                                                   "'zeus'"),
    (["robustness", "--adversary", "persuader", "--members", "atlas,delta", "--seat", "cirrus"],
     "Known: atlas, delta"),
    (["robustness", "--adversary", "colluders", "--members", "atlas"], "colluders take two seats"),
    (["robustness", "--adversary", "persuader", "--protocols", "debate,debat"], "Did you mean 'debate'"),
    (["robustness", "--adversary", "persuader", "--set", "roundz=2"], "none of debate, llm_blender"),
    (["robustness", "--adversary", "persuader", "--items", "0"], "--items: 0 must be >= 1"),
    (["robustness", "--adversary", "persuader", "--out", "/dev/null/x"], "lies under /dev/null, which is a file"),
    (["robustness", "--adversary", "persuader", "--out", "/proc/x"], "--out /proc/x: cannot write there"),
    (["robustness", "--adversary", "persuadr"], "Did you mean 'persuader'"),
    (["zoo"], "required: ZOO_COMMAND"),
    (["zoo", "build", "--recipe", "nope"], "unknown zoo recipe 'nope'"),
    (["zoo", "build", "--out", "/dev/null/zoo"], "lies under /dev/null, which is a file"),
    (["zoo", "list", "--out", "/dev/null/zoo"], "lies under /dev/null, which is a file"),
    (["tasks", "--bogus"], "unrecognized argument --bogus"),
    (["demo", "--items", "0"], "--items: 0 must be >= 1"),
    (["demo", "--pool", "sim:nope"], "unknown pool preset 'sim:nope'"),
    (["demo", "--task", "rg/nope"], "unknown reasoning-gym dataset 'nope'"),
    (["demo", "--out", "/dev/null/x"], "lies under /dev/null, which is a file"),
    (["demo", "--out", "/proc/x"], "--out /proc/x: cannot write there"),
    (["zoo", "build", "--out", "/proc/zoo"], "--out /proc/zoo: cannot write there"),
    (["compare", "somewhere", "--out", "/proc/x"], "--out /proc/x: cannot write there"),
    (["--import", "no_such_module_xyz", "envs"], "--import no_such_module_xyz failed: ModuleNotFoundError"),
    (["--import", "/no/such/plugin.py", "envs"], "--import /no/such/plugin.py: no such file"),
]


def call(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv,says", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_is_refused_in_one_line_before_any_work(argv, says, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written: the default output folders would land here
    code, out, err = call(argv)
    lines = [line for line in err.splitlines() if line.startswith(("cgym: error:", "cgym ")) and "error:" in line]
    assert code == 2 and len(lines) == 1 and says in lines[0], err
    assert "Traceback" not in err and out == ""
    assert list(tmp_path.iterdir()) == []  # refused before any work: no output folder was made


def test_a_mistyped_flag_gets_its_subcommands_usage(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = call(["train", "--polcy", "x"])
    assert code == 2 and err.startswith("usage: cgym train ") and "--policy" in err



@pytest.mark.parametrize("argv,says", [
    (["eval", "--members", "atlas,dleta"], "unknown member of pool 'sim:demo' 'dleta'. Did you mean 'delta'?"),
    (["eval", "--pool", "zoo:default", "--members", "abacus,qill"], "Did you mean 'quill'?"),
    (["train", "--collaborators", "sim:split", "--members", "ana,bne"], "Did you mean 'ben'?"),
    (["train", "--members", "abel,gaus"], "Did you mean 'gauss'?"),  # the default run's collaborators
])
def test_a_mistyped_member_is_named_before_the_output_folder(argv, says, tmp_path, monkeypatch):
    """An --out holding another run is refused too, but the typo is what the user hears first."""
    monkeypatch.chdir(tmp_path)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("a user's file")
    code, out, err = call(argv + ["--out", str(taken)])
    assert code == 2 and says in err and "--out" not in err, err
    assert (taken / "notes.txt").read_text() == "a user's file" and len(list(taken.iterdir())) == 1


if __name__ == "__main__":
    sys.argv = sys.argv[:1]
    print("| command | message | exit |\n|---|---|---|")
    for argv, _ in CASES:
        start = time.perf_counter()
        code, _, err = call(argv)
        message = next((line for line in err.splitlines() if "error:" in line), "").replace("|", "\\|")
        print(f"| `cgym {' '.join(argv)}` | {message[:160]} | {code} ({time.perf_counter() - start:.1f}s) |")
