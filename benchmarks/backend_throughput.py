"""Throughput of the real-model backends on the tiny zoo (CPU unless a GPU is present).

1. HF backend vs ``model.generate``: for each zoo model, the same prompts (zoo task questions in the
   compact style) go through the runner's batched path (``runner.dispatch``: one ``generate`` call
   per backend) and through ``model.generate`` directly, on identical left-padded batches (same
   length-sorted grouping, same ``max_batch_size``); both timings include turning the chats into token
   ids. Greedy rows produce identical tokens on both
   sides, so their tokens/s compare like for like; sampled rows (temperature 1) draw different
   tokens, so their counts differ a little. Target: backend / generate >= 0.9.
2. OpenAI backend against a real ``transformers serve`` process (started here on 127.0.0.1 with one
   zoo model), plain and with ``--continuous-batching``, at concurrency 1, 4 and 16, on the same
   prompts; the HF backend on the same prompts in the same run gives the in-process reference.

Tokens are generated tokens up to and including EOS. Each figure is the median of ``--repeats`` timed
runs after one warm-up run.

    .venv/bin/python benchmarks/backend_throughput.py [--prompts 128] [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from statistics import median

from _common import elapsed_seconds

from coalition_gym import __version__ as package_version
from coalition_gym.agents.hf import HFGenerator
from coalition_gym.agents.openai_api import OpenAIGenerator
from coalition_gym.agents.options import HFOptions, OpenAIOptions
from coalition_gym.agents.zoo import ensure_zoo, zoo_task
from coalition_gym.envs.runner import RunStats, dispatch
from coalition_gym.types import Ask, SamplingParams

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "backend_throughput.json"
QUICK_OUT = DEFAULT_OUT.with_name("backend_throughput.quick.json")
MAX_NEW = 16
BATCH = 64


def make_asks(n: int, temperature: float) -> list[Ask]:
    """``n`` compact-style questions, alternating the arith and reverse zoo tasks."""
    pools = [zoo_task(name, size=n).items("test") for name in ("arith", "reverse")]
    tasks = [zoo_task(name, size=n) for name in ("arith", "reverse")]
    asks = []
    for k in range(n):
        task, item = tasks[k % 2], pools[k % 2][k // 2]
        asks.append(Ask(member="bench", messages=tuple(task.prompt(item, "compact")), seed=1000 + k,
                        params=SamplingParams(temperature=temperature, max_new_tokens=MAX_NEW)))
    return asks


def timed(fn):
    gc.collect()
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def backend_run(gen: HFGenerator, asks: list[Ask]) -> tuple[int, float]:
    """The runner's batched path: one dispatch, one generate call for the whole list."""
    samples, seconds = timed(lambda: dispatch(asks, {"bench": gen}, RunStats()))
    return sum(len(s.token_ids) for s in samples), seconds


