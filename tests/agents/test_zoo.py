"""The tiny zoo: HF folders that load with the Auto classes, a chat template that matches training,
deterministic seeded training, the recipe-hashed cache, and `cgym zoo`."""

from __future__ import annotations

import json

import pytest

from coalition_gym.agents import zoo
from coalition_gym.agents.zoo import (
    CHAT_TEMPLATE,
    ZOO_RECIPES,
    ZooModelSpec,
    ZooRecipe,
    build_zoo,
    ensure_zoo,
    render_chat,
    zoo_dir,
    zoo_task,
)
from coalition_gym.errors import ConfigError, UnknownNameError
from coalition_gym.types import Message

MICRO = ZooRecipe("micro", (ZooModelSpec("m1", {"arith": 1.0}, n_embd=16, n_layer=1, n_head=2, steps=6,
                                         batch_size=8, debate_fraction=0.5, seed=3, context=320),),
                  train_items=40, eval_items=4)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> zoo.ZooBuild:
    return build_zoo("tiny", tmp_path_factory.getbasetemp() / "cgym-home" / "zoo", progress=False)


def test_models_are_ordinary_hf_folders(tiny):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    for name in ZOO_RECIPES["tiny"].models:
        folder = tiny.model_path(name.name)
        for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                  "generation_config.json"):
            assert (folder / f).is_file(), f
        model = AutoModelForCausalLM.from_pretrained(folder)
        tok = AutoTokenizer.from_pretrained(folder)
        assert type(model).__name__ == "GPT2LMHeadModel"
        assert (tok.pad_token, tok.bos_token, tok.eos_token) == ("<pad>", "<bos>", "<eos>")
        assert tok.chat_template == CHAT_TEMPLATE and model.config.n_positions == name.context
        text = "Calculate 3 + 4.\nAnswer: 7"
        assert tok.decode(tok(text)["input_ids"]) == text  # character level, lossless on ASCII


@pytest.mark.parametrize("messages", [
    [Message("user", "Calculate 3 + 4.\nAnswer:")],
    [Message("user", "Calculate 3 + 4.\nAnswer:"), Message("assistant", " 7"),
     Message("user", "Here are the solutions of the other agents ...\nAnswer:")],
    [Message("system", "You are a careful problem solver."), Message("user", "Hi\n\nThink it through.")],
])
def test_chat_template_renders_what_training_used(messages):
    tok = zoo.char_tokenizer()
    chat = [{"role": m.role, "content": m.content} for m in messages]
    assert tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) == "<bos>" + render_chat(messages)


def test_training_data_use_the_protocol_formats():
    import random

    task = zoo_task("arith", size=5)
    item = task.items("train")[0]
    msgs = zoo.train._debate_messages(task, item, random.Random(0))
    from coalition_gym.prompts import debate_followup

    assert msgs[0] == task.prompt(item, "compact")[0] and msgs[1].role == "assistant"
    assert msgs[2].content.startswith(debate_followup([" x"], "compact").content.split("Agent 1")[0])
    ex = zoo.train._encode(task.prompt(item, "compact"), item.gold)
    assert zoo.char_tokenizer().decode(ex.prompt + ex.completion) == (
        f"<bos>{item.question}\nAnswer: {item.gold}<eos>")


def test_build_reports_accuracy_and_training_learned_something(tiny):
    assert set(tiny.models) == {"pico", "nano"}
    for entry in tiny.models.values():
        assert set(entry["test_accuracy"]) == set(zoo.ZOO_TASKS) == set(entry["dev_accuracy"])
        assert all(0.0 <= a <= 1.0 for a in entry["test_accuracy"].values())
        assert entry["final_loss"] < 4.0  # below the ~4.6 nats of a uniform guess over the vocabulary
    table = tiny.table()
    assert "| pico |" in table and "arith acc" in table and "reverse acc" in table
    manifest = json.loads((tiny.path / "zoo.json").read_text())
    assert manifest["digest"] == ZOO_RECIPES["tiny"].digest() and manifest["task_settings"]["arith"]["dataset"] == \
        "basic_arithmetic"


def test_training_is_deterministic(tmp_path):
    a = build_zoo(MICRO, tmp_path / "a", progress=False)
    b = build_zoo(MICRO, tmp_path / "b", progress=False)
    bytes_a = (a.model_path("m1") / "model.safetensors").read_bytes()
    assert bytes_a == (b.model_path("m1") / "model.safetensors").read_bytes()
    assert a.models["m1"]["final_loss"] == b.models["m1"]["final_loss"]


