"""Everything that writes text: the Generator interface and its backends.

Backends: simulated agents, Hugging Face transformers (``HFGenerator``), OpenAI-compatible servers
(``OpenAIGenerator``), in-process vLLM (``VLLMGenerator``, extra ``vllm``), and the tiny offline zoo
of character-level transformers models (``build_zoo``, ``zoo:default``). Importing this package
imports neither torch nor vllm; they load when a backend is built.
"""

from .base import Generator, derive_seed, render_plain, stable_hash
from .hf import HFGenerator, NewTokensCappedWarning, PadTokenWarning, plain_prompt, sequence_logprobs
from .openai_api import OpenAIGenerator
from .pools import DEFAULT_POOL, Pool, WithSampling, load_pool, pool_from_config, pool_from_file, pool_names, zoo_pool
from .simulated import SIM_PRESETS, AgentProfile, SimulatedAgent
from .vllm_engine import VLLMGenerator
from .zoo import ZOO_RECIPES, ZOO_TASKS, ZooBuild, build_zoo, ensure_zoo, zoo_task

__all__ = ["Generator", "derive_seed", "render_plain", "stable_hash", "Pool", "load_pool", "pool_names",
           "DEFAULT_POOL", "AgentProfile", "SimulatedAgent", "SIM_PRESETS", "HFGenerator", "OpenAIGenerator",
           "VLLMGenerator", "NewTokensCappedWarning", "PadTokenWarning", "plain_prompt", "sequence_logprobs",
           "WithSampling", "pool_from_config", "pool_from_file", "zoo_pool", "ZOO_RECIPES", "ZOO_TASKS", "ZooBuild",
           "build_zoo", "ensure_zoo", "zoo_task"]
