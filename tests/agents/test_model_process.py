"""Local models answered from a process of their own (``agents.model_process``): the same samples as in process,
only CPU models loaded from a folder move, a folder that cannot load and a child that dies are named."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from coalition_gym.agents.base import settle
from coalition_gym.agents.cache import CachedGenerator, GenerationCache
from coalition_gym.agents.hf import HFGenerator
from coalition_gym.agents.model_process import ModelProcess, ProcessGenerator, in_model_process, movable
from coalition_gym.agents.options import HFOptions
from coalition_gym.agents.pools import WithSampling, load_pool
from coalition_gym.agents.simulated import SimulatedAgent
from coalition_gym.errors import BackendError
from coalition_gym.types import Ask, Message, SamplingParams


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    from coalition_gym.agents.zoo import build_zoo

    build = build_zoo("tiny", tmp_path_factory.getbasetemp() / "cgym-home" / "zoo", progress=False)
    return build.model_path(list(build.models)[-1])


def asks(n: int, member: str = "m") -> list[Ask]:
    return [Ask(member=member, messages=(Message("user", f"Calculate {k} + {k + 1}.\nAnswer:"),), seed=1000 + k,
                params=SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=8)) for k in range(n)]


def test_a_model_in_its_own_process_answers_what_it_answers_in_process(model_dir):
    local = HFGenerator(str(model_dir), options=HFOptions(device="cpu", max_new_tokens=8))
    sampled = WithSampling(local, temperature=0.5)  # a wrapper travels with its model
    moved, process = in_model_process({"a": local, "b": local, "c": sampled})
    assert process is not None
    try:
        assert isinstance(moved["a"], ProcessGenerator) and moved["a"] is moved["b"]  # one proxy per backend
        assert moved["a"].identity == local.identity and moved["c"].identity == sampled.identity
        assert moved["a"].describe()["process"] == "model process"
        batch = asks(6)
        assert [s.text for s in moved["a"].generate(batch)] == [s.text for s in local.generate(batch)]
        assert [s.text for s in moved["c"].generate(batch)] == [s.text for s in sampled.generate(batch)]
    finally:
        process.close()
    assert not process.process.is_alive()


def test_only_cpu_models_loaded_from_a_folder_move(model_dir, tmp_path):
    local = HFGenerator(str(model_dir), options=HFOptions(device="cpu", max_new_tokens=8))
    from_object = HFGenerator(local.model, local.tokenizer)  # no folder to reload from
    sim = load_pool("sim:demo").members["atlas"]
    cached = CachedGenerator(local, GenerationCache(tmp_path / "cache.sqlite"))
    assert movable(local) and movable(WithSampling(local, temperature=0.5))
    assert not movable(from_object) and not movable(cached)
    assert isinstance(sim, SimulatedAgent) and not movable(sim)
    backends = {"x": from_object, "y": cached, "s": sim}
    unchanged, process = in_model_process(backends)
    assert process is None and unchanged == backends


def test_a_folder_that_does_not_load_is_named_before_any_call(model_dir, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(model_dir, folder)
    local = HFGenerator(str(folder), options=HFOptions(device="cpu", max_new_tokens=8))
    for weights in folder.glob("*.safetensors"):
        weights.write_bytes(b"not weights")
    process = ModelProcess([local])
    try:
        with pytest.raises(BackendError, match="could not load its models"):
            process.wait_ready()
    finally:
        process.close()


def test_a_model_process_that_dies_fails_its_calls_with_a_clear_error(model_dir):
    local = HFGenerator(str(model_dir), options=HFOptions(device="cpu", max_new_tokens=8))
    moved, process = in_model_process({"a": local})
    assert process is not None
    try:
        process.wait_ready()
        process.process.kill()
        process.process.join(timeout=10)
        results = settle(moved["a"], asks(2))
        assert all(isinstance(r, BackendError) and "model process exited" in str(r) for r in results)
    finally:
        process.close()
