"""Rollouts at GPU speed (issue 17): tokens/s of ``model.generate``, the HF backend's eager path and its
fast path (static KV cache; CUDA graphs on CUDA), and one C-RL step's rollout and update seconds.

The model is a randomly initialised Qwen2-style causal LM built here from a config (no download) with
a word-level tokenizer of the same vocabulary: on CUDA 0.30B parameters (hidden 1024, 24 layers, 16
heads / 4 KV heads, 32k vocabulary, bf16), 64 and 256 prompts, 128 new tokens; on CPU a small one at
small sizes (``--quick``: smaller still). Prompts are 16-48 random words (mixed lengths, left padding),
sampled at temperature 1 with per-Ask seeds. A random model almost never emits EOS, so every row
decodes its whole budget: tokens/s compare like for like. Each figure is the median of ``--repeats``
timed runs after a warm-up run (which, on CUDA, includes compiling the fast path's graphs).

The C-RL step (fast decode off and on, then once more with LoRA r=16 on every linear layer, fast decode off):
``Trainer`` with the paper preset (8 items x G=8 executions), ``majority_vote`` with
simulated collaborators (``sim:demo``) on ``zoo:arith``, the policy saved to a temporary folder.
``rollout`` is the step's rollout seconds (protocol driving, collaborators and scoring included) and
``update`` its optimiser seconds (zero when every group's rewards tie, as they mostly do for a random
policy; "update, all calls" times one clipped policy-gradient step on all the step's calls with
advantages of +-1); ``policy tok/s`` is the policy's generated tokens over the rollout
seconds, compared with one batched ``model.generate`` of the same prompts and as many new tokens.

    .venv/bin/python benchmarks/gpu_rollouts.py [--quick] [--out FILE] [--repeats 3]

Writes JSON (rows tagged with their device) to ``benchmarks/results/gpu_rollouts.json`` (``--quick``:
``gpu_rollouts.quick.json``) and a markdown table beside it.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, write_json  # noqa: E402

from coalition_gym.agents.hf import HFGenerator  # noqa: E402
from coalition_gym.agents.options import HFOptions
from coalition_gym.types import Ask, Message, SamplingParams  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "gpu_rollouts.json"
SIZES: dict[str, dict[str, Any]] = {
    "cuda": {"model": {"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 24,
                       "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 32000},
             "prompts": [64, 256], "new_tokens": 128, "crl_new_tokens": 64},
    "cpu": {"model": {"hidden_size": 256, "intermediate_size": 704, "num_hidden_layers": 4,
                      "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 8000},
            "prompts": [16, 64], "new_tokens": 32, "crl_new_tokens": 16},
    "quick": {"model": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000},
              "prompts": [8, 16], "new_tokens": 12, "crl_new_tokens": 8},
}


def build_model(spec: dict[str, Any], device: str, dtype: str) -> tuple[Any, Any]:
    """A random Qwen2-style model and a word-level tokenizer (w4 ... w<V-1>, plus 4 specials)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen2Config

    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": 2, "<unk>": 3}
    vocab.update({f"w{k}": k for k in range(4, spec["vocab_size"])})
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>",
                                  unk_token="<unk>")
    torch.manual_seed(0)
    cfg = Qwen2Config(**spec, max_position_embeddings=4096, eos_token_id=2, pad_token_id=0, bos_token_id=1,
                      tie_word_embeddings=True)
    model = AutoModelForCausalLM.from_config(cfg).to(device=device, dtype=getattr(torch, dtype)).eval()
    return model, tok


def make_asks(n: int, new_tokens: int, vocab: int) -> list[Ask]:
    import random

    rng = random.Random(n)
    asks = []
    for k in range(n):
        words = " ".join(f"w{rng.randrange(4, vocab)}" for _ in range(rng.randrange(16, 49)))
        asks.append(Ask("policy", (Message("user", words),), seed=1000 + k,
                        params=SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=new_tokens)))
    return asks


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn: Any) -> tuple[Any, float]:
    gc.collect()
    sync()
    start = time.perf_counter()
    value = fn()
    sync()
    return value, time.perf_counter() - start


def generate_tokens(model: Any, prompts: list[list[int]], new_tokens: int, pad_id: int, eos: int) -> int:
    """One batched ``model.generate`` (sampled, T=1) over ``prompts``; generated tokens up to EOS."""
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    with torch.inference_mode():
        out = model.generate(ids.to(model.device), attention_mask=mask.to(model.device), max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                             pad_token_id=pad_id, eos_token_id=eos)
    return int(out[:, width:].numel())


