"""In-process vLLM backend (extra ``vllm``; needs a CUDA GPU): one ``LLM`` engine, batched calls.

Each Ask becomes its own ``SamplingParams`` (seed, temperature, top_p, max_tokens, and logprobs when
asked), so seeds stay per Ask and results do not depend on the batch. Chats go through the model's
chat template (``LLM.chat``); a tokenizer without one gets :func:`.hf.plain_prompt` via ``LLM.generate``.
``Sample.logprobs`` are vLLM's log-probs of the sampled tokens (raw model log-probs by default; see
vLLM's ``logprobs_mode``), which is not the temperature-scaled quantity of the HF backend.

vllm is imported only when the backend is built. For several GPUs, either pass
``tensor_parallel_size`` here, or run ``vllm serve MODEL --tensor-parallel-size N`` and use the
OpenAI backend against it (``backend: openai``, ``base_url: http://127.0.0.1:8000/v1``), which also
lets many processes share one server.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import BackendError, ConfigError, PromptTooLongError
from ..types import Ask, Sample
from .base import Generator, fit_new_tokens, settled
from .hf import plain_prompt
from .options import VLLMOptions

INSTALL_HINT = "pip install 'coalition-gym[vllm]' on a machine with a CUDA GPU"


def import_vllm() -> Any:
    """The ``vllm`` module, or a BackendError that says how to get it."""
    try:
        import vllm
    except ImportError as exc:
        raise BackendError(f"the vllm backend needs the vllm package, which is not installed ({exc}); "
                           f"{INSTALL_HINT}, or use the 'hf' backend (transformers) or the 'openai' backend "
                           "against a `vllm serve` server") from exc
    return vllm


def start_llm(model: str, max_model_len: int | None, **args: Any) -> tuple[Any, Any]:
    """The vllm module and an in-process ``vllm.LLM`` for ``model``; a failure to start is a BackendError."""
    vllm = import_vllm()
    if max_model_len is not None:
        args["max_model_len"] = max_model_len
    try:
        return vllm, vllm.LLM(model=model, **args)
    except Exception as exc:  # vLLM raises many kinds on bad models or missing GPUs
        raise BackendError(f"vllm could not start model {model!r}: {type(exc).__name__}: {exc}") from exc


def sampling_kwargs(ask: Ask, max_new_tokens: int | None = None, logprobs: bool = False) -> dict[str, Any]:
    """vLLM ``SamplingParams`` keyword arguments for one Ask (temperature 0 is greedy in vLLM too)."""
    max_tokens = int(ask.params.max_new_tokens)
    if max_new_tokens is not None:
        max_tokens = min(max_tokens, int(max_new_tokens))
    kwargs: dict[str, Any] = {"temperature": float(ask.params.temperature), "top_p": float(ask.params.top_p),
                              "max_tokens": max_tokens, "seed": int(ask.seed) % 2**63}
    if logprobs:
        kwargs["logprobs"] = 1  # the sampled token's log-prob is always included
    return kwargs


class VLLMGenerator(Generator):
    """A Generator over an in-process ``vllm.LLM``: ``options`` the backend's settings
    (:class:`~coalition_gym.agents.options.VLLMOptions`; None: its defaults); extra engine arguments go
    to ``LLM(...)``."""

    def __init__(self, model: str, options: VLLMOptions | None = None, **engine_args: Any):
        if not model:
            raise ConfigError("the vllm backend needs a model (a local folder or a hub name)")
        options = options if options is not None else VLLMOptions()
        self.options = options
        dtype = options.dtype
        self.model_name, self.max_new_tokens, self.logprobs = model, options.max_new_tokens, bool(options.logprobs)
        self._vllm, self.llm = start_llm(model, options.max_model_len, dtype=dtype,
                                         tensor_parallel_size=options.tensor_parallel_size,
                                         gpu_memory_utilization=options.gpu_memory_utilization,
                                         trust_remote_code=options.trust_remote_code, **engine_args)
        tokenizer = self.llm.get_tokenizer()
        self.has_chat_template = bool(getattr(tokenizer, "chat_template", None))
        self.identity = f"vllm:{model}:{dtype}"
        self.capped_requests = 0  # requests whose new tokens were capped to fit max_model_len

    def prompt_tokens(self, ask: Ask) -> int:
        """The prompt's length in tokens, rendered as vLLM renders it."""
        tokenizer = self.llm.get_tokenizer()
        if self.has_chat_template:
            chat = [{"role": m.role, "content": m.content} for m in ask.messages]
            return len(tokenizer.apply_chat_template(chat, tokenize=True, add_generation_prompt=True))
        return len(tokenizer.encode(plain_prompt(ask.messages)))

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        asks = list(asks)
        if not asks:
            return []
        # vLLM refuses a request whose prompt + max_tokens exceed max_model_len: cap the budget to fit, and
        # fail alone a request whose prompt fills the context (never cut the prompt)
        context = int(self.llm.llm_engine.model_config.max_model_len)
        lengths = [self.prompt_tokens(a) for a in asks]
        wanted = [min(int(a.params.max_new_tokens), self.max_new_tokens or int(a.params.max_new_tokens)) for a in asks]
        budgets = [fit_new_tokens(n, w, context) for n, w in zip(lengths, wanted)]
        out: list[Sample | BaseException] = [
            PromptTooLongError(f"{self.identity}: the prompt for {a.member!r} has {n} tokens, the model's whole "
                               f"context (max_model_len) is {context}: nothing is left to generate")
            for a, n in zip(asks, lengths)]
        fits = [k for k, b in enumerate(budgets) if b >= 1]
        self.capped_requests += sum(1 for k in fits if budgets[k] < wanted[k])
        params = [self._vllm.SamplingParams(**sampling_kwargs(asks[k], budgets[k], self.logprobs)) for k in fits]
        if fits and self.has_chat_template:
            chats = [[{"role": m.role, "content": m.content} for m in asks[k].messages] for k in fits]
            outputs = self.llm.chat(chats, sampling_params=params, use_tqdm=False)
        elif fits:
            outputs = self.llm.generate([plain_prompt(asks[k].messages) for k in fits], sampling_params=params,
                                        use_tqdm=False)
        for k, o in zip(fits, outputs if fits else []):
            out[k] = self._sample(o)
        return settled(out, "prompts fill the context")

    def _sample(self, output: Any) -> Sample:
        return _sample_of(output)


