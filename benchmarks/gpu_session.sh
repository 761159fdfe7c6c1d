#!/usr/bin/env bash
# One device-machine run: the CUDA tests of the backends, then the memory-floor benchmark, figures under $OUT.
# Usage (from the repository root, on a machine with a CUDA GPU, torch, triton and torchmetrics installed):
#   OUT=/some/folder bash benchmarks/gpu_session.sh
# The device tool's machines have those packages; nothing is installed or fetched here.
set -uo pipefail
OUT=${OUT:-benchmarks/results}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
card=$(python3 -c "import torch; print(torch.cuda.get_device_name(0).split()[1].lower())" 2>/dev/null || echo gpu)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, triton, torchmetrics; print('torch', torch.__version__, 'triton', triton.__version__, 'torchmetrics', torchmetrics.__version__)"
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_backends.py tests/test_gap.py -k cuda 2>&1 | tee "$OUT/gpu_${card}_cuda_tests.log" | tail -15
timeout 300 python3 -m benchmarks.gpu_floor --queries 100000 --items 1000 --min-run-time 0.5 \
  --out "$OUT/gpu_floor_${card}.json" 2>&1 | tee "$OUT/gpu_floor_${card}.log" | tail -30
