#!/usr/bin/env bash
# One device-machine run: the CUDA tests of the backends, the memory-floor benchmark, the long lists, then issue 23's
# id lists and catalogue scoring on the GPU (configs/bench/ids.yaml), figures under $OUT. The floor part is issue 32's
# GPU measurement: NDCG@10 and the set of 8 on 100,000 x 1,000 against the copy floor on both device backends, a metric
# update's host time under set_sync_debug_mode("error"), in gpu_floor_<card>.json naming the device and commit. The
# long part (gpu_long_lists_<card>.json): rows of 1,000 to 100,000 items, the fallback past 4,096 items and top-k
# against sort per row length.
# Usage (from the repository root, on a machine with a CUDA GPU, torch, triton and torchmetrics installed):
#   OUT=/some/folder bash benchmarks/gpu_session.sh                    # all four parts
#   OUT=/some/folder bash benchmarks/gpu_session.sh tests floor long   # some of them: tests, floor, long, ids
# A copied tree without .git names its commit with TORCHRANK_COMMIT=<hash> (the JSON records it).
# Each part has its own timeout (4, 5, 3 and 4 minutes): where one call may run 10 minutes at most, split them; on a
# 15-minute device budget, issue 32's parts are tests, floor and long.
# The device tool's machines have those packages; nothing is installed or fetched here.
set -uo pipefail
OUT=${OUT:-benchmarks/results}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
card=$(python3 -c "import torch; print(torch.cuda.get_device_name(0).split()[1].lower())" 2>/dev/null || echo gpu)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, triton, torchmetrics; print('torch', torch.__version__, 'triton', triton.__version__, 'torchmetrics', torchmetrics.__version__)"
parts=${*:-tests floor long ids}
want() { [[ " $parts " == *" $1 "* ]]; }
want tests && timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_backends.py tests/test_gap.py -k cuda 2>&1 | tee "$OUT/gpu_${card}_cuda_tests.log" | tail -15
# the triton kernel's selection and sort paths against numpy, on the GPU (issue 32's correctness on the device)
want tests && timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_kernel_select.py 2>&1 | tee -a "$OUT/gpu_${card}_cuda_tests.log" | tail -5
# torchmetrics' RetrievalNormalizedDCG is left out: two runs of 100 s each on the H200 (gpu_floor_h200.json has it)
want floor && timeout 300 python3 -m benchmarks.gpu_floor --queries 100000 --items 1000 --min-run-time 0.5 \
  --no-torchmetrics --no-long-lists --out "$OUT/gpu_floor_${card}.json" 2>&1 | tee "$OUT/gpu_floor_${card}.log" | tail -30
# issue 32's top-k against sort per row length, and the cost of lists past the triton kernel's 4,096 items
want long && timeout 180 python3 -m benchmarks.gpu_floor --long-lists-only --min-run-time 0.5 \
  --out "$OUT/gpu_long_lists_${card}.json" 2>&1 | tee "$OUT/gpu_long_lists_${card}.log" | tail -8
want ids && timeout 240 python3 -m benchmarks.run --config configs/bench/ids.yaml --device cuda --out "$OUT" --no-summary 2>&1 \
  | tee "$OUT/ids_${card}.log" | tail -12
