"""The shipped zoo: the package's own default and tiny builds load by name on any machine without a
build, match their fingerprints, refuse damage, and a local build is compared with them, not used."""

from __future__ import annotations

import json
import shutil

import pytest

from coalition_gym.agents import zoo
from coalition_gym.agents.options import HFOptions
from coalition_gym.agents.zoo import (
    ZOO_RECIPES,
    ZooModelSpec,
    ZooNotBuiltError,
    ZooRecipe,
    build_zoo,
    ensure_zoo,
    model_fingerprint,
    provenance,
    shipped,
)
from coalition_gym.errors import ConfigError


@pytest.mark.parametrize("recipe", ["default", "tiny"])
def test_shipped_builds_load_by_name_and_match_their_fingerprints(recipe, tmp_path, monkeypatch):
    monkeypatch.setenv("COALITION_GYM_HOME", str(tmp_path / "empty-home"))  # no local build anywhere
    build = ensure_zoo(recipe)
    assert build.source == "shipped" and not build.built and build.path == shipped.shipped_dir(recipe)
    assert not (tmp_path / "empty-home").exists()  # nothing was built or cached
    assert list(build.models) == [m.name for m in ZOO_RECIPES[recipe].models]
    for name, entry in build.models.items():
        assert len(entry["sha256"]) == 64 and model_fingerprint(build.model_path(name)) == entry["sha256"]
        assert set(entry["test_accuracy"]) == set(zoo.ZOO_TASKS)
    total = sum(f.stat().st_size for f in build.path.rglob("*") if f.is_file())
    assert total < 8 * 2**20  # a few MB, fine to ship


def test_fingerprint_ignores_paths_and_times_but_not_bytes(tmp_path):
    src = shipped.shipped_dir("tiny") / "pico"
    copy = tmp_path / "pico"
    shutil.copytree(src, copy)  # other path, other mtimes
    assert model_fingerprint(copy) == model_fingerprint(src)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert model_fingerprint(copy) != model_fingerprint(src)


def test_a_damaged_shipped_copy_is_refused(tmp_path, monkeypatch):
    root = tmp_path / "shipped"
    shutil.copytree(shipped.SHIPPED_ROOT / "tiny", root / "tiny")
    weights = root / "tiny" / "nano" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)
    monkeypatch.setattr(shipped, "SHIPPED_ROOT", root)
    shipped._checked.cache_clear()
    with pytest.raises(ConfigError, match="'nano'.*does not match its sha256.*reinstall"):
        ensure_zoo("tiny")


def test_a_changed_recipe_is_not_served_the_shipped_models(tmp_path, monkeypatch):
    changed = ZooRecipe("tiny", ZOO_RECIPES["tiny"].models[:1], train_items=40, eval_items=4)
    assert shipped.shipped_manifest(changed) is None  # other digest: the shipped copy is not this recipe
    monkeypatch.setenv("COALITION_GYM_HOME", str(tmp_path))
    build = ensure_zoo(changed)
    assert build.source == "local build" and build.built and build.path.parent == tmp_path / "zoo"


def test_building_into_the_shipped_folder_is_refused():
    with pytest.raises(ConfigError, match="inside the package's shipped zoo"):
        build_zoo("tiny", shipped.SHIPPED_ROOT, progress=False)


def test_an_unbuilt_slow_recipe_refuses_with_the_build_time(tmp_path, monkeypatch):
    monkeypatch.setenv("COALITION_GYM_HOME", str(tmp_path))
    calls = []

    def estimate(recipe):
        calls.append(recipe.name)
        return 3 * 3600.0
    monkeypatch.setattr(zoo.build, "estimate_build_seconds", estimate)
    with pytest.raises(ZooNotBuiltError, match=r"build it first: cgym zoo build --recipe large \(about 180 min"):
        ensure_zoo("large")
    assert calls == ["large"] and not (tmp_path / "zoo").exists()  # refused before any training