def test_parallel_workers_build_the_same_models(tmp_path):
    two = ZooRecipe("micro2", MICRO.models + (ZooModelSpec("m2", {"reverse": 1.0}, n_embd=16, n_layer=1, n_head=2,
                                                           steps=4, batch_size=8, seed=4, context=320),),
                    train_items=40, eval_items=4)
    serial = build_zoo(two, tmp_path / "serial", progress=False, workers=1)
    parallel = build_zoo(two, tmp_path / "parallel", progress=False, workers=2)
    assert list(parallel.models) == ["m1", "m2"]
    for name in ("m1", "m2"):
        assert (serial.model_path(name) / "model.safetensors").read_bytes() == \
            (parallel.model_path(name) / "model.safetensors").read_bytes()


def test_a_parallel_build_reports_progress_from_its_first_second(tmp_path, monkeypatch):
    monkeypatch.setattr(zoo.build, "HEARTBEAT_SECONDS", 0.05)
    two = ZooRecipe("micro3", (ZooModelSpec("m1", {"arith": 1.0}, n_embd=16, n_layer=1, n_head=2, steps=60,
                                            batch_size=8, seed=3, context=320),
                               ZooModelSpec("m2", {"reverse": 1.0}, n_embd=16, n_layer=1, n_head=2, steps=60,
                                            batch_size=8, seed=4, context=320)), train_items=40, eval_items=4)
    lines: list[str] = []
    build_zoo(two, tmp_path, progress=False, workers=2, log=lines.append)
    assert lines[0].startswith("zoo micro3: training 2 models (m1, m2) in 2 worker processes")
    status = [line for line in lines if "step " in line]
    assert status and all(line.startswith("zoo micro3 (") for line in status)
    assert any("test accuracy" in line for line in lines[-2:])


def test_cache_is_reused_and_versioned_by_the_recipe(tmp_path, monkeypatch):
    first = build_zoo(MICRO, tmp_path, progress=False)
    assert first.built and first.path == zoo_dir(MICRO, tmp_path) and first.path.name.startswith("micro-")
    again = build_zoo(MICRO, tmp_path, progress=False)
    assert not again.built and again.models == first.models
    changed = ZooRecipe("micro", (ZooModelSpec("m1", {"arith": 1.0}, n_embd=16, n_layer=1, n_head=2, steps=7,
                                               batch_size=8, seed=3, context=320),), train_items=40, eval_items=4)
    assert changed.digest() != MICRO.digest() and zoo_dir(changed, tmp_path) != first.path
    monkeypatch.setenv("COALITION_GYM_HOME", str(tmp_path / "home"))
    assert zoo.zoo_home() == tmp_path / "home" / "zoo"
    assert ensure_zoo(MICRO).path.parent == tmp_path / "home" / "zoo"  # built on first use
    (first.path / "zoo.json").write_text("{broken")  # a damaged build is rebuilt, not trusted
    assert build_zoo(MICRO, tmp_path, progress=False).built


def test_default_recipe_is_heterogeneous():
    models = ZOO_RECIPES["default"].models
    assert len(models) >= 3
    assert len({tuple(sorted(m.mix.items())) for m in models}) >= 3  # different task mixes
    assert len({(m.n_embd, m.n_layer) for m in models}) >= 3  # different sizes
    assert len({m.steps for m in models}) >= 2  # different training lengths
    assert all(m.context >= 384 for m in models)  # room for debate follow-up prompts


def test_bad_recipes_are_refused():
    with pytest.raises(UnknownNameError, match="zoo task 'algebra'"):
        ZooModelSpec("x", {"algebra": 1.0})
    with pytest.raises(ConfigError, match="multiple of"):
        ZooModelSpec("x", {"arith": 1.0}, n_embd=30, n_head=4)
    with pytest.raises(ConfigError, match="mix"):
        ZooModelSpec("x", {"arith": 0.0})
    with pytest.raises(UnknownNameError, match="zoo recipe 'huge'"):
        build_zoo("huge")
    with pytest.raises(UnknownNameError, match="zoo task"):
        zoo_task("poetry")


def test_cgym_zoo_build_and_list(tmp_path, capsys, tiny):
    from coalition_gym.cli import main

    root = str(tiny.path.parent)
    assert main(["zoo", "build", "--recipe", "tiny", "--out", root]) == 0
    out = capsys.readouterr().out
    assert "already built" in out and "| pico |" in out and "arith acc" in out
    assert main(["zoo", "list", "--out", root]) == 0
    out = capsys.readouterr().out
    assert "tiny" in out and "built" in out and "default" in out
    assert main(["zoo", "build", "--recipe", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown zoo recipe 'nope'" in capsys.readouterr().err
