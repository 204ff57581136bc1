"""Hugging Face backend on a tiny zoo model: per-Ask seeds, batching, log-probs, prompts, bad input.
Also the in-process vLLM backend's parts that run without vllm (its GPU test skips here)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from coalition_gym.agents.hf import (
    HFGenerator,
    NewTokensCappedWarning,
    PadTokenWarning,
    plain_prompt,
    resolve_device_dtype,
    sequence_logprobs,
)
from coalition_gym.agents.options import HFOptions, VLLMOptions
from coalition_gym.errors import BackendError, ConfigError, PartialBatchError, PromptTooLongError
from coalition_gym.types import Ask, Message, SamplingParams

QUESTIONS = ["Calculate 3 + 4.\nAnswer:", "Calculate 9 * 2.\nAnswer:",
             "Spell this word backward (example: sun -> nus): cat\nAnswer:", "Calculate 1 - 1.\nAnswer:"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    from coalition_gym.agents.zoo import build_zoo

    build = build_zoo("tiny", tmp_path_factory.getbasetemp() / "cgym-home" / "zoo", progress=False)
    return build.model_path(list(build.models)[-1])


@pytest.fixture(scope="module")
def gen(model_dir) -> HFGenerator:
    return HFGenerator(str(model_dir), options=HFOptions(device="cpu", max_new_tokens=12))


def ask(text: str, seed: int = 0, temperature: float = 1.0, top_p: float = 1.0, max_new_tokens: int = 12,
        member: str = "m") -> Ask:
    return Ask(member=member, messages=(Message("user", text),), seed=seed,
               params=SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens))


def test_results_do_not_depend_on_batch_composition(gen):
    target = ask(QUESTIONS[0], seed=123)
    alone = gen.generate([target])[0]
    others = [ask(q, seed=k, temperature=0.5 + k / 4) for k, q in enumerate(QUESTIONS)]
    for batch in ([target] + others, others[:2] + [target] + others[2:], others + [target]):
        got = batch.index(target)
        sample = gen.generate(batch)[got]
        assert sample.text == alone.text and sample.token_ids == alone.token_ids
        assert sample.logprobs == pytest.approx(alone.logprobs, abs=1e-4)


def test_seeds_decide_samples(gen):
    a = [gen.generate([ask(QUESTIONS[1], seed=s)])[0].token_ids for s in (1, 1, 2, 3, 4, 5)]
    assert a[0] == a[1]
    assert len(set(a[1:])) > 1  # different seeds, different draws (the tiny model is far from certain)


def test_max_batch_size_splits_without_changing_results(model_dir, gen):
    small = HFGenerator(str(model_dir), options=HFOptions(device="cpu", max_new_tokens=12, max_batch_size=2))
    asks = [ask(q, seed=k) for k, q in enumerate(QUESTIONS + QUESTIONS[:1])]
    assert [s.token_ids for s in small.generate(asks)] == [s.token_ids for s in gen.generate(asks)]


def test_greedy_matches_model_generate(gen):
    import torch

    for q in QUESTIONS:
        a = ask(q, temperature=0.0)
        ids = gen.encode_prompt(a)
        ref = gen.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 do_sample=False, max_new_tokens=12, pad_token_id=gen.pad_id)
        expected = ref[0, len(ids):].tolist()
        got = gen.generate([a])[0]
        assert list(got.token_ids) == expected[:len(got.token_ids)]
        assert got.finish_reason == ("stop" if got.token_ids[-1] in gen.eos_ids else "length")


def test_tiny_top_p_is_greedy(gen):
    hot = gen.generate([ask(QUESTIONS[2], seed=9, top_p=1e-6)])[0]
    cold = gen.generate([ask(QUESTIONS[2], temperature=0.0)])[0]
    assert hot.token_ids == cold.token_ids


def test_logprobs_match_a_recomputation(gen):
    for temp in (0.0, 0.7, 1.3):
        a = ask(QUESTIONS[0], seed=5, temperature=temp)
        sample = gen.generate([a])[0]
        assert len(sample.logprobs) == len(sample.token_ids) and all(lp <= 0 for lp in sample.logprobs)
        again = gen.completion_logprobs(gen.encode_prompt(a), sample.token_ids, temperature=temp or 1.0)
        assert again == pytest.approx(list(sample.logprobs), abs=1e-4)


def test_sequence_logprobs_batch_and_grad(gen):
    prompts = [gen.encode_prompt(ask(q)) for q in QUESTIONS[:2]]
    completions = [[5, 6, 2], [7]]
    plain = sequence_logprobs(gen.model, prompts, completions, 1.0, gen.pad_id)
    assert [len(x) for x in plain] == [3, 1]
    with_grad = sequence_logprobs(gen.model, prompts, completions, 1.0, gen.pad_id, grad=True)
    assert with_grad[0].requires_grad and with_grad[0].tolist() == pytest.approx(plain[0], abs=1e-5)
    with pytest.raises(ConfigError, match="temperature"):
        sequence_logprobs(gen.model, prompts, completions, 0.0)


def test_token_budget_is_the_smaller_of_ask_and_cap(model_dir):
    capped = HFGenerator(str(model_dir), options=HFOptions(device="cpu", max_new_tokens=3))
    long = capped.generate([ask(QUESTIONS[3], seed=s, max_new_tokens=50) for s in range(6)])
    assert all(len(s.token_ids) <= 3 for s in long)
    assert any(s.finish_reason == "length" and len(s.token_ids) == 3 for s in long)
    short = capped.generate([ask(QUESTIONS[3], seed=1, max_new_tokens=1)])[0]
    assert len(short.token_ids) == 1


def test_chat_template_renders_the_trained_format(gen):
    assert gen.has_chat_template
    a = Ask("m", (Message("user", "Calculate 3 + 4.\nAnswer:"),), seed=0)
    assert gen.tokenizer.decode(gen.encode_prompt(a)) == "<bos>Calculate 3 + 4.\nAnswer:"


def test_plain_text_fallback_without_a_chat_template(model_dir):
    plain = HFGenerator(str(model_dir), options=HFOptions(device="cpu", max_new_tokens=4))
    plain.tokenizer.chat_template = None
    one = (Message("user", "Calculate 3 + 4.\nAnswer:"),)
    assert plain.render(one) == "Calculate 3 + 4.\nAnswer:"
    chat = (Message("system", "Be brief."), Message("user", "Hi"))
    assert plain.render(chat) == "<|system|>\nBe brief.\n\n<|user|>\nHi\n\n<|assistant|>\n" == plain_prompt(chat)
    assert plain.generate([Ask("m", chat, seed=0)])[0].text is not None


@pytest.fixture(scope="module")
def model_512(tmp_path_factory, model_dir) -> Path:
    """A model with a 512-token context (random weights, the zoo's tokenizer): the issue's case."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(model_dir)
    config.n_positions = 512
    folder = tmp_path_factory.mktemp("ctx512")
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(folder)
    return folder


def test_new_tokens_give_way_and_the_prompt_is_never_cut(model_512):
    g = HFGenerator(str(model_512), options=HFOptions(device="cpu"))  # the default cap: 512 new tokens (protocols')
    assert g.context == 512 and g.max_new_tokens == 512
    text = "Calculate 3 + 4, then say why at length. " * 4 + "\nAnswer:"
    asks = [ask(text, seed=k, max_new_tokens=512, member="mine") for k in range(3)]
    prompt = g.encode_prompt(asks[0])
    assert g.tokenizer.decode(prompt) == "<bos>" + text  # every token of the prompt is kept
    with pytest.warns(NewTokensCappedWarning, match=rf"prompt of {len(prompt)} tokens for 'mine' \+ 512 new tokens "
                      rf"exceeds the context of 512; capping new tokens at {512 - len(prompt)}") as caught:
        samples = g.generate(asks)
    assert len([w for w in caught if w.category is NewTokensCappedWarning]) == 1  # once per member
    assert g.capped_requests == 3
    assert all(len(s.token_ids) <= 512 - len(prompt) for s in samples)


def test_a_prompt_that_fills_the_context_fails_alone(model_512):
    g = HFGenerator(str(model_512), options=HFOptions(device="cpu", max_new_tokens=8))
    fits, too_long = ask(QUESTIONS[0], seed=1), ask("x" * 600 + "\nAnswer:", seed=2, member="verbose")
    with pytest.raises(PartialBatchError) as raised:
        g.generate([fits, too_long])
    answered, failed = raised.value.results
    assert answered.text == g.generate([fits])[0].text  # the other request is answered as it would be alone
    assert isinstance(failed, PromptTooLongError) and "'verbose' has 609 tokens" in str(failed)
    assert "whole context is 512" in str(failed)


def test_a_too_long_prompt_is_a_failed_episode_the_run_goes_on(model_512):
    from conftest import ListTask

    from coalition_gym import System, SystemSpec, load_pool, make_protocol, run_episodes
    from coalition_gym.types import Item

    task = ListTask(("7", "8"))
    task._items[1] = Item(id="q1", question="x" * 600, gold="8", category="test")
    pool = load_pool({"members": [{"name": "mine", "backend": "hf", "model": str(model_512)}]})
    results = run_episodes(System.build(SystemSpec(make_protocol("majority_vote"), task, pool.backends(), ["mine"],
                                                   split=None)),
                           task.items(), seed=0)
    assert results[0].error is None
    assert results[1].score == 0.0 and "PromptTooLongError" in (results[1].error or "")


def test_tokenizer_without_pad_token_pads_with_eos(model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    reference = HFGenerator(model, tok, options=HFOptions(max_new_tokens=6))
    tok_nopad = AutoTokenizer.from_pretrained(model_dir)
    tok_nopad.pad_token = None
    with pytest.warns(PadTokenWarning, match="padding with EOS"):
        g = HFGenerator(model, tok_nopad, options=HFOptions(max_new_tokens=6))
    assert g.pad_id == tok.eos_token_id
    asks = [ask(q, seed=k) for k, q in enumerate(QUESTIONS)]
    assert [s.token_ids for s in g.generate(asks)] == [s.token_ids for s in reference.generate(asks)]
    with pytest.raises(ConfigError, match="no pad token"):
        HFGenerator(model, tok_nopad, options=HFOptions(pad_with_eos=False))


def test_missing_model_path_is_a_clear_error(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(ConfigError, match="does not exist") as err:
        HFGenerator(str(missing))
    assert str(missing) in str(err.value)


def test_hub_name_is_not_downloaded_unless_allowed():
    with pytest.raises(ConfigError, match="allow_download=True"):
        HFGenerator("some-org/surely-not-cached-model-xyz")


def test_folder_that_is_not_a_model_is_a_clear_error(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ConfigError, match="cannot load a causal LM"):
        HFGenerator(str(tmp_path))


def test_identity_is_stable_and_names_path_and_dtype(model_dir, gen):
    again = HFGenerator(str(model_dir), options=HFOptions(device="cpu"))
    assert again.identity == gen.identity and str(model_dir.resolve()) in gen.identity
    assert ":float32:" in gen.identity


def test_device_dtype_resolution_and_safe_defaults():
    import torch

    device, dtype = resolve_device_dtype()
    assert (device, dtype) == (("cuda", "bfloat16") if torch.cuda.is_available() and torch.cuda.is_bf16_supported()
                               else (device, dtype))
    if not torch.cuda.is_available():
        assert (device, dtype) == ("cpu", "float32")
        with pytest.raises(ConfigError, match="no CUDA"):
            resolve_device_dtype("cuda")
    with pytest.raises(ConfigError, match="dtype"):
        resolve_device_dtype("cpu", "float8")
    defaults = HFOptions()  # the defaults live in the options class
    assert defaults.trust_remote_code is False and defaults.allow_download is False


def test_bad_sampling_values_are_refused(gen):
    with pytest.raises(ConfigError, match="top_p"):
        gen.generate([ask(QUESTIONS[0], top_p=0.0)])
    with pytest.raises(ConfigError, match="max_batch_size"):
        HFGenerator(gen.model, gen.tokenizer, options=HFOptions(max_batch_size=0))


@pytest.mark.gpu
def test_cuda_bf16(model_dir):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    g = HFGenerator(str(model_dir))
    assert g.device.startswith("cuda") and g.dtype in ("bfloat16", "float16")
    samples = g.generate([ask(q, seed=k) for k, q in enumerate(QUESTIONS)])
    assert all(math.isfinite(lp) for s in samples for lp in s.logprobs)


# -- in-process vLLM -----------------------------------------------------------------------------------

def test_vllm_sampling_params_mapping():
    from coalition_gym.agents.vllm_engine import sampling_kwargs

    a = ask("q", seed=2**70 + 3, temperature=0.4, top_p=0.8, max_new_tokens=40)
    assert sampling_kwargs(a, max_new_tokens=16, logprobs=True) == {
        "temperature": 0.4, "top_p": 0.8, "max_tokens": 16, "seed": (2**70 + 3) % 2**63, "logprobs": 1}
    assert "logprobs" not in sampling_kwargs(a)


def test_vllm_absent_gives_the_install_hint():
    pytest.importorskip("torch")
    try:
        import vllm  # noqa: F401
    except ImportError:
        from coalition_gym.agents.vllm_engine import VLLMGenerator

        with pytest.raises(BackendError, match=r"coalition-gym\[vllm\]"):
            VLLMGenerator("some/model")
    else:
        pytest.skip("vllm is installed here")


@pytest.mark.gpu
def test_vllm_engine_generates(model_dir):
    pytest.importorskip("vllm")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from coalition_gym.agents.vllm_engine import VLLMGenerator

    g = VLLMGenerator(str(model_dir), VLLMOptions(gpu_memory_utilization=0.2, logprobs=True, max_new_tokens=8))
    asks = [ask(q, seed=k) for k, q in enumerate(QUESTIONS)]
    first, second = g.generate(asks), g.generate(asks[::-1])[::-1]
    assert [s.text for s in first] == [s.text for s in second]  # per-Ask seeds: order does not matter
    assert all(len(s.logprobs) == len(s.token_ids) for s in first)


def test_vllm_generator_caps_new_tokens_and_never_cuts_a_prompt():
    """The same rule for the in-process vLLM backend, on a stand-in for ``vllm.LLM`` (no vllm here)."""
    from types import SimpleNamespace

    from coalition_gym.agents.vllm_engine import VLLMGenerator

    asked: list[dict] = []

    class Tokenizer:
        def encode(self, text):
            return list(range(len(text)))

    class LLM:
        llm_engine = SimpleNamespace(model_config=SimpleNamespace(max_model_len=100))

        def get_tokenizer(self):
            return Tokenizer()

        def generate(self, prompts, sampling_params, use_tqdm):
            asked.extend(sampling_params)
            return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=[1], text="Answer: 7", logprobs=None,
                                                             finish_reason="stop")]) for _ in prompts]

    g = object.__new__(VLLMGenerator)
    g.llm, g._vllm, g.has_chat_template = LLM(), SimpleNamespace(SamplingParams=lambda **kw: kw), False
    g.max_new_tokens, g.logprobs, g.identity, g.capped_requests = None, False, "vllm:fake", 0
    fits, too_long = ask("y" * 30, seed=1, max_new_tokens=512), ask("x" * 120, seed=2, member="verbose")
    with pytest.raises(PartialBatchError) as raised:
        g.generate([fits, too_long])
    answered, failed = raised.value.results
    assert answered.text == "Answer: 7" and [p["max_tokens"] for p in asked] == [70]  # 100 - 30, prompt whole
    assert isinstance(failed, PromptTooLongError) and "'verbose' has 120 tokens" in str(failed)
    assert g.capped_requests == 1


def test_capped_requests_are_counted_in_the_leaderboards_cost(model_512):
    from conftest import ListTask

    from coalition_gym import CoalitionGame, EvalOptions, System, SystemSpec, evaluate, load_pool, make_protocol
    from coalition_gym.reports.leaderboard import summary

    task = ListTask(("7", "8", "9"))
    pool = load_pool({"members": [{"name": "mine", "backend": "hf", "model": str(model_512)},
                                  {"name": "atlas", "backend": "sim", "model": "sim:demo/atlas"}]})
    game = CoalitionGame(System.build(SystemSpec(make_protocol("majority_vote", tie_break="first"), task, pool,
                                                 split="test")))
    report = evaluate(game, ["loo"], EvalOptions(n_boot=20))
    assert summary(report)["cost"]["capped_new_tokens"] == 3  # mine's three answers, each capped once