def bench_decode(model: Any, tok: Any, n: int, new_tokens: int, repeats: int, tag: dict[str, Any]) -> dict[str, Any]:
    asks = make_asks(n, new_tokens, model.config.vocab_size)
    eager = HFGenerator(model, tok, options=HFOptions(max_new_tokens=new_tokens, max_batch_size=n, fast_decode="off"))
    fast = HFGenerator(model, tok, options=HFOptions(max_new_tokens=new_tokens, max_batch_size=n, fast_decode="on"))
    prompts = eager.encode_prompts(asks)

    def run_gen() -> int:
        return generate_tokens(model, prompts, new_tokens, eager.pad_id, 2)

    def run_backend(gen: HFGenerator) -> Any:
        return lambda: gen.generate(asks)

    ref, _ = timed(run_backend(eager))  # warm-ups (the fast path compiles its graphs here on CUDA)
    got, warm_fast = timed(run_backend(fast))
    timed(run_gen)
    rates: dict[str, list[float]] = {"generate": [], "eager": [], "fast": []}
    for _ in range(repeats):  # interleaved, so drift hits every path alike
        tokens, seconds = timed(run_gen)
        rates["generate"].append(tokens / seconds)
        for name, gen in (("eager", eager), ("fast", fast)):
            samples, seconds = timed(run_backend(gen))
            rates[name].append(sum(len(s.token_ids) for s in samples) / seconds)
    same = sum(a.token_ids == b.token_ids for a, b in zip(ref, got))
    row = {**tag, "kind": "decode", "prompts": n, "new_tokens": new_tokens,
           "generate_tok_s": median(rates["generate"]), "eager_tok_s": median(rates["eager"]),
           "fast_tok_s": median(rates["fast"]), "fast_warmup_seconds": warm_fast, "rows_identical": same,
           "rates": rates}
    row["fast_over_eager"] = row["fast_tok_s"] / row["eager_tok_s"]
    row["eager_over_generate"] = row["eager_tok_s"] / row["generate_tok_s"]
    row["fast_over_generate"] = row["fast_tok_s"] / row["generate_tok_s"]
    print(f"  {n} prompts: generate {row['generate_tok_s']:.0f}, eager {row['eager_tok_s']:.0f}, fast "
          f"{row['fast_tok_s']:.0f} tok/s; fast/eager {row['fast_over_eager']:.2f}; identical rows {same}/{n}",
          file=sys.stderr, flush=True)
    return row


