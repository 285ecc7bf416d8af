#!/usr/bin/env bash
# Every check that needs a CUDA GPU, as one script (run from the repository root; results in $OUT):
#   1. the Triton LSSA/LSSAR kernels against their PyTorch references on CUDA (tests/test_kernels.py with
#      ORBITLAW_TEST_CUDA=1, the gpu-marked 16k-token bf16 test included);
#   2. the attention benchmark (benchmarks/attention.py --device cuda): Triton LSSA/LSSAR vs SDPA flash;
#   3. `orbitlaw train` end to end on CUDA under torchrun (NCCL): bf16 autocast, torch.compile, the fused
#      LSSAR kernel, a checkpoint, --resume, then `orbitlaw evaluate --lengths` on the rope model;
#   4. training throughput of the reference gpt-109m per attention, eager and compiled, bf16.
# Only torch, triton, numpy, numba, safetensors and tqdm are needed (no install: PYTHONPATH=.).
#     OUT=/tmp/gpu bash benchmarks/gpu_session.sh
set -u
OUT=${OUT:-/tmp/orbitlaw-gpu}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
orbitlaw() { "$PY" -c 'import sys; from orbitlaw.cli import main; sys.argv[0] = "orbitlaw"; sys.exit(main())' "$@"; }
section() { echo; echo "=== $* ($(date +%T))"; }

section machine
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/machine.txt"
"$PY" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' | tee -a "$OUT/machine.txt"

section "1. kernels vs references on CUDA"
ORBITLAW_TEST_CUDA=1 timeout 150 "$PY" -m pytest -q -p no:cacheprovider -m "not slow" -rf tests/test_kernels.py \
    > "$OUT/kernels_cuda.log" 2>&1; tail -25 "$OUT/kernels_cuda.log"

section "2. attention benchmark"
timeout 150 "$PY" benchmarks/attention.py --device cuda --seq-lens 1024 4096 16384 --rep-ms 50 \
    --no-correctness --out "$OUT/attention_cuda.json" --plot "$OUT/attention_cuda.png" 2>&1 | tail -45

section "3. orbitlaw train / resume / evaluate on CUDA (torchrun, bf16, compile, lssar)"
W=/tmp/orbitlaw-e2e; rm -rf "$W"
orbitlaw simulate --preset vafa2025 --splits train=512,val=64 --seed 0 --out "$W/data" --workers 8 2>&1 | tail -2
timeout 120 "$PY" -m torch.distributed.run --nproc_per_node 1 -m orbitlaw.cli train --data "$W/data" \
    --preset small --attention lssar --pos rope --compile --batch-size 32 --max-steps 40 --checkpoint-every 20 \
    --eval-every 20 --log-every 10 --warmup-steps 5 --lr 6e-4 --out "$W/run" --quiet 2>&1 | tail -40
timeout 70 "$PY" -m torch.distributed.run --nproc_per_node 1 -m orbitlaw.cli train --data "$W/data" \
    --preset small --attention lssar --pos rope --compile --batch-size 32 --max-steps 60 --checkpoint-every 20 \
    --eval-every 20 --log-every 10 --warmup-steps 5 --lr 6e-4 --out "$W/run" --resume --quiet \
    2>&1 | tail -40
timeout 50 orbitlaw evaluate --run "$W/run" --data "$W/data" --sequences 64 --lengths 1,2,4,8,16 2>&1 | tail -5
cp "$W/run/metrics.jsonl" "$OUT/e2e_metrics.jsonl" 2>/dev/null
cp "$W/run/eval.json" "$OUT/e2e_eval.json" 2>/dev/null

section "4. gpt-109m training throughput (bf16; eager and compiled)"
timeout 150 "$PY" benchmarks/train_throughput.py --device cuda --preset gpt-109m --batch-size 16 --steps 6 \
    --warmup 2 --compile softmax,lssar --out "$OUT/train_throughput_cuda.json" 2>&1 | tail -12
section done
