"""Hugging Face transformers backend: any local (or cached) causal LM, batched, seeded per Ask.

Generation is this module's own loop over a left-padded batch with a KV cache, not ``model.generate``,
so that every row draws from its own ``torch.Generator`` seeded from ``Ask.seed``: an Ask gets the
same sample alone or in any batch. Rows may differ in temperature, top-p and token budget.

Prompts: the tokenizer's chat template when it has one, else a plain-text fallback
(:func:`plain_prompt`). A prompt is never cut: when prompt + requested new tokens exceed the context,
the new tokens are capped at what fits (:class:`NewTokensCappedWarning`, once per member; counted in
``HFGenerator.capped_requests``), and a prompt that alone fills the context fails that request with a
:class:`~coalition_gym.errors.PromptTooLongError` (the others of the batch are answered).

A folder written by ``cgym train`` carries its generation settings (``coalition_gym.json``: prompt
style, system prompt, max new tokens; :mod:`.member_settings`): the backend applies its system prompt
and its token cap, so a trained policy is a pool member as it stands.

Log-probs (``Sample.logprobs``): for each sampled token, ``log_softmax(logits / T)`` at that token,
taken *before* top-p filtering (T = 1 for greedy rows, i.e. the raw model log-probs).
:meth:`HFGenerator.completion_logprobs` recomputes exactly this quantity with one forward pass, so a
trainer can compare old and new log-probs; with ``top_p < 1`` the distribution actually sampled is
the nucleus renormalised, whose log-prob is this value minus log(nucleus mass).
``Sample.token_ids`` are the sampled ids, including the final EOS when ``finish_reason == "stop"``.

Speed (see :mod:`.hf_fast`): ``fast_decode`` runs the decode steps on a static KV cache with the
single-token step compiled into CUDA graphs (``auto``: on for CUDA, off on CPU); sampling and
log-probs are this module's either way. ``max_batch_size=None`` sizes batches by free GPU memory and a
KV-cache estimate from the model config (:func:`auto_batch_size`), or :data:`CPU_BATCH` rows on CPU.
A CUDA out-of-memory error halves the batch and retries, down to one row, then raises a
:class:`BackendError` naming the batch size and ``max_batch_size``.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import warnings
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..errors import BackendError, ConfigError, PromptTooLongError
from ..types import Ask, Message, Sample
from .base import Generator, fit_new_tokens, render_plain, settled, with_system_prompt
from .hf_fast import EagerStepper
from .lora import is_adapter_folder, load_merged, with_causal_lm_loss
from .member_settings import best_folder, read_member_settings
from .options import DTYPES, HFOptions

#: the token cap of a backend given none, for a folder that states none
DEFAULT_MAX_NEW_TOKENS = 512
#: rows per forward batch on CPU when ``max_batch_size`` is None (auto)
CPU_BATCH = 64
#: the most rows auto sizing ever puts in one batch, and the share of free GPU memory it plans to use
MAX_AUTO_BATCH = 1024
MEMORY_SHARE = 0.8


class NewTokensCappedWarning(UserWarning):
    """Prompt + requested new tokens exceeded the context: the new tokens were capped at what fits."""


class PadTokenWarning(UserWarning):
    """The tokenizer has no pad token; the backend pads with EOS (pads are masked, so output is unchanged)."""



def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is a hard requirement of transformers serving
        raise BackendError("the Hugging Face backend needs torch; install the wheel for your machine "
                           "(CPU: pip install torch==2.13.0)") from exc
    return torch


def resolve_device_dtype(device: str = "auto", dtype: str = "auto") -> tuple[str, str]:
    """``auto`` means cuda + bfloat16 when a GPU is present (float16 if it lacks bf16), else cpu + float32."""
    torch = _torch()
    if dtype not in DTYPES:
        raise ConfigError(f"dtype={dtype!r}; use one of {', '.join(DTYPES)}")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device={device!r} but no CUDA GPU is visible; use device='cpu' or 'auto'")
    if dtype == "auto":
        if device.startswith("cuda"):
            dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
        else:
            dtype = "float32"
    return device, dtype


def context_length(model: Any, tokenizer: Any = None) -> int:
    """The tokens a model reads at most: its config's position count, else the tokenizer's limit."""
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(model.config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    value = getattr(tokenizer, "model_max_length", None)
    return int(value) if isinstance(value, int) and 0 < value < 10**7 else 1 << 20


def plain_prompt(messages: Sequence[Message]) -> str:
    """Fallback for tokenizers without a chat template: the bare content of a lone user message, else
    ``<|role|>`` headers (:func:`render_plain`) followed by an open ``<|assistant|>`` header."""
    text = render_plain(messages)
    if len(messages) == 1 and messages[0].role == "user":
        return text
    return f"{text}\n\n<|assistant|>\n"


def _fingerprint(folder: Path) -> str:
    """Changes when the weights or config of a local folder change (names, sizes, mtimes; no reading)."""
    parts = []
    for f in sorted(folder.iterdir()):
        if f.is_file() and (f.suffix in (".json", ".safetensors", ".bin", ".model", ".jinja")):
            st = f.stat()
            parts.append(f"{f.name}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.blake2b("|".join(parts).encode(), digest_size=6).hexdigest()


#: Folders up to this size get a content sha256 in run records (larger ones: the stat fingerprint only).
HASH_LIMIT_BYTES = 256 * 2**20


def weights_record(folder: str | Path) -> dict[str, Any]:
    """What a run record says about a model folder's weights: a zoo model's provenance (recipe, sha256,
    shipped or local build), else a content sha256 when the folder is small enough to hash quickly."""
    from .zoo.shipped import model_fingerprint, provenance

    folder = Path(folder)
    found = provenance(folder)
    if found is not None:
        return found
    size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    if size > HASH_LIMIT_BYTES:
        return {"sha256": None, "why": f"{size / 2**30:.1f} GiB: not hashed (the identity's stat fingerprint)"}
    return {"sha256": model_fingerprint(folder)}


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """No per-load (or per-save) progress bar: pools load several models, runs have their own bars."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def _load(model: str, *, device: str, dtype: str, trust_remote_code: bool, allow_download: bool,
          revision: str | None) -> tuple[Any, Any, str]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch = _torch()
    folder = Path(model).expanduser()
    local = folder.is_dir()
    # A hub name is "name" or "org/name"; anything else that is not a folder is a missing path.
    looks_like_path = model.startswith((".", "/", "~")) or model.count("/") > 1 or os.sep != "/" and os.sep in model
    if not local and looks_like_path:
        raise ConfigError(f"model path {model!r} does not exist; give a folder with config.json and weights "
                          "(e.g. one from `cgym zoo build`), or a hub name (downloaded only with "
                          "allow_download=True)")
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code, "local_files_only": local or not allow_download}
    if revision is not None:
        kwargs["revision"] = revision
    source = str(folder) if local else model
    try:
        with quiet_loading():
            tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            if local and is_adapter_folder(folder):  # a LoRA checkpoint: merged into its base on load
                net = load_merged(folder, dtype=getattr(torch, dtype))
            else:
                net = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, dtype), **kwargs)
    except (OSError, ValueError) as exc:
        where = f"folder {source!r}" if local else f"{source!r} (not a local folder; looked in the local " \
                f"Hugging Face cache{'' if not allow_download else ' and the hub'})"
        hint = "" if local or allow_download else "; pass allow_download=True to fetch it from the hub"
        raise ConfigError(f"cannot load a causal LM from {where}: {exc}{hint}") from exc
    with_causal_lm_loss(net).to(device)  # type: ignore[arg-type]  # transformers' stubs type .to() oddly
    net.eval()
    identity_path = str(folder.resolve()) if local else model
    fp = _fingerprint(folder) if local else (revision or "main")
    return net, tokenizer, f"hf:{identity_path}:{dtype}:{fp}"


