"""Kernel scoring (KernelBench-style): is a candidate PyTorch module correct, and how much faster?

The reference source defines ``Model(nn.Module)``, ``get_inputs()`` and ``get_init_inputs()``;
the candidate source defines ``ModelNew`` with the same constructor and forward signature. Inside
the sandbox a trusted harness:

1. builds the reference (seeded), draws ``n_correctness`` seeded input sets and ``n_timing``
   other ones, computes the reference outputs and times the reference, all **before** the
   candidate's code is executed (so the candidate cannot slow down or rewrite the reference);
2. executes the candidate, builds ``ModelNew`` with the same seed and init inputs, checks every
   output's shape and values (``torch.allclose`` with ``atol``/``rtol``, taken before the
   candidate ran, so patching torch does not help);
3. times the candidate on the timing inputs (a clock taken before the candidate ran; CUDA is
   synchronised after each call).

Score: ``0`` when the candidate fails to build, crashes or is wrong anywhere; otherwise
``speedup / (1 + speedup)`` with ``speedup = median reference time / median candidate time``:
0.5 for a correct kernel as fast as the reference, 2/3 at 2x, 0.9 at 9x, approaching 1.
It runs on CPU, and on CUDA when the sandbox sees a GPU (``device="auto"``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .result import ScoreResult, as_text, unparsed
from .sandbox import Limits, Program, RunResult, run_programs

KERNEL_LIMITS_CPU = Limits(wall_seconds=120.0, cpu_seconds=240, memory_bytes=16 << 30, processes=64,
                           output_bytes=256 << 10)
# CUDA reserves a huge virtual address space, so no address-space limit on GPU
KERNEL_LIMITS_GPU = Limits(wall_seconds=120.0, cpu_seconds=240, memory_bytes=None, processes=256,
                           output_bytes=256 << 10)

_HARNESS = r'''
import statistics
import time
import torch

REFERENCE = __REFERENCE__
CANDIDATE = __CANDIDATE__
CONFIG = __CONFIG__


def _load(source, name):
    namespace = {"__name__": name, "__builtins__": __builtins__}
    exec(compile(source, "<" + name + ">", "exec"), namespace)
    return namespace


def _main(report, clock, allclose, synchronize):
    seed = CONFIG["seed"]
    want = CONFIG["device"]
    device = torch.device("cuda" if want == "cuda" or (want == "auto" and torch.cuda.is_available()) else "cpu")
    torch.set_num_threads(CONFIG["threads"])

    def move(values):
        return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]

    def timed(model, input_sets):
        with torch.no_grad():
            for inputs in input_sets[:CONFIG["warmup"]]:
                model(*inputs)
            synchronize(device)
            times = []
            for inputs in input_sets:
                start = clock()
                model(*inputs)
                synchronize(device)
                times.append(clock() - start)
        return statistics.median(times)

    reference = _load(REFERENCE, "reference")
    torch.manual_seed(seed)
    init = reference["get_init_inputs"]()
    torch.manual_seed(seed)
    ref_model = reference["Model"](*init).to(device).eval()
    check_sets, time_sets = [], []
    for trial in range(CONFIG["n_correctness"]):
        torch.manual_seed(seed + 1 + trial)
        check_sets.append(move(reference["get_inputs"]()))
    for trial in range(CONFIG["n_timing"]):
        torch.manual_seed(seed + 10_000 + trial)
        time_sets.append(move(reference["get_inputs"]()))
    with torch.no_grad():
        expected = [ref_model(*inputs).detach().clone() for inputs in check_sets]
    ref_seconds = timed(ref_model, time_sets)
    del ref_model, reference

    candidate = _load(CANDIDATE, "candidate")
    if "ModelNew" not in candidate:
        raise AssertionError("the candidate defines no ModelNew")
    torch.manual_seed(seed)
    new_model = candidate["ModelNew"](*init).to(device).eval()
    with torch.no_grad():
        for trial, (inputs, want_out) in enumerate(zip(check_sets, expected)):
            got = new_model(*inputs)
            if not isinstance(got, torch.Tensor) or got.shape != want_out.shape:
                raise AssertionError(f"trial {trial}: output shape {getattr(got, 'shape', type(got))} != "
                                     f"{tuple(want_out.shape)}")
            if not allclose(got.to(want_out.dtype), want_out, atol=CONFIG["atol"], rtol=CONFIG["rtol"]):
                raise AssertionError(f"trial {trial}: output differs from the reference beyond "
                                     f"atol={CONFIG['atol']}, rtol={CONFIG['rtol']}")
    new_seconds = timed(new_model, time_sets)
    report({"ref_seconds": ref_seconds, "new_seconds": new_seconds, "device": str(device)})


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


_main(globals().pop("__report__"), time.perf_counter, torch.allclose, _sync)
'''


@dataclass(frozen=True)
class KernelConfig:
    device: str = "auto"  # auto | cpu | cuda
    n_correctness: int = 3
    n_timing: int = 10
    warmup: int = 2
    atol: float = 1e-2
    rtol: float = 1e-2
    seed: int = 0
    threads: int = 1


def kernel_program(reference: str, candidate: str, config: KernelConfig = KernelConfig()) -> str:
    """The sandboxed harness program comparing ``candidate`` with ``reference``."""
    settings = {k: getattr(config, k) for k in KernelConfig.__dataclass_fields__}
    return (_HARNESS.replace("__REFERENCE__", repr(reference)).replace("__CANDIDATE__", repr(candidate))
            .replace("__CONFIG__", repr(settings)))


def speedup_score(speedup: float) -> float:
    """Correct kernels: speedup / (1 + speedup), in (0, 1), increasing with the speedup."""
    return 0.0 if speedup <= 0 else speedup / (1.0 + speedup)


def kernel_verdict(run: RunResult) -> ScoreResult:
    if not run.passed:
        return ScoreResult(0.0, True, f"incorrect or failed ({run.status}): {run.reason}",
                           {"status": run.status, "stderr": run.stderr[-2000:]})
    report = run.report if isinstance(run.report, dict) else {}
    ref, new = report.get("ref_seconds"), report.get("new_seconds")
    if not isinstance(ref, (int, float)) or not isinstance(new, (int, float)) or ref <= 0 or new <= 0:
        return ScoreResult(0.0, True, "correct but its timing could not be read", dict(report))
    speedup = ref / new
    return ScoreResult(speedup_score(speedup), True, f"correct, speedup {speedup:.2f}x",
                       {**report, "speedup": speedup})


def kernel_limits(config: KernelConfig) -> Limits:
    """GPU limits (no address-space cap: CUDA maps far more than it uses) whenever the program will
    touch CUDA: ``device="cuda"``, or ``"auto"`` on a machine where torch sees a GPU. CPU limits
    applied while CUDA initialises made a correct kernel score 0 on an H200 machine."""
    if config.device == "cuda":
        return KERNEL_LIMITS_GPU
    if config.device == "auto":
        try:
            import torch

            if torch.cuda.is_available():
                return KERNEL_LIMITS_GPU
        except ImportError:
            pass
    return KERNEL_LIMITS_CPU


def score_kernels(pairs: list[tuple[str, str | None]], config: KernelConfig = KernelConfig(),
                  limits: Limits | None = None, workers: int | None = 1) -> list[ScoreResult]:
    """Score (reference, candidate) pairs; one at a time by default so that timings do not
    compete for the same cores. A None or empty candidate scores 0 unparsed."""
    limits = limits or kernel_limits(config)
    todo = [(i, kernel_program(ref, cand, config)) for i, (ref, cand) in enumerate(pairs) if as_text(cand)]
    runs = run_programs([Program(p) for _, p in todo], limits=limits, workers=workers)
    out = [unparsed("no kernel code")] * len(pairs)
    for (i, _), run in zip(todo, runs):
        out[i] = kernel_verdict(run)
    return out


__all__ = ["KernelConfig", "kernel_program", "kernel_limits", "speedup_score", "kernel_verdict", "score_kernels",
           "KERNEL_LIMITS_CPU", "KERNEL_LIMITS_GPU"]
