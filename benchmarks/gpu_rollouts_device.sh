#!/usr/bin/env bash
# One-shot GPU check for issue 17, for a session that is lent a device (see ../shared/device/README.md):
#   here:   bash ../shared/device/prepare.sh          (wheels + zoo into .device/)
#   device: run  command: source .device/bootstrap.sh && bash benchmarks/gpu_rollouts_device.sh
#                carry:   [".device"]   timeout_s: 480 (leaves room for one rerun in 15 minutes of device time)
# 1. the fast path's equality tests and the backend's tests on CUDA (tests/agents/test_hf_fast.py runs the
#    CPU-forced path there too; the GPU-marked tests run, vLLM's skip: vllm is not on the image);
# 2. an eager vs fast equality check on CUDA in bf16 (rows identical, reported, not asserted: near-ties);
# 3. benchmarks/gpu_rollouts.py at its CUDA sizes (0.30B random Qwen2-style model, bf16, 64 and 256 prompts,
#    128 new tokens; one C-RL step at 64 executions x 64 new tokens, fast decode off and on, and one LoRA C-RL
#    step, r=16, issue 28), results and table under $OUT;
# 4. the LoRA tests on CUDA (tests/training/test_lora.py: peft equivalence, bitwise resume, merged export);
set -uo pipefail
OUT=${OUT:-/tmp/gpu_rollouts_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv > "$OUT/nvidia-smi.csv" 2>&1
timeout 150 python3 -m pytest -q -x tests/agents/test_hf_fast.py tests/agents/test_hf_backend.py \
    tests/training/test_vllm_rollouts.py > "$OUT/pytest.txt" 2>&1
echo "pytest rc=$?" | tee -a "$OUT/pytest.txt"
tail -5 "$OUT/pytest.txt"
timeout 300 python3 benchmarks/gpu_rollouts.py --repeats 3 --out "$OUT/gpu_rollouts.json" 2>&1 | tee "$OUT/bench.txt"
echo "benchmark rc=${PIPESTATUS[0]}"
timeout 120 python3 -m pytest -q -x tests/training/test_lora.py > "$OUT/pytest_lora.txt" 2>&1
echo "lora pytest rc=$?" | tee -a "$OUT/pytest_lora.txt"
# 5. where the fast and eager paths part, float32 vs bfloat16 (issue 17's equality promise, per dtype)
timeout 120 python3 benchmarks/gpu_fast_equality.py --out "$OUT/gpu_fast_equality.json" 2>&1 | grep -v Warn | tee "$OUT/equality.txt"
