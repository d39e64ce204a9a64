#!/usr/bin/env bash
# The GPU check of issue 13, on a machine with CUDA, from the repository root:
#
#   OUT=/tmp/ember-gpu bash benchmarks/gpu.sh
#
# 1. tests/test_cuda.py (guards on the device, cuda autocast, streams, AOT and Inductor on GPU
#    tensors; all compared with eager);
# 2. the zoo train steps with Inductor on cuda, ember vs torch.compile, each row in a fresh
#    process with empty compiler caches (benchmarks/run.py --device cuda): cold compile, steady
#    step time, correctness. Results: $OUT/gpu_bench.json and .log; docs/benchmarks.md records them.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ember-gpu}
mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONWARNINGS=ignore
nvidia-smi -L
"$PY" -c "import sys, torch, transformers; print('python', sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())"
timeout "${TEST_TIMEOUT:-240}" "$PY" -m pytest -q -p no:cacheprovider tests/test_cuda.py 2>&1 | tee "$OUT/gpu_tests.log" | tail -40
timeout "${BENCH_TIMEOUT:-420}" "$PY" -m benchmarks.run --device cuda --models "${MODELS:-nanogpt,gpt2,llama}" \
    --backends inductor --threads 0 --iters "${ITERS:-50}" --timeout 200 \
    --json "$OUT/gpu_bench.json" 2>&1 | tee "$OUT/gpu_bench.log"