def test_the_build_time_estimate_is_measured():
    quick = ZooRecipe("est", (ZooModelSpec("e1", {"arith": 1.0}, n_embd=16, n_layer=1, n_head=2, steps=400,
                                           batch_size=8, context=320),), train_items=40, eval_items=4)
    longer = ZooRecipe("est", (ZooModelSpec("e1", {"arith": 1.0}, n_embd=16, n_layer=1, n_head=2, steps=4000,
                                            batch_size=8, context=320),), train_items=40, eval_items=4)
    a, b = zoo.estimate_build_seconds(quick), zoo.estimate_build_seconds(longer)
    assert 0 < a < 60 and b > a  # proportional to the steps (timings are noisy: no exact ratio)


def test_provenance_and_the_run_record_name_the_weights():
    from coalition_gym.agents.hf import HFGenerator
    from coalition_gym.agents.pools import load_pool
    from coalition_gym.records import describe_pool

    folder = shipped.shipped_dir("tiny") / "pico"
    info = provenance(folder)
    assert info == {"zoo_recipe": "tiny", "zoo_model": "pico", "source": "shipped",
                    "sha256": shipped.shipped_manifest("tiny")["models"]["pico"]["sha256"],
                    "recipe_digest": ZOO_RECIPES["tiny"].digest()}
    assert HFGenerator(str(folder), options=HFOptions(device="cpu", max_new_tokens=4)).describe()["weights"] == info
    record = describe_pool(load_pool("zoo:tiny"))
    assert {m: d["weights"]["sha256"] for m, d in record["members"].items()} == \
        {m: e["sha256"] for m, e in shipped.shipped_manifest("tiny")["models"].items()}


def test_verify_reports_identity_and_drift(tmp_path):
    local = build_zoo("tiny", tmp_path, progress=False)
    rows = shipped.verify("tiny", local)
    ref = shipped.shipped_manifest("tiny")["models"]
    for row in rows:  # bit-identical only where this machine's build equals the shipped one
        assert row["identical"] == (row["local_sha256"] == ref[row["model"]]["sha256"])
    # a local build that drifted (here: one weight flipped, one accuracy changed) is reported, not refused
    weights = local.model_path("pico") / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    local.models["pico"] = {**local.models["pico"], "sha256": model_fingerprint(local.model_path("pico")),
                            "test_accuracy": {**local.models["pico"]["test_accuracy"], "arith": 0.5}}
    drifted = {r["model"]: r for r in shipped.verify("tiny", local)}
    assert not drifted["pico"]["identical"]
    assert drifted["pico"]["accuracy_drift"]["test"]["arith"] == pytest.approx(0.5 - ref["pico"]["test_accuracy"]["arith"])
    assert "differ (" in shipped.verify_table(list(drifted.values()))
    with pytest.raises(ConfigError, match="ships no build of zoo recipe 'large'"):
        shipped.verify("large", local)


def test_cgym_zoo_verify_and_list(tmp_path, capsys):
    from coalition_gym.cli import main

    assert main(["zoo", "verify", "--recipe", "tiny", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| pico |" in out and "test acc (shipped -> local)" in out and "models of 'tiny' built here" in out
    assert (tmp_path / f"tiny-{ZOO_RECIPES['tiny'].digest()}" / "zoo.json").is_file()  # the local build, in the cache
    assert main(["zoo", "list", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "tiny" in out and "shipped; local build built" in out and "large" in out and "not shipped" in out
    assert main(["zoo", "verify", "--recipe", "large", "--out", str(tmp_path)]) == 2
    assert "ships no build of zoo recipe 'large'" in capsys.readouterr().err


def test_the_shipped_manifest_is_strict_json():
    for recipe in ("default", "tiny"):
        text = (shipped.shipped_dir(recipe) / "zoo.json").read_text()
        json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))


def test_a_local_build_does_not_replace_the_shipped_models(tmp_path, monkeypatch):
    monkeypatch.setenv("COALITION_GYM_HOME", str(tmp_path))
    local = build_zoo("tiny", progress=False)  # into the cache, as `cgym zoo build --recipe tiny` does
    assert local.path.parent == tmp_path / "zoo" and local.source == "local build"
    used = ensure_zoo("tiny")
    assert used.source == "shipped" and used.path == shipped.shipped_dir("tiny")
    assert provenance(local.model_path("pico"))["source"] == "local build"