# -- the trainer's policy on vLLM: token-id prompts in, weights pushed after every optimiser step -----

class VLLMEngine:
    """An in-process ``vllm.LLM`` serving a policy that is being trained, colocated with the trainer
    (hence a small default ``gpu_memory_utilization``). Two calls: :meth:`generate_ids` (prompts as
    token ids, so the ids the trainer records are exactly those vLLM read) and :meth:`load_weights`
    (the trainer's updated tensors, by their Hugging Face names; no reload from disk).

    The weights go in as TRL's colocate mode does: the driver worker's model ``load_weights`` when the
    engine runs in this process, else ``LLM.collective_rpc`` to every worker; then the prefix cache,
    which holds KV computed with the old weights, is reset. Not run on the machines this project is
    tested on (vLLM is not installable there); :class:`VLLMPolicy` is tested with a fake engine.
    """

    def __init__(self, model: str, *, dtype: str = "auto", gpu_memory_utilization: float = 0.3,
                 max_model_len: int | None = None, **engine_args: Any):
        self._vllm, self.llm = start_llm(model, max_model_len, dtype=dtype, enable_prefix_caching=True,
                                         gpu_memory_utilization=gpu_memory_utilization, **engine_args)
        self.identity = f"vllm:{model}:{dtype}"
        self.capped_requests = 0  # requests whose new tokens were capped to fit max_model_len

    def generate_ids(self, prompts: Sequence[Sequence[int]], params: Sequence[dict[str, Any]]) -> list[Sample]:
        requests = [{"prompt_token_ids": list(p)} for p in prompts]
        sampling = [self._vllm.SamplingParams(**kw) for kw in params]
        outputs = self.llm.generate(requests, sampling_params=sampling, use_tqdm=False)
        return [_sample_of(o) for o in outputs]

    def load_weights(self, named_tensors: Sequence[tuple[str, Any]]) -> None:
        weights = list(named_tensors)
        executor = getattr(getattr(self.llm, "llm_engine", None), "model_executor", None)
        worker = getattr(executor, "driver_worker", None)
        runner = getattr(getattr(worker, "worker", worker), "model_runner", None)
        if runner is not None:
            runner.model.load_weights(weights=weights)
        else:
            self.llm.collective_rpc(_load_weights_rpc, args=(weights,))
        self.llm.reset_prefix_cache()


def _load_weights_rpc(worker: Any, weights: list[tuple[str, Any]]) -> None:  # pragma: no cover - GPU only
    worker.model_runner.model.load_weights(weights=weights)


def _sample_of(output: Any) -> Sample:
    best = output.outputs[0]
    ids = tuple(int(t) for t in best.token_ids)
    logprobs = None
    if best.logprobs:
        logprobs = tuple(float(step[tok].logprob) for step, tok in zip(best.logprobs, ids))
    return Sample(text=best.text, token_ids=ids, logprobs=logprobs, finish_reason=str(best.finish_reason or "stop"))


class VLLMPolicy(Generator):
    """The trainer's policy answered by a vLLM engine (:class:`VLLMEngine`, or anything with its two
    methods). Prompts are rendered, truncated and tokenised by the policy's HF backend (``encoder``),
    which also turns ids back into text and caps token budgets, so both backends see the same ids.
    ``Sample.logprobs`` are vLLM's; the trainer recomputes them with its own model for the loss."""

    def __init__(self, engine: Any, encoder: Any, identity: str | None = None):
        self.engine, self.encoder = engine, encoder
        self.identity = identity or f"vllm-policy:{encoder.identity}"

    def encode_prompt(self, ask: Ask) -> list[int]:
        return self.encoder.encode_prompt(ask)

    def encode_prompts(self, asks: Sequence[Ask]) -> list[list[int]]:
        return self.encoder.encode_prompts(asks)

    def describe(self) -> dict[str, Any]:
        return {"kind": "vllm-policy", "identity": self.identity}

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        asks = list(asks)
        if not asks:
            return []
        prompts = self.encoder.encode_prompts(asks)
        budgets = self.encoder.plan(asks, prompts)  # the HF backend's rule: budgets give way, prompts never
        out: list[Sample | BaseException] = [self.encoder.too_long(a, len(p)) for a, p in zip(asks, prompts)]
        fits = [k for k, b in enumerate(budgets) if b >= 1]
        params = [sampling_kwargs(asks[k], budgets[k], logprobs=True) for k in fits]
        raw = self.engine.generate_ids([prompts[k] for k in fits], params) if fits else []
        eos = self.encoder.eos_ids
        for k, s in zip(fits, raw):
            ids = tuple(int(t) for t in s.token_ids or ())
            stop = (bool(ids) and ids[-1] in eos) or s.finish_reason == "stop"
            out[k] = Sample(text=self.encoder._decode(ids), token_ids=ids, logprobs=s.logprobs,
                            finish_reason="stop" if stop else "length")
        return settled(out, "prompts fill the context")

    def load_weights(self, named_tensors: Sequence[tuple[str, Any]]) -> None:
        self.engine.load_weights(named_tensors)
