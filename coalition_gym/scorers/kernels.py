"""Kernel scoring (KernelBench-style): is a candidate PyTorch module correct, and how much faster?

The reference source defines ``Model(nn.Module)``, ``get_inputs()`` and ``get_init_inputs()``;
the candidate source defines ``ModelNew`` with the same constructor and forward signature. Scoring
goes through the split harness (``split.py``): the candidate's code runs in its own sandboxed
process and only answers calls; tensors cross the channel as plain data
``("tensor", dtype, shape, bytes)``. The trusted tests' process, which never runs candidate code:

1. builds the reference (seeded), draws ``n_correctness`` seeded input sets and ``n_timing``
   other ones, computes the reference outputs and times the reference;
2. asks the candidate's process to build ``ModelNew`` with the same seed and init inputs, sends each
   correctness input set and checks the returned output's shape and values (``torch.allclose``
   with ``atol``/``rtol``) itself;
3. times the candidate with *its own* clock: one call per timing input set ("run set k, R times",
   no tensor in the reply; CUDA synchronised in the candidate's process before it answers), minus
   the median round trip of an empty call; R makes one call last ~2 ms (the reference is timed with
   its own R), so the channel costs the candidate under 1%.

Score: ``0`` when the candidate fails to build, crashes or is wrong anywhere; otherwise
``speedup / (1 + speedup)`` with ``speedup = median reference time / median candidate time``:
0.5 for a correct kernel as fast as the reference, 2/3 at 2x, 0.9 at 9x, approaching 1.
It runs on CPU, and on CUDA when the sandbox sees a GPU (``device="auto"``). Not covered: a
candidate that answers the timing calls without computing (the timing sets' outputs are not
fetched back), as in KernelBench itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..sandbox.launcher import Limits, RunResult
from ..sandbox.two_process import SplitProgram, candidate_program, run_split, run_splits, tests_program
from ..settings_check import check_settings, setting
from .result import ScoreResult, as_text, unparsed

KERNEL_LIMITS_CPU = Limits(wall_seconds=120.0, cpu_seconds=240, memory_bytes=16 << 30, processes=64,
                           output_bytes=256 << 10)
# CUDA reserves a huge virtual address space, so no address-space limit on GPU
KERNEL_LIMITS_GPU = Limits(wall_seconds=120.0, cpu_seconds=240, memory_bytes=None, processes=256,
                           output_bytes=256 << 10)

# Both processes: tensors to and from plain data (exact dtype, shape and bytes).
_TENSOR_CODEC = r'''
import torch as _torch


def to_plain(value):
    if isinstance(value, _torch.Tensor):
        flat = value.detach().to("cpu").contiguous().reshape(-1)
        return ("tensor", str(flat.dtype).split(".")[-1], tuple(value.shape), flat.view(_torch.uint8).numpy().tobytes())
    return value


def from_plain(value, device):
    if type(value) is tuple and len(value) == 4 and value[0] == "tensor":
        dtype = getattr(_torch, value[1], None)
        if not isinstance(dtype, _torch.dtype):
            raise TypeError("unknown tensor dtype " + repr(value[1]))
        shape = tuple(value[2])
        if not value[3]:
            return _torch.empty(shape, dtype=dtype, device=device)
        flat = _torch.frombuffer(bytearray(value[3]), dtype=_torch.uint8).view(dtype)
        return flat.reshape(shape).to(device)
    return value
'''

# The candidate's process: served functions appended to the candidate's code (same namespace).
_CANDIDATE_SERVICE = r'''
__kernel_state__ = {}


def __kernel_sync__():
    if __kernel_state__["device"].type == "cuda":
        _torch.cuda.synchronize()


def __kernel_build__(init, device, seed, threads):
    if "ModelNew" not in globals():
        raise AssertionError("the candidate defines no ModelNew")
    _torch.set_num_threads(threads)
    device = _torch.device(device)
    _torch.manual_seed(seed)
    model = ModelNew(*[from_plain(v, device) for v in init]).to(device).eval()
    __kernel_state__.update(model=model, device=device)


def __kernel_run__(inputs):
    state = __kernel_state__
    with _torch.no_grad():
        return to_plain(state["model"](*[from_plain(v, state["device"]) for v in inputs]))


def __kernel_load__(input_sets, warmup):
    state = __kernel_state__
    state["sets"] = [[from_plain(v, state["device"]) for v in inputs] for inputs in input_sets]
    with _torch.no_grad():
        for inputs in state["sets"][:warmup]:
            state["model"](*inputs)
    __kernel_sync__()


def __kernel_time__(k, reps):
    model, inputs = __kernel_state__["model"], __kernel_state__["sets"][k]
    with _torch.no_grad():
        for _ in range(reps):
            model(*inputs)
    __kernel_sync__()


def __kernel_ping__():
    return None
'''

_CALLS = ["__kernel_build__", "__kernel_run__", "__kernel_load__", "__kernel_time__", "__kernel_ping__"]

# The tests' process (trusted): reference, inputs, expected outputs, the verdict and both timings.
_TESTS = r'''
import statistics
import time

REFERENCE = __REFERENCE__
CONFIG = __CONFIG__


def _repetitions(seconds):
    """Calls per timed measurement so that one lasts ~2 ms (1 to 1000)."""
    return max(1, min(1000, int(2e-3 / max(seconds, 1e-7))))


def _load(source, name):
    namespace = {"__name__": name, "__builtins__": __builtins__}
    exec(compile(source, "<" + name + ">", "exec"), namespace)
    return namespace


def _main(report, clock, allclose):
    seed = CONFIG["seed"]
    want = CONFIG["device"]
    device = _torch.device("cuda" if want == "cuda" or (want == "auto" and _torch.cuda.is_available()) else "cpu")
    _torch.set_num_threads(CONFIG["threads"])

    def synchronize():
        if device.type == "cuda":
            _torch.cuda.synchronize()

    def move(values):
        return [v.to(device) if isinstance(v, _torch.Tensor) else v for v in values]

    reference = _load(REFERENCE, "reference")
    _torch.manual_seed(seed)
    init = reference["get_init_inputs"]()
    _torch.manual_seed(seed)
    ref_model = reference["Model"](*init).to(device).eval()
    check_sets, time_sets = [], []
    for trial in range(CONFIG["n_correctness"]):
        _torch.manual_seed(seed + 1 + trial)
        check_sets.append(move(reference["get_inputs"]()))
    for trial in range(CONFIG["n_timing"]):
        _torch.manual_seed(seed + 10_000 + trial)
        time_sets.append(move(reference["get_inputs"]()))
    with _torch.no_grad():
        expected = [ref_model(*inputs).detach().clone() for inputs in check_sets]
        for inputs in time_sets[:CONFIG["warmup"]]:
            ref_model(*inputs)
        synchronize()
        start = clock()
        ref_model(*time_sets[0])
        synchronize()
        # repeat fast kernels so that one timed call lasts ~2 ms: the channel's round trip (tens of
        # microseconds) then costs the candidate under 1% of its time
        reps = _repetitions(clock() - start)
        ref_times = []
        for inputs in time_sets:
            start = clock()
            for _ in range(reps):
                ref_model(*inputs)
            synchronize()
            ref_times.append((clock() - start) / reps)
    del ref_model, reference

    __kernel_build__([to_plain(v) for v in init], str(device), seed, CONFIG["threads"])
    for trial, (inputs, want_out) in enumerate(zip(check_sets, expected)):
        got = from_plain(__kernel_run__([to_plain(v) for v in inputs]), device)
        if not isinstance(got, _torch.Tensor) or got.shape != want_out.shape:
            raise AssertionError(f"trial {trial}: output shape {getattr(got, 'shape', type(got))} != "
                                 f"{tuple(want_out.shape)}")
        if not allclose(got.to(want_out.dtype), want_out, atol=CONFIG["atol"], rtol=CONFIG["rtol"]):
            raise AssertionError(f"trial {trial}: output differs from the reference beyond "
                                 f"atol={CONFIG['atol']}, rtol={CONFIG['rtol']}")
    __kernel_load__([[to_plain(v) for v in inputs] for inputs in time_sets], CONFIG["warmup"])
    pings = []
    for _ in range(5):
        start = clock()
        __kernel_ping__()
        pings.append(clock() - start)
    overhead = statistics.median(pings)
    start = clock()
    __kernel_time__(0, 1)
    reps = _repetitions(clock() - start - overhead)  # its own count: a slow kernel is not run 1000 times
    new_times = []
    for k in range(len(time_sets)):
        start = clock()
        __kernel_time__(k, reps)
        new_times.append(max(clock() - start - overhead, 1e-9) / reps)
    report({"ref_seconds": statistics.median(ref_times), "new_seconds": statistics.median(new_times),
            "device": str(device), "call_overhead_seconds": overhead, "repetitions": reps})


_main(__report__, time.perf_counter, _torch.allclose)
'''


@dataclass(frozen=True)
class KernelConfig:
    device: str = setting("auto", choices=("auto", "cpu", "cuda"), doc="where the kernels run")
    n_correctness: int = setting(3, ge=1, doc="random inputs the candidate must match the reference on")
    n_timing: int = setting(10, ge=1, doc="timed runs of each")
    warmup: int = setting(2, ge=0, doc="untimed runs first")
    atol: float = setting(1e-2, ge=0, doc="absolute tolerance of the comparison")
    rtol: float = setting(1e-2, ge=0, doc="relative tolerance of the comparison")
    seed: int = setting(0, ge=0, doc="the inputs' seed")
    threads: int = setting(1, ge=1, doc="torch threads of the program")

    def __post_init__(self) -> None:
        check_settings(self, "kernel config")


def kernel_program(reference: str, candidate: str, config: KernelConfig = KernelConfig()) -> SplitProgram:
    """The two halves comparing ``candidate`` with ``reference``: the trusted tests and the served code."""
    settings = {k: getattr(config, k) for k in KernelConfig.__dataclass_fields__}
    tests = _TENSOR_CODEC + _TESTS.replace("__REFERENCE__", repr(reference)).replace("__CONFIG__", repr(settings))
    return SplitProgram(tests=tests_program("", tests, _CALLS),
                        candidate=candidate_program(f"{candidate}\n{_TENSOR_CODEC}\n{_CANDIDATE_SERVICE}"))


def speedup_score(speedup: float) -> float:
    """Correct kernels: speedup / (1 + speedup), in (0, 1), increasing with the speedup."""
    return 0.0 if speedup <= 0 else speedup / (1.0 + speedup)


def kernel_verdict(run: RunResult) -> ScoreResult:
    if not run.passed:
        return ScoreResult(0.0, True, f"incorrect or failed ({run.status}): {run.reason}",
                           {"status": run.status, **run.exposure(), "stderr": run.stderr[-2000:]})
    report = {**(run.report if isinstance(run.report, dict) else {}), **run.exposure()}
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
                  limits: Limits | None = None, workers: int | None = 1,
                  hidden: Sequence[str] = (), mode: str = "auto") -> list[ScoreResult]:
    """Score (reference, candidate) pairs; one at a time by default so that timings do not
    compete for the same cores. A None or empty candidate scores 0 unparsed. ``hidden``: host paths
    the programs must not see (the task's data files); ``mode``: the sandbox's isolation mode."""
    limits = limits or kernel_limits(config)
    todo = [(i, kernel_program(ref, as_text(cand) or "", config))
            for i, (ref, cand) in enumerate(pairs) if as_text(cand)]
    if workers == 1:  # timings must not compete: one pair at a time
        runs = [run_split(p, limits, mode, hidden) for _, p in todo]
    else:
        runs = run_splits([p for _, p in todo], limits=limits, mode=mode, workers=workers, hidden=hidden)
    out = [unparsed("no kernel code")] * len(pairs)
    for (i, _), run in zip(todo, runs):
        out[i] = kernel_verdict(run)
    return out


__all__ = ["KernelConfig", "kernel_program", "kernel_limits", "speedup_score", "kernel_verdict", "score_kernels",
           "KERNEL_LIMITS_CPU", "KERNEL_LIMITS_GPU"]
