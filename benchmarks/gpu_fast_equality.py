"""Where the HF backend's fast decode path and its eager path part on a GPU, and why (device check).

The fast path (static KV cache + CUDA graphs) promises the eager path's tokens for the same seeds on the same
device and dtype. On an H200 in bf16 the benchmark's random 0.3B model gave 0/64 identical rows. This check
tells a kernel-level rounding difference (rows part late, at a near-tie, after matching log-probs) from a
sampling bug (rows part at the first token, or log-probs differ by far more than the dtype's rounding):
for float32 and bfloat16, eager vs eager (the eager path's own run-to-run determinism) and eager vs fast,
the first position where each row parts, and the largest log-prob gap over the shared prefix.

    python benchmarks/gpu_fast_equality.py [--out FILE]        (on CPU it checks the CPU paths)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_rollouts import build_model, make_asks  # noqa: E402

from coalition_gym.agents.hf import HFGenerator  # noqa: E402
from coalition_gym.agents.options import HFOptions  # noqa: E402

SPEC = {"hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 4, "num_attention_heads": 8,
        "num_key_value_heads": 2, "vocab_size": 32000}


def parting(a, b) -> dict:
    """First position where two rows' tokens part (None: identical) and the largest log-prob gap before it."""
    first = next((k for k, (x, y) in enumerate(zip(a.token_ids, b.token_ids)) if x != y), None)
    if first is None and len(a.token_ids) != len(b.token_ids):
        first = min(len(a.token_ids), len(b.token_ids))
    upto = len(a.token_ids) if first is None else first
    gap = max((abs(x - y) for x, y in zip((a.logprobs or ())[:upto], (b.logprobs or ())[:upto])), default=0.0)
    return {"first": first, "gap": gap}


def compare(ref, other) -> dict:
    parts = [parting(a, b) for a, b in zip(ref, other)]
    firsts = [p["first"] for p in parts if p["first"] is not None]
    return {"identical": sum(p["first"] is None for p in parts), "rows": len(parts), "first_parting": sorted(firsts),
            "max_logprob_gap_before_parting": max(p["gap"] for p in parts)}


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=32)
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    results = []
    for dtype in ("float32", "bfloat16"):
        model, tok = build_model(SPEC, device, dtype)
        asks = make_asks(args.prompts, args.new_tokens, SPEC["vocab_size"])
        opts = dict(max_new_tokens=args.new_tokens, max_batch_size=args.prompts)
        eager = HFGenerator(model, tok, options=HFOptions(**opts, fast_decode="off"))
        fast = HFGenerator(model, tok, options=HFOptions(**opts, fast_decode="on"))
        first, again, quick = eager.generate(asks), eager.generate(asks), fast.generate(asks)
        row = {"device": device, "dtype": dtype, "eager_vs_eager": compare(first, again),
               "eager_vs_fast": compare(first, quick)}
        print(json.dumps(row), flush=True)
        results.append(row)
        del model, eager, fast
    if args.out:
        Path(args.out).write_text(json.dumps({"spec": SPEC, "rows": results}, indent=1))


if __name__ == "__main__":
    main()
