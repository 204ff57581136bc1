"""The built-in backends' options: one settings class each, whose fields are both the pool-file entry keys
(``backend: hf`` ...) and the Generator's settings, with their defaults, bounds and choices declared once
(``settings_check.setting``) and checked on construction. A Generator takes its options object:
``HFGenerator(model, tokenizer, HFOptions(max_new_tokens=8))``, ``OpenAIGenerator(model,
OpenAIOptions(base_url=...))``, ``VLLMGenerator(model, VLLMOptions(...))``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..settings_check import check_settings, setting
from .hf_fast import FAST_DECODE

DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass
class SimOptions:
    profile: dict | str | None = setting(None, doc="AgentProfile fields, or an adversary profile's name")

    def __post_init__(self) -> None:
        check_settings(self, "sim")


@dataclass
class HFOptions:
    device: str = setting("auto", doc="auto, cpu, cuda, cuda:1 ...")
    dtype: str = setting("auto", choices=DTYPES, doc="auto: bfloat16 (float16) on a GPU, float32 on CPU")
    max_batch_size: int | None = setting(None, ge=1, doc="rows per forward batch; None: sized by free GPU memory "
                                                         "(CPU: 64)")
    max_new_tokens: int | None = setting(None, ge=1, doc="cap on new tokens; None: the model folder's, else 512")
    trust_remote_code: bool = setting(False)
    allow_download: bool = setting(False, doc="fetch a hub name that is not in the local cache")
    revision: str | None = setting(None, doc="a hub revision")
    pad_with_eos: bool = setting(True, doc="pad with EOS when the tokenizer has no pad token")
    fast_decode: str = setting("auto", choices=FAST_DECODE, doc="static KV cache and CUDA graphs; auto: on CUDA")

    def __post_init__(self) -> None:
        check_settings(self, "hf")


@dataclass
class OpenAIOptions:
    base_url: str | list = setting(doc="a server's /v1 URL, or (pool files) a list of replicas' URLs")
    api_key_env: str | None = setting("OPENAI_API_KEY", doc="the environment variable holding the API key")
    max_concurrency: int = setting(8, ge=1, doc="requests in flight at once")
    timeout: float = setting(120.0, gt=0, doc="seconds per request")
    max_retries: int = setting(5, ge=0)
    backoff_base: float = setting(0.5, ge=0, doc="seconds before the first retry, doubled each time")
    backoff_max: float = setting(30.0, ge=0)
    logprobs: bool = setting(False, doc="ask the server for per-token log-probs")
    send_seed: bool = setting(True, doc="send each Ask's seed (servers that refuse it: false)")
    max_new_tokens: int | None = setting(None, ge=1, doc="cap on new tokens; None: what the protocol asks")
    extra_body: dict = setting(doc="extra request fields", default_factory=dict)

    def __post_init__(self) -> None:
        check_settings(self, "openai")


@dataclass
class VLLMOptions:
    dtype: str = setting("auto", choices=DTYPES)
    tensor_parallel_size: int = setting(1, ge=1)
    gpu_memory_utilization: float = setting(0.9, gt=0, le=1)
    max_model_len: int | None = setting(None, ge=1)
    max_new_tokens: int | None = setting(None, ge=1)
    logprobs: bool = setting(False)
    trust_remote_code: bool = setting(False)

    def __post_init__(self) -> None:
        check_settings(self, "vllm")


__all__ = ["SimOptions", "HFOptions", "OpenAIOptions", "VLLMOptions", "DTYPES"]