def bench_crl_step(new_tokens: int, fast_decode: str, folder: Path,
                   tag: dict[str, Any], lora_r: int = 0) -> dict[str, Any]:
    from coalition_gym.training.config import make_config
    from coalition_gym.training.trainer import Trainer

    cfg = make_config("crl", preset="paper", policies=[str(folder)], protocol="majority_vote", task="zoo:arith",
                      task_kwargs={"size": 100}, collaborators="sim:demo", max_new_tokens=new_tokens,
                      device=tag["device"], dtype=tag["dtype"], fast_decode=fast_decode, steps=2,
                      out=str(folder / "run"), lora_r=lora_r, lora_alpha=2 * max(lora_r, 1))
    trainer = Trainer(cfg, out=folder / f"run-{fast_decode}-lora{lora_r}", log=lambda *_: None)
    made: list[Any] = []
    original = trainer.recording

    def keep(*a: Any, **k: Any) -> Any:
        policy = original(*a, **k)
        made.append(policy.backend)
        return policy

    trainer.recording = keep  # type: ignore[method-assign]
    trainer.train_step(0)  # warm-up (graphs, allocator)
    made.clear()
    captured: dict[str, Any] = {}
    gather = trainer.gather_batch

    def spy(step: int) -> Any:
        out = gather(step)
        captured["calls"] = [c for r in out[0] for c in r.calls]
        return out

    trainer.gather_batch = spy  # type: ignore[method-assign]
    sync()
    row = trainer.train_step(1)
    sync()
    calls = captured["calls"]
    tokens = sum(len(c.completion_ids) for c in calls)
    gen_tokens, gen_seconds = timed(lambda: generate_tokens(trainer.model, [c.prompt_ids for c in calls],
                                                            new_tokens, made[0].pad_id, 2))
    policy_rate = tokens / row["rollout_seconds"]
    # the step's own update is empty when every group's rewards tie (no advantage): time one that is not
    forced_active = [c for c in calls if c.completion_ids]
    _, forced = timed(lambda: trainer.updates[trainer.seats[0]].policy_gradient(
        forced_active, [1.0 if k % 2 else -1.0 for k in range(len(forced_active))], eps_low=cfg.eps_low,
        eps_high=cfg.eps_high, aggregation=cfg.aggregation, passes=cfg.updates_per_batch))
    trained = sum(p.numel() for p in trainer.model.parameters())  # LoRA: the adapter's only
    out = {**tag, "kind": "crl_step", "fast_decode": fast_decode, "lora_r": lora_r, "trained_parameters": trained,
           "executions": row["rollouts"],
           "policy_calls": len(calls), "policy_tokens": tokens, "new_tokens": new_tokens,
           "rollout_seconds": row["rollout_seconds"], "update_seconds": row["update_seconds"],
           "update_seconds_all_calls": forced,
           "policy_tok_s": policy_rate, "generate_same_tok_s": gen_tokens / gen_seconds,
           "rollout_over_generate": policy_rate / (gen_tokens / gen_seconds),
           "policy_backend_calls": len(made), "forward_batches": [b for g in made for b in g.batch_sizes]}
    print(f"  C-RL step (fast_decode={fast_decode}, lora_r={lora_r}): rollout {out['rollout_seconds']:.2f} s, update "
          f"{out['update_seconds']:.2f} s ({forced:.2f} s on all calls), {policy_rate:.0f} policy tok/s = "
          f"{out['rollout_over_generate']:.2f} of one batched generate; forward batches {out['forward_batches']}",
          file=sys.stderr, flush=True)
    return out


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| device | dtype | prompts | new tokens | model.generate tok/s | backend eager tok/s | "
             "backend fast tok/s | fast / eager | eager / generate | fast / generate | identical rows |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["kind"] == "decode":
            lines.append(f"| {r['device']} | {r['dtype']} | {r['prompts']} | {r['new_tokens']} | "
                         f"{r['generate_tok_s']:.0f} | {r['eager_tok_s']:.0f} | {r['fast_tok_s']:.0f} | "
                         f"{r['fast_over_eager']:.2f} | {r['eager_over_generate']:.2f} | "
                         f"{r['fast_over_generate']:.2f} | {r['rows_identical']}/{r['prompts']} |")
    lines += ["", "| device | dtype | fast_decode | LoRA r (trained params) | executions | policy tokens | rollout s "
              "| update s | update s, all calls | policy tok/s | one batched generate tok/s | rollout / generate "
              "| forward batches |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["kind"] == "crl_step":
            lora = f"{r['lora_r']} ({r['trained_parameters'] / 1e6:.2f}M)" if r.get("lora_r") else "off"
            lines.append(f"| {r['device']} | {r['dtype']} | {r['fast_decode']} | {lora} | {r['executions']} | "
                         f"{r['policy_tokens']} | {r['rollout_seconds']:.2f} | {r['update_seconds']:.2f} | "
                         f"{r['update_seconds_all_calls']:.2f} | "
                         f"{r['policy_tok_s']:.0f} | {r['generate_same_tok_s']:.0f} | "
                         f"{r['rollout_over_generate']:.2f} | {r['forward_batches']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny model and sizes, one repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = ("bfloat16" if torch.cuda.is_bf16_supported() else "float16") if device == "cuda" else "float32"
    size = "quick" if args.quick else device
    repeats = 1 if args.quick else args.repeats
    spec = SIZES[size]
    out = Path(args.out) if args.out else (DEFAULT_OUT.with_name("gpu_rollouts.quick.json") if args.quick
                                           else DEFAULT_OUT)
    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    tag = {"device": device, "device_name": name, "dtype": dtype, "size": size}
    model, tok = build_model(spec["model"], device, dtype)
    params = sum(p.numel() for p in model.parameters())
    print(f"random Qwen2-style model: {params / 1e6:.1f}M parameters on {name} ({dtype})", file=sys.stderr)
    rows = [bench_decode(model, tok, n, spec["new_tokens"], repeats, tag) for n in spec["prompts"]]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "policy"
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
        del model
        for mode in ("off", "on"):
            rows.append(bench_crl_step(spec["crl_new_tokens"], mode, folder, tag))
        # one LoRA C-RL step (issue 28): only the adapter trains; the rollouts run base + adapter
        rows.append(bench_crl_step(spec["crl_new_tokens"], "off", folder, tag, lora_r=16))
    md = table(rows)
    print("\n" + md)
    report = {"benchmark": "gpu_rollouts", "settings": {**spec, "repeats": repeats, "parameters": params},
              "rows": rows, "machine": {**machine_info(), "torch": torch.__version__, "device_name": name}}
    write_json(out, report)
    out.with_suffix(".md").write_text(f"# gpu_rollouts ({name}, {dtype}, {params / 1e6:.1f}M parameters)\n\n{md}\n")
    print(f"\nwrote {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