def generate_run(gen: HFGenerator, asks: list[Ask], pretokenized: bool = False) -> tuple[int, float]:
    """``model.generate`` on the same batches the backend forms (sorted by prompt length). Like the
    backend's, its timing includes turning the chats into token ids (one batched chat-template call),
    unless ``pretokenized``: then only generation is timed."""
    import torch

    chats = [[{"role": m.role, "content": m.content} for m in a.messages] for a in asks]
    sample = asks[0].params.temperature > 0
    eos = sorted(gen.eos_ids)

    def encode() -> list[list[int]]:
        return gen.tokenizer.apply_chat_template(chats, add_generation_prompt=True, tokenize=True)["input_ids"]

    ready = encode() if pretokenized else None

    def run() -> int:
        prompts = ready if ready is not None else encode()
        order = sorted(range(len(prompts)), key=lambda k: len(prompts[k]))
        tokens = 0
        for start in range(0, len(order), gen.max_batch_size):
            chunk = [prompts[k] for k in order[start:start + gen.max_batch_size]]
            width = max(len(p) for p in chunk)
            ids = torch.full((len(chunk), width), gen.pad_id, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for i, p in enumerate(chunk):
                ids[i, width - len(p):] = torch.tensor(p)
                mask[i, width - len(p):] = 1
            with torch.inference_mode():
                out = gen.model.generate(ids.to(gen.model.device), attention_mask=mask.to(gen.model.device),
                                         max_new_tokens=MAX_NEW, do_sample=sample, temperature=1.0, top_p=1.0,
                                         pad_token_id=gen.pad_id, eos_token_id=eos)
            for row in out[:, width:].tolist():
                n = next((i + 1 for i, t in enumerate(row) if t in gen.eos_ids), len(row))
                tokens += n
        return tokens

    return timed(run)


def median_rate(runs: list[tuple[int, float]]) -> float:
    return median(tokens / seconds for tokens, seconds in runs)


def bench_hf(name: str, folder: Path, n: int, repeats: int) -> list[dict]:
    gen = HFGenerator(str(folder), options=HFOptions(max_new_tokens=MAX_NEW, max_batch_size=BATCH))
    rows = []
    for label, temperature in (("greedy", 0.0), ("sampled T=1", 1.0)):
        asks = make_asks(n, temperature)
        backend_run(gen, asks)  # warm-up
        generate_run(gen, asks)
        runs = []
        for _ in range(repeats):  # interleaved, so drift hits all sides alike
            runs.append((backend_run(gen, asks), generate_run(gen, asks), generate_run(gen, asks, pretokenized=True)))
        back, direct, bare = ([r[k] for r in runs] for k in range(3))
        ratio = median((bt / bs) / (dt / ds) for (bt, bs), (dt, ds), _ in runs)
        ratio_bare = median((bt / bs) / (dt / ds) for (bt, bs), _, (dt, ds) in runs)
        rows.append({"model": name, "mode": label, "prompts": n, "device": gen.device, "dtype": gen.dtype,
                     "backend_tok_s": median_rate(back), "generate_tok_s": median_rate(direct), "ratio": ratio,
                     "generate_pretokenized_tok_s": median_rate(bare), "ratio_pretokenized": ratio_bare,
                     "backend_tokens": [t for t, _ in back], "generate_tokens": [t for t, _ in direct],
                     "backend_seconds": [s for _, s in back], "generate_seconds": [s for _, s in direct],
                     "generate_pretokenized_seconds": [s for _, s in bare]})
        print(f"  {name} {label}: backend {rows[-1]['backend_tok_s']:.0f} tok/s, generate "
              f"{rows[-1]['generate_tok_s']:.0f} tok/s, ratio {ratio:.2f} ({ratio_bare:.2f} vs pre-tokenized)",
              file=sys.stderr, flush=True)
    return rows


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench_serve(name: str, folder: Path, n: int, repeats: int, levels: list[int], batching: bool) -> list[dict]:
    exe = Path(sys.executable).with_name("transformers")
    port = _free_port()
    flags = ["--continuous-batching"] if batching else []
    proc = subprocess.Popen([str(exe), "serve", str(folder), "--host", "127.0.0.1", "--port", str(port),
                             "--device", "cpu", *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    rows = []
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("transformers serve did not start")
                time.sleep(0.3)
        asks = make_asks(n, 1.0)
        local = HFGenerator(str(folder), options=HFOptions(max_new_tokens=MAX_NEW, max_batch_size=BATCH))
        tokenizer = local.tokenizer
        hf_runs = [backend_run(local, asks) for _ in range(repeats + 1)][1:]
        hf_rate = median_rate(hf_runs)
        for level in levels:
            gen = OpenAIGenerator(str(folder), OpenAIOptions(base_url=f"http://127.0.0.1:{port}/v1",
                                                             max_concurrency=level, timeout=120, api_key_env=None))

            def run() -> int:
                samples = gen.generate(asks)
                return sum(len(tokenizer(s.text, add_special_tokens=False)["input_ids"]) + (s.finish_reason == "stop")
                           for s in samples)

            timed(run)  # warm-up (opens the connections)
            runs = [timed(run) for _ in range(repeats)]
            rate = median_rate(runs)
            rows.append({"model": name, "server": "continuous batching" if batching else "default",
                         "concurrency": level, "prompts": n, "tok_s": rate,
                         "hf_backend_tok_s": hf_rate, "ratio_to_hf_backend": rate / hf_rate,
                         "tokens": [t for t, _ in runs], "seconds": [s for _, s in runs]})
            print(f"  serve{' --continuous-batching' if batching else ''} c={level}: {rate:.0f} tok/s ({rate / hf_rate:.2f} of the HF backend)",
                  file=sys.stderr, flush=True)
            gen.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", default="default", help="zoo recipe (built on first use)")
    parser.add_argument("--prompts", type=int, default=128)
    parser.add_argument("--serve-prompts", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny zoo, few prompts, one repeat")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.quick:
        args.recipe, args.prompts, args.serve_prompts, args.repeats = "tiny", 16, 8, 1
    out = Path(args.out) if args.out else (QUICK_OUT if args.quick else DEFAULT_OUT)
    import torch

    build = ensure_zoo(args.recipe)
    hf_rows = []
    for name in build.models:
        hf_rows += bench_hf(name, build.model_path(name), args.prompts, args.repeats)
    serve_model = next(iter(build.models))
    serve_rows = []
    for batching in (False, True):
        serve_rows += bench_serve(serve_model, build.model_path(serve_model), args.serve_prompts, args.repeats,
                                  [1, 4, 16], batching)

    print(f"\nHF backend (runner's batched path) vs model.generate, {args.prompts} prompts, "
          f"max_new_tokens={MAX_NEW}, batch {BATCH}, {hf_rows[0]['device']}/{hf_rows[0]['dtype']}\n")
    print("| model | decoding | backend tok/s | model.generate tok/s | ratio (target >= 0.9) "
          "| generate, pre-tokenized tok/s | ratio to it |")
    print("|---|---|---|---|---|---|---|")
    for r in hf_rows:
        print(f"| {r['model']} | {r['mode']} | {r['backend_tok_s']:.0f} | {r['generate_tok_s']:.0f} | {r['ratio']:.2f} "
              f"| {r['generate_pretokenized_tok_s']:.0f} | {r['ratio_pretokenized']:.2f} |")
    print(f"\nOpenAI backend against `transformers serve` ({serve_model}), {args.serve_prompts} prompts, "
          "temperature 1\n")
    print("| server | concurrency | tok/s | / HF backend in-process |")
    print("|---|---|---|---|")
    for r in serve_rows:
        print(f"| {r['server']} | {r['concurrency']} | {r['tok_s']:.0f} | {r['ratio_to_hf_backend']:.2f} |")
    report = {
        "benchmark": "backend_throughput", "package_version": package_version, "recipe": args.recipe,
        "settings": {"prompts": args.prompts, "serve_prompts": args.serve_prompts, "repeats": args.repeats,
                     "max_new_tokens": MAX_NEW, "max_batch_size": BATCH},
        "hf_vs_generate": hf_rows, "openai_vs_serve": serve_rows,
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpu_count": os.cpu_count(), "torch": torch.__version__,
                    "torch_threads": torch.get_num_threads(),
                    "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None},
        "total_seconds": elapsed_seconds(),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