class HFGenerator(Generator):
    """A Generator over a transformers causal LM.

    ``model`` is a local folder (or, with ``allow_download=True`` or when already in the local HF cache,
    a hub name), or an already loaded model object together with ``tokenizer`` (for trainers; then
    pass ``identity`` too if the weights change, since cache keys rely on it). ``options``: the
    backend's settings (:class:`~coalition_gym.agents.options.HFOptions`; None: its defaults).
    """

    def __init__(self, model: Any, tokenizer: Any = None, options: HFOptions | None = None,
                 identity: str | None = None):
        options = options if options is not None else HFOptions()
        max_new_tokens = options.max_new_tokens
        torch = _torch()
        self.options = options
        self.max_batch_size = options.max_batch_size
        if isinstance(model, (str, os.PathLike)):
            if tokenizer is not None:
                raise ConfigError("give a tokenizer only together with a loaded model object, not with a path")
            self.device, self.dtype = resolve_device_dtype(options.device, options.dtype)
            if Path(model).expanduser().is_dir():  # a `cgym train` run or seat folder: its seat's best/
                model = best_folder(str(model))
            self.folder: Path | None = Path(model) if Path(model).is_dir() else None
            self.model, self.tokenizer, ident = _load(str(model), device=self.device, dtype=self.dtype,
                                                      trust_remote_code=options.trust_remote_code,
                                                      allow_download=options.allow_download,
                                                      revision=options.revision)
        else:
            if tokenizer is None:
                raise ConfigError("a loaded model object needs its tokenizer: HFGenerator(model, tokenizer)")
            self.model, self.tokenizer = model, tokenizer
            self.folder = None
            param = next(model.parameters())
            self.device, self.dtype = str(param.device), str(param.dtype).replace("torch.", "")
            ident = f"hf:{getattr(model.config, '_name_or_path', '') or type(model).__name__}:{self.dtype}"
        self.identity = identity or ident  # hf:<folder>:<dtype>:<weight fingerprint> for a folder
        self._weights: dict[str, Any] | None = None  # describe()'s weights record, made on first use
        # a trained folder's own settings (what the trainer generated with), unless the caller gives them
        self.member_settings = read_member_settings(self.folder) if self.folder is not None else None
        folder_cap = self.member_settings.max_new_tokens if self.member_settings is not None else None
        self.max_new_tokens = int(max_new_tokens or folder_cap or DEFAULT_MAX_NEW_TOKENS)
        self.system_prompt = self.member_settings.system_prompt if self.member_settings is not None else ""
        self.capped_requests = 0  # requests whose new tokens were capped to fit the context
        self._capped_members: set[str] = set()  # warned once each
        self.pad_id = self._pad_id(options.pad_with_eos)
        self.eos_ids = self._eos_ids()
        self.context = self._context_length()
        params = inspect.signature(self.model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._position_ids = "position_ids" in params
        self._keep_kw = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)
        self._torch = torch
        from .hf_fast import StaticDecoder, wants_fast

        self.fast_decode = options.fast_decode
        self._static = (StaticDecoder(self.model, self._cache_kw, self.pad_id, self.device.startswith("cuda"),
                                      self._keep_kw)
                        if wants_fast(options.fast_decode, self.device) else None)
        self.batch_sizes: list[int] = []  # rows of every forward batch run (reset freely; for benchmarks)

    # -- setup ---------------------------------------------------------------------------------
    def _pad_id(self, pad_with_eos: bool) -> int:
        tok = self.tokenizer
        if tok.pad_token_id is not None:
            return int(tok.pad_token_id)
        if tok.eos_token_id is None:
            raise ConfigError(f"tokenizer of {self.identity!r} has neither a pad nor an EOS token; set "
                              "tokenizer.pad_token before building the backend")
        if not pad_with_eos:
            raise ConfigError(f"tokenizer of {self.identity!r} has no pad token; set tokenizer.pad_token, or "
                              "allow pad_with_eos=True (pads are masked out, so outputs are unchanged)")
        warnings.warn(f"tokenizer of {self.identity!r} has no pad token; padding with EOS "
                      f"({tok.eos_token!r}), masked out of attention", PadTokenWarning, stacklevel=3)
        return int(tok.eos_token_id)

    def _eos_ids(self) -> frozenset[int]:
        ids: set[int] = set()
        for source in (getattr(self.model, "generation_config", None), self.tokenizer):
            value = getattr(source, "eos_token_id", None) if source is not None else None
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, (list, tuple)):
                ids.update(int(v) for v in value)
        return frozenset(ids)

    def _context_length(self) -> int:
        return context_length(self.model, self.tokenizer)

    # -- prompts --------------------------------------------------------------------------------
    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def render(self, messages: Sequence[Message]) -> str:
        """The prompt text: the chat template with the assistant turn opened, or :func:`plain_prompt`."""
        if not self.has_chat_template:
            return plain_prompt(messages)
        chat = [{"role": m.role, "content": m.content} for m in messages]
        try:
            return self.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        except Exception as exc:  # jinja raises its own errors, e.g. templates that refuse a system turn
            if messages and messages[0].role == "system" and len(messages) > 1:
                merged = [{"role": chat[1]["role"], "content": f"{chat[0]['content']}\n\n{chat[1]['content']}"}]
                try:
                    return self.tokenizer.apply_chat_template(merged + chat[2:], tokenize=False,
                                                              add_generation_prompt=True)
                except Exception:
                    pass
            raise BackendError(f"chat template of {self.identity!r} failed on roles "
                               f"{[m.role for m in messages]}: {exc}") from exc

    def encode_prompt(self, ask: Ask) -> list[int]:
        """Prompt token ids for an Ask (its system prompt applied, see the module doc); never cut."""
        return self.encode_prompts([ask])[0]

    def encode_prompts(self, asks: Sequence[Ask]) -> list[list[int]]:
        """:meth:`encode_prompt` for many Asks, with one batched tokenizer call."""
        texts = [self.render(with_system_prompt(a, self.system_prompt).messages) for a in asks]
        encoded = self.tokenizer(texts, add_special_tokens=not self.has_chat_template)["input_ids"]
        start = self.tokenizer.bos_token_id if self.tokenizer.bos_token_id is not None else self.pad_id
        return [list(ids) or [int(start)] for ids in encoded]  # empty: start from BOS so there is a position

    def _wanted(self, ask: Ask) -> int:
        return max(1, min(int(ask.params.max_new_tokens), self.max_new_tokens))

    def _budget(self, ask: Ask, prompt_tokens: int) -> int:
        """New tokens for ``ask`` after a prompt of ``prompt_tokens``: what it asks (capped by
        ``max_new_tokens``), at most what the context leaves; 0 when the prompt alone fills it."""
        return fit_new_tokens(prompt_tokens, self._wanted(ask), self.context)

    def plan(self, asks: Sequence[Ask], prompts: Sequence[list[int]]) -> list[int]:
        """Every Ask's token budget, counting and warning (once per member) where it had to be capped."""
        budgets = [self._budget(a, len(p)) for a, p in zip(asks, prompts)]
        for a, p, budget in zip(asks, prompts, budgets):
            if 0 < budget < self._wanted(a):
                self.capped_requests += 1
                if a.member not in self._capped_members:
                    self._capped_members.add(a.member)
                    warnings.warn(f"{self.identity}: prompt of {len(p)} tokens for {a.member!r} + {self._wanted(a)} "
                                  f"new tokens exceeds the context of {self.context}; capping new tokens at "
                                  f"{budget} (said once per member; counted in capped_requests)",
                                  NewTokensCappedWarning, stacklevel=4)
        return budgets

    def too_long(self, ask: Ask, prompt_tokens: int) -> PromptTooLongError:
        return PromptTooLongError(f"{self.identity}: the prompt for {ask.member!r} has {prompt_tokens} tokens, "
                                  f"the model's whole context is {self.context}: nothing is left to generate; "
                                  "shorten the prompt (fewer rounds or peers) or use a model with a longer context")

    # -- generation ------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        out = {"kind": "hf", "identity": self.identity, "device": self.device, "dtype": self.dtype,
               "fast_decode": self._static is not None}
        if self.folder is not None:
            if self._weights is None:  # hashed once: the identity, too, is fixed when the model loads
                self._weights = weights_record(self.folder)
            out["weights"] = self._weights
        return out

    def batch_size(self, width: int, steps: int) -> int:
        """Rows per forward batch for prompts of ``width`` tokens and ``steps`` new tokens: the
        ``max_batch_size`` setting, else :func:`auto_batch_size`."""
        if self.max_batch_size is not None:
            return self.max_batch_size
        if not self.device.startswith("cuda"):
            return CPU_BATCH
        free, _ = self._torch.cuda.mem_get_info(self.model.device)
        return auto_batch_size(self.model.config, width + steps, free, self._torch.finfo(self.model.dtype).bits // 8)

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        asks = list(asks)
        if not asks:
            return []
        return settled(self.sample_after(asks, self.encode_prompts(asks)), "prompts fill the context")

    def sample_after(self, asks: Sequence[Ask], prompts: Sequence[list[int]]) -> list[Sample | BaseException]:
        """Each Ask's reply sampled after the token ids ``prompts`` (its rendered prompt from
        :meth:`encode_prompts`, or a context a caller builds, e.g. a TRL row): new tokens capped to fit, a context
        that fills the model a :class:`PromptTooLongError` in its place, batches of similar lengths halved on
        CUDA out of memory."""
        for ask in asks:
            if ask.params.temperature < 0 or not 0.0 < ask.params.top_p <= 1.0:
                raise ConfigError(f"ask for {ask.member!r}: temperature={ask.params.temperature} must be >= 0 "
                                  f"and top_p={ask.params.top_p} in (0, 1]")
        budgets = self.plan(asks, prompts)
        out: list[Sample | BaseException | None] = [None] * len(asks)
        for k, budget in enumerate(budgets):
            if budget < 1:
                out[k] = self.too_long(asks[k], len(prompts[k]))
        # Similar lengths share a batch (less padding); results never depend on the grouping.
        order = sorted((k for k in range(len(asks)) if out[k] is None), key=lambda k: len(prompts[k]))
        if not order:
            return out  # type: ignore[return-value]  # every slot holds its error
        size = first = self.batch_size(max(len(prompts[k]) for k in order), max(budgets[k] for k in order))
        start = 0
        while start < len(order):
            chunk = order[start:start + size]
            try:
                samples = self._generate_batch([asks[k] for k in chunk], [prompts[k] for k in chunk],
                                               [budgets[k] for k in chunk])
            except Exception as exc:
                if not _is_oom(exc):
                    raise
                self._free_memory()
                if len(chunk) == 1:
                    raise BackendError(f"{self.identity}: CUDA out of memory at a batch size of 1 (halved from "
                                       f"max_batch_size={first}), prompt of {len(prompts[chunk[0]])} tokens + "
                                       f"{budgets[chunk[0]]} new: lower max_new_tokens (or the "
                                       "prompt), free GPU memory, or use a smaller model") from exc
                size = max(1, len(chunk) // 2)
                warnings.warn(f"{self.identity}: CUDA out of memory at a batch of {len(chunk)} rows; retrying "
                              f"with {size} (set max_batch_size to choose it)", RuntimeWarning, stacklevel=3)
                continue
            for k, sample in zip(chunk, samples):
                out[k] = sample
            start += len(chunk)
        return out  # type: ignore[return-value]  # every slot filled above

    def _free_memory(self) -> None:
        if self._static is not None:
            self._static.clear()
        if self._torch.cuda.is_available():
            self._torch.cuda.empty_cache()

    def _forward(self, ids: Any, mask: Any, positions: Any, cache: Any) -> tuple[Any, Any]:
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "use_cache": True}
        if cache is not None:
            kwargs[self._cache_kw] = cache
        if self._position_ids:
            kwargs["position_ids"] = positions
        if self._keep_kw:
            kwargs[self._keep_kw] = 1
        out = self.model(**kwargs)
        new_cache = out.get("cache") if out.get("cache") is not None else out.get("past_key_values")
        return out.logits[:, -1, :].float(), new_cache

    def _generate_batch(self, asks: Sequence[Ask], prompts: Sequence[list[int]],
                        budgets: Sequence[int]) -> list[Sample]:
        torch = self._torch
        dev = self.model.device
        n = len(asks)
        width = max(len(p) for p in prompts)
        ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for i, p in enumerate(prompts):  # left padding: every row's last prompt token is in the last column
            ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p):] = 1
        steps = max(budgets)
        temps = torch.tensor([a.params.temperature for a in asks], dtype=torch.float32)
        greedy = temps <= 0
        scale = torch.where(greedy, torch.ones_like(temps), temps).unsqueeze(1).to(dev)
        # Each row's uniforms come from its own seeded stream, drawn up front: the k-th token of an Ask
        # uses the k-th draw of its seed, whatever else is in the batch.
        uniforms = torch.zeros((n, steps), dtype=torch.float64)
        for i, a in enumerate(asks):
            if not greedy[i]:
                g = torch.Generator().manual_seed(int(a.seed) % 2**63)
                uniforms[i, :budgets[i]] = torch.rand(budgets[i], generator=g, dtype=torch.float64)
        uniforms = uniforms.to(dev)
        full = [i for i, a in enumerate(asks) if not greedy[i] and a.params.top_p >= 1.0]
        nucleus = [i for i, a in enumerate(asks) if not greedy[i] and a.params.top_p < 1.0]
        top_ps = torch.tensor([asks[i].params.top_p for i in nucleus], dtype=torch.float32, device=dev)
        full_idx = torch.tensor(full, dtype=torch.long, device=dev)
        nucleus_idx = torch.tensor(nucleus, dtype=torch.long, device=dev)
        eos = torch.tensor(sorted(self.eos_ids) or [-1], dtype=torch.long, device=dev)
        budget_t = torch.tensor(budgets, dtype=torch.long, device=dev)

        ids, mask = ids.to(dev), mask.to(dev)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        self.batch_sizes.append(n)
        every = 8 if self._static is not None else 1  # fast path: fewer host syncs (tokens after done are ignored)
        alive = torch.ones(n, dtype=torch.bool, device=dev)
        length = torch.full((n,), steps, dtype=torch.long, device=dev)
        stopped = torch.zeros(n, dtype=torch.bool, device=dev)
        chosen, chosen_lps = [], []
        with torch.inference_mode():
            stepper = (self._static.stepper(n, width, steps) if self._static is not None
                       else EagerStepper(self._forward))
            logits = stepper.prefill(ids, mask, positions)
            for step in range(steps):
                logp = torch.log_softmax(logits / scale, dim=-1)
                choice = logp.argmax(dim=-1)
                if full:
                    choice[full_idx] = _inverse_cdf(logp[full_idx].exp(), uniforms[full_idx, step])
                if nucleus:
                    choice[nucleus_idx] = _nucleus(logp[nucleus_idx], top_ps, uniforms[nucleus_idx, step])
                chosen.append(choice)
                chosen_lps.append(logp.gather(1, choice.unsqueeze(1)).squeeze(1))
                is_eos = torch.isin(choice, eos)
                done = alive & (is_eos | (budget_t <= step + 1))
                length = torch.where(done, step + 1, length)
                stopped |= done & is_eos
                alive &= ~done
                if step + 1 == steps or ((step + 1) % every == 0 and not bool(alive.any())):
                    break
                # Finished rows keep being fed (their tokens are ignored) so the batch keeps its shape.
                logits = stepper.decode(choice, step)
        tokens = torch.stack(chosen, dim=1).tolist()
        lps = torch.stack(chosen_lps, dim=1).float().tolist()
        lengths, stops = length.tolist(), stopped.tolist()
        return [Sample(text=self._decode(t[:k]), token_ids=tuple(t[:k]), logprobs=tuple(lp[:k]),
                       finish_reason="stop" if stop else "length")
                for t, lp, k, stop in zip(tokens, lps, lengths, stops)]

    def _decode(self, ids: Sequence[int]) -> str:
        body = [t for t in ids if t not in self.eos_ids]
        return self.tokenizer.decode(body, skip_special_tokens=True)

    # -- log-probs for trainers ---------------------------------------------------------------------
    def completion_logprobs(self, prompt_ids: Sequence[int], completion_ids: Sequence[int],
                            temperature: float = 1.0) -> list[float]:
        """Per-token ``log_softmax(logits / temperature)`` of ``completion_ids`` after ``prompt_ids``
        (no top-p), the quantity ``Sample.logprobs`` holds; use temperature 1 for greedy samples."""
        return sequence_logprobs(self.model, [list(prompt_ids)], [list(completion_ids)], temperature,
                                 pad_id=self.pad_id)[0]


