"""The HF backend's fast decode path (static KV cache; CUDA graphs on GPU) against the eager path, on CPU:
same tokens and log-probs for the same seeds. Also batch sizing and the CUDA out-of-memory retry."""

from __future__ import annotations

import pytest

from coalition_gym.agents.hf import CPU_BATCH, HFGenerator, auto_batch_size
from coalition_gym.agents.hf_fast import CACHE_BUCKET, wants_fast
from coalition_gym.agents.options import HFOptions
from coalition_gym.errors import BackendError, ConfigError
from coalition_gym.types import Ask, Message, SamplingParams

QUESTIONS = ["Calculate 3 + 4.\nAnswer:", "Calculate 19 * 2 + 7.\nAnswer:", "Hi", "Calculate 1 - 1.\nAnswer:",
             "Spell this word backward (example: sun -> nus): cat\nAnswer:"]


@pytest.fixture(scope="module")
def zoo_dir(tmp_path_factory):
    from coalition_gym.agents.zoo import build_zoo

    build = build_zoo("tiny", tmp_path_factory.getbasetemp() / "cgym-home" / "zoo", progress=False)
    return build.model_path(list(build.models)[-1])


@pytest.fixture(scope="module")
def qwen(zoo_dir):
    """A randomly initialised Qwen2-style model (GQA, rotary) with the zoo's tokenizer: no download."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    tok = AutoTokenizer.from_pretrained(zoo_dir)
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    return AutoModelForCausalLM.from_config(cfg).eval(), tok


def asks() -> list[Ask]:
    """Greedy, sampled and nucleus rows, mixed prompt lengths (left padding) and token budgets."""
    out = []
    for k in range(12):
        q = QUESTIONS[k % len(QUESTIONS)]
        temperature, top_p = [(0.0, 1.0), (1.0, 1.0), (0.8, 0.9), (1.3, 0.5)][k % 4]
        out.append(Ask("m", (Message("user", q),), seed=100 + k,
                       params=SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=3 + 7 * (k % 3))))
    return out


def pair(model, tokenizer, **kw) -> tuple[HFGenerator, HFGenerator]:
    eager = HFGenerator(model, tokenizer, HFOptions(max_new_tokens=40, fast_decode="off", **kw))
    fast = HFGenerator(model, tokenizer, HFOptions(max_new_tokens=40, fast_decode="on", **kw))
    return eager, fast


def assert_same(a, b):
    assert [s.token_ids for s in a] == [s.token_ids for s in b]
    assert [s.finish_reason for s in a] == [s.finish_reason for s in b]
    assert [s.text for s in a] == [s.text for s in b]
    for x, y in zip(a, b):
        assert list(y.logprobs) == pytest.approx(list(x.logprobs), abs=1e-4)


@pytest.mark.parametrize("which", ["zoo", "qwen"])
def test_fast_path_gives_the_eager_tokens_and_logprobs(which, zoo_dir, qwen):
    if which == "zoo":  # GPT-2 architecture (absolute positions), trained: EOS comes mid-batch
        gen = HFGenerator(str(zoo_dir), options=HFOptions(device="cpu", max_new_tokens=40, fast_decode="off"))
        model, tok = gen.model, gen.tokenizer
    else:
        model, tok = qwen
    eager, fast = pair(model, tok)
    assert eager.describe()["fast_decode"] is False and fast.describe()["fast_decode"] is True
    batch = asks()
    ref, got = eager.generate(batch), fast.generate(batch)
    assert_same(ref, got)
    assert {s.finish_reason for s in ref} >= {"length"}
    if which == "zoo":
        stops = [len(s.token_ids) for s in ref if s.finish_reason == "stop"]
        assert stops and min(stops) < max(len(s.token_ids) for s in ref)  # an EOS in the middle of the batch
    # reusing a cached static cache of the same bucket (reset between calls) changes nothing
    assert_same(ref, fast.generate(batch))
    # odd batch sizes are padded with dummy rows to a power of two; small batches split the same
    small = HFGenerator(model, tok, options=HFOptions(max_new_tokens=40, fast_decode="on", max_batch_size=3))
    assert_same(ref, small.generate(batch))
    assert small.batch_sizes == [3, 3, 3, 3]


def test_fast_decode_setting():
    assert wants_fast("auto", "cuda:0") and not wants_fast("auto", "cpu")
    assert wants_fast("on", "cpu") and not wants_fast("off", "cuda")
    with pytest.raises(ConfigError, match="fast_decode='yes'"):
        wants_fast("yes", "cpu")
    assert CACHE_BUCKET >= 1


def test_batch_size_by_memory(qwen, zoo_dir):
    model, tok = qwen
    gen = HFGenerator(model, tok, options=HFOptions(max_new_tokens=8, fast_decode="off"))
    assert gen.max_batch_size is None and gen.batch_size(10, 8) == CPU_BATCH  # CPU: the documented default
    assert HFGenerator(model, tok, options=HFOptions(max_batch_size=5)).batch_size(10, 8) == 5
    with pytest.raises(ConfigError, match="max_batch_size=0"):
        HFGenerator(model, tok, options=HFOptions(max_batch_size=0))
    cfg = model.config  # 2 layers x 2 KV heads x 16 dims: 256 bytes of fp16 KV cache per token
    per_row = 2 * 2 * 2 * 16 * 2 * 100 + 16 * 64 * 2 * 100 + 48 * cfg.vocab_size
    assert auto_batch_size(cfg, 100, 10 * per_row, 2, share=1.0) == 10
    assert auto_batch_size(cfg, 100, 10 * per_row, 2, share=0.5) == 5
    assert auto_batch_size(cfg, 100, 0, 2) == 1
    assert auto_batch_size(cfg, 100, 10**15, 2) == 1024
    assert auto_batch_size(cfg, 200, 10**7, 2) < auto_batch_size(cfg, 100, 10**7, 2)


def test_cuda_out_of_memory_halves_the_batch_then_names_the_setting(qwen, monkeypatch):
    import torch

    model, tok = qwen
    gen = HFGenerator(model, tok, options=HFOptions(max_new_tokens=8, max_batch_size=8, fast_decode="off"))
    batch = asks()[:8]
    ref = gen.generate(batch)
    real = HFGenerator._generate_batch

    def flaky(self, a, p, b):  # batches above 2 rows "run out of memory"
        if len(a) > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, a, p, b)

    gen.batch_sizes.clear()
    monkeypatch.setattr(HFGenerator, "_generate_batch", flaky)
    with pytest.warns(RuntimeWarning, match="batch of 8 rows; retrying with 4"):
        got = gen.generate(batch)
    assert_same(ref, got)
    assert gen.batch_sizes == [2, 2, 2, 2]

    def always(self, a, p, b):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(HFGenerator, "_generate_batch", always)
    with pytest.warns(RuntimeWarning), pytest.raises(BackendError, match=r"batch size of 1 .*max_batch_size=8"):
        gen.generate(batch)

    def other(self, a, p, b):
        raise ValueError("not a memory problem")

    monkeypatch.setattr(HFGenerator, "_generate_batch", other)
    with pytest.raises(ValueError):
        gen.generate(batch)


def test_the_compiled_decode_step_traces_as_one_graph(qwen):
    """On CUDA the step is ``torch.compile(fullgraph=True, mode="reduce-overhead")``; here dynamo traces
    the same step with its eager backend, so a graph break (which CUDA graphs could not capture) fails."""
    from coalition_gym.agents.hf_fast import StaticDecoder

    model, tok = qwen
    eager, fast = pair(model, tok)
    fast._static = StaticDecoder(model, fast._cache_kw, fast.pad_id, True, fast._keep_kw, {"backend": "eager"})
    batch = asks()[:5]
    ref = eager.generate(batch)
    assert_same(ref, fast.generate(batch))
    assert fast._static._step_fn is not model.forward