def _is_oom(exc: BaseException) -> bool:
    torch = _torch()
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "CUDA out of memory" in str(exc)


def auto_batch_size(config: Any, tokens: int, free_bytes: int, dtype_bytes: int = 2,
                    share: float = MEMORY_SHARE) -> int:
    """Rows that fit in ``share`` of ``free_bytes``: per row, the KV cache of ``tokens`` positions
    (2 x layers x KV heads x head size x dtype bytes each), activations of the prompt pass, and the
    sampler's float32/float64 work on one row of logits (about 48 bytes per vocabulary entry)."""
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config

    def field(name: str, other: str, default: int) -> int:
        return int(getattr(text, name, None) or getattr(text, other, None) or default)

    layers = field("num_hidden_layers", "n_layer", 1)
    hidden = field("hidden_size", "n_embd", 1024)
    heads = field("num_attention_heads", "n_head", 1)
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(text, "head_dim", None) or hidden // heads)
    vocab = int(getattr(text, "vocab_size", 32000))
    kv = 2 * layers * kv_heads * head_dim * dtype_bytes * tokens
    activations = 16 * hidden * dtype_bytes * tokens
    per_row = kv + activations + 48 * vocab
    return int(max(1, min(MAX_AUTO_BATCH, share * free_bytes // per_row)))


def _inverse_cdf(probs: Any, u: Any) -> Any:
    """Row-wise draw from ``probs`` (rows need not sum to 1) with uniforms ``u`` in [0, 1). Searching
    to the right never lands on a zero-probability token."""
    import torch

    cdf = probs.double().cumsum(-1)
    picked = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1), right=True)
    return picked.clamp(max=probs.shape[1] - 1).squeeze(1)


def _nucleus(logp: Any, top_p: Any, u: Any) -> Any:
    """Row-wise top-p sampling: keep the most likely tokens until their mass reaches ``top_p`` (always
    at least one), then draw inside them with ``u``."""
    import torch

    sorted_lp, order = logp.sort(dim=-1, descending=True)
    probs = sorted_lp.exp()
    before = probs.cumsum(-1) - probs  # mass of strictly more likely tokens
    keep = before < top_p.unsqueeze(1)
    keep[:, 0] = True
    picked = _inverse_cdf(torch.where(keep, probs, torch.zeros_like(probs)), u)
    return order.gather(1, picked.unsqueeze(1)).squeeze(1)


def sequence_logprobs(model: Any, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]],
                      temperature: float = 1.0, pad_id: int = 0, grad: bool = False) -> list[list[float]]:
    """Log-probs of each completion token under ``model`` given its prompt, for a batch (right padded,
    one forward pass). With ``grad=True`` the caller gets tensors it can backpropagate through
    (a list of 1-D tensors); otherwise plain floats."""
    torch = _torch()
    if temperature <= 0:
        raise ConfigError(f"temperature={temperature} must be > 0 for log-probs (use 1.0 for greedy samples)")
    if len(prompts) != len(completions):
        raise ConfigError(f"{len(prompts)} prompts but {len(completions)} completions")
    seqs = [list(p) + list(c) for p, c in zip(prompts, completions)]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, :len(s)] = 1
    dev = next(model.parameters()).device
    context = torch.enable_grad() if grad else torch.inference_mode()
    with context:
        logits = model(input_ids=ids.to(dev), attention_mask=mask.to(dev)).logits.float()
        logp = torch.log_softmax(logits / temperature, dim=-1)
        out = []
        for i, (p, c) in enumerate(zip(prompts, completions)):
            if not c:
                out.append(logp.new_zeros(0) if grad else [])
                continue
            target = torch.tensor(list(c), dtype=torch.long, device=dev)
            rows = logp[i, len(p) - 1:len(p) - 1 + len(c)]
            picked = rows.gather(1, target.unsqueeze(1)).squeeze(1)
            out.append(picked if grad else [float(x) for x in picked.cpu()])
    return out
