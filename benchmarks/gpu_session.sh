#!/usr/bin/env bash
# Every check that needs a CUDA GPU, as one script (run from the repository root; results in $OUT):
#   1. the Triton LSSA/LSSAR kernels against their PyTorch references on CUDA (tests/test_kernels.py with
#      ORBITLAW_TEST_CUDA=1: every poly share, and the gpu-marked 16k-token bf16 test);
#   2. the attention benchmark (benchmarks/attention.py --device cuda): Triton LSSA/LSSAR against SDPA flash,
#      fwd+bwd, bf16, D = 64 and 128, T = 4k and 16k, causal, peak memory; then D = 64 at poly shares 1/2 and 1
#      (the share of each tile's exp and reciprocal on the FMA pipes; benchmarks/kernel_cost.py predicts them);
#   3. `orbitlaw train` end to end on CUDA under torchrun (NCCL): bf16 autocast, torch.compile, the fused
#      LSSAR kernel, a checkpoint, --resume, then `orbitlaw evaluate --lengths` on the rope model;
#   4. 50 compiled training steps of the reference gpt-109m, softmax and LSSAR (tokens/s, peak memory), bf16.
# Each step has its own timeout: sections 1 and 2 fit one 10-minute device call (550 s at most), 3 and 4 another.
# Only torch, triton, numpy, numba, safetensors and tqdm are needed (no install: PYTHONPATH=.).
#     OUT=/tmp/gpu bash benchmarks/gpu_session.sh [--dry-run] [SECTION ...]     # default: 1 2 3 4
# --dry-run (no GPU needed) runs nothing: it prints each command and checks that every script exists, imports
# and accepts every flag given to it (its --help), and that the pytest selection collects tests.
set -u
OUT=${OUT:-/tmp/orbitlaw-gpu}
DRY=0
SECTIONS=()
for a in "$@"; do
    case "$a" in
        --dry-run) DRY=1 ;;
        1|2|3|4) SECTIONS+=("$a") ;;
        *) echo "gpu_session.sh: unknown argument $a (use --dry-run and section numbers 1-4)" >&2; exit 2 ;;
    esac
done
[ ${#SECTIONS[@]} -eq 0 ] && SECTIONS=(1 2 3 4)
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
ORBITLAW=("$PY" -c 'import sys; from orbitlaw.cli import main; sys.argv[0] = "orbitlaw"; sys.exit(main())')
FAILED=0
section() { echo; echo "=== $* ($(date +%T))"; }
want() { [[ " ${SECTIONS[*]} " == *" $1 "* ]]; }

# check_flags HELP_TEXT ARGS...: every --flag among ARGS appears in HELP_TEXT
check_flags() {
    local help=$1; shift
    for arg in "$@"; do
        case "$arg" in
            --*=*) arg=${arg%%=*} ;;
        esac
        if [[ "$arg" == --* ]] && ! grep -qE -- "(^|[^a-z-])$arg([^a-z-]|\$)" <<<"$help"; then
            echo "  dry-run: flag $arg is not accepted"; FAILED=1
        fi
    done
}

# step LOG TIMEOUT CMD...: run CMD under TIMEOUT seconds, its output in $OUT/LOG (tail shown); dry-run: check it
step() {
    local log=$1 limit=$2; shift 2
    echo "+ $*"
    if [ "$DRY" = 1 ]; then
        local help=""
        if [ "$1" = "$PY" ] && [[ "${2:-}" == *.py ]]; then
            [ -f "$2" ] || { echo "  dry-run: $2 is missing"; FAILED=1; return; }
            help=$("$PY" "$2" --help 2>&1) || { echo "  dry-run: $2 --help failed: $help"; FAILED=1; return; }
            check_flags "$help" "${@:3}"
        elif [ "$1" = "$PY" ] && [ "${2:-}" = "-m" ] && [ "${3:-}" = "pytest" ]; then
            "$PY" -m pytest --collect-only -q -p no:cacheprovider "${@:4}" > "$OUT/$log.collect" 2>&1 \
                || { echo "  dry-run: pytest collection failed ($OUT/$log.collect)"; FAILED=1; return; }
            echo "  dry-run: $(awk -F': ' '/^tests\/.*: [0-9]+$/ {n += $2} END {print n + 0}' "$OUT/$log.collect") tests collected"
        elif [ "$1" = orbitlaw ] || [ "$1" = torchrun ]; then
            local cmd=$2
            help=$("${ORBITLAW[@]}" "$cmd" --help 2>&1) || { echo "  dry-run: orbitlaw $cmd --help failed"; FAILED=1; return; }
            check_flags "$help" "${@:3}"
        fi
        return
    fi
    case "$1" in
        orbitlaw) shift; timeout "$limit" "${ORBITLAW[@]}" "$@" > "$OUT/$log" 2>&1 ;;
        torchrun) shift; timeout "$limit" "$PY" -m torch.distributed.run --nproc_per_node 1 -m orbitlaw.cli "$@" \
                      > "$OUT/$log" 2>&1 ;;
        *) timeout "$limit" "$@" > "$OUT/$log" 2>&1 ;;
    esac
    local rc=$?
    tail -30 "$OUT/$log"
    [ $rc -eq 0 ] || { echo "  exit $rc (log: $OUT/$log)"; FAILED=1; }
}

section machine
if [ "$DRY" = 0 ]; then
    "$PY" - "$OUT/machine.json" <<'EOF'
import json, subprocess, sys
import torch, triton
smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip()
info = {"nvidia_smi": smi, "torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton.__version__,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
json.dump(info, open(sys.argv[1], "w"), indent=1)
print(info)
EOF
fi

if want 1; then
    section "1. kernels vs references on CUDA (every poly share)"
    ORBITLAW_TEST_CUDA=1 step kernels_cuda.log 150 "$PY" -m pytest -q -p no:cacheprovider -m "not slow" -rf \
        tests/test_kernels.py tests/test_fma_math.py
fi

if want 2; then
    # each share is autotuned apart (12-15 tile configs per kernel, a few seconds of compiling each), so the
    # shares run at D = 64 only; "auto" (tiles x shares) would compile three times as many and is left out
    section "2. attention benchmark (share 0), then at poly shares 1/2 and 1"
    step attention_cuda.log 200 "$PY" benchmarks/attention.py --device cuda --seq-lens 4096 16384 --head-dims 64 128 \
        --methods sdpa_softmax lssa_triton lssar_triton --rep-ms 40 --no-correctness \
        --out "$OUT/attention_cuda.json" --plot "$OUT/attention_cuda.png"
    step attention_poly_cuda.log 200 "$PY" benchmarks/attention.py --device cuda --seq-lens 4096 16384 \
        --head-dims 64 --methods sdpa_softmax --poly-shares 0.5 1 --rep-ms 40 --no-correctness \
        --out "$OUT/attention_poly_cuda.json"
fi

if want 3; then
    section "3. orbitlaw train / resume / evaluate on CUDA (torchrun, bf16, compile, lssar)"
    W=/tmp/orbitlaw-e2e
    [ "$DRY" = 0 ] && rm -rf "$W"
    step e2e_simulate.log 60 orbitlaw simulate --preset vafa2025 --splits train=512,val=64 --seed 0 --out "$W/data" \
        --workers 8
    step e2e_train.log 120 torchrun train --data "$W/data" --preset small --attention lssar --pos rope --compile \
        --batch-size 32 --max-steps 40 --checkpoint-every 20 --eval-every 20 --log-every 10 --warmup-steps 5 \
        --lr 6e-4 --out "$W/run" --quiet
    step e2e_resume.log 70 torchrun train --data "$W/data" --preset small --attention lssar --pos rope --compile \
        --batch-size 32 --max-steps 60 --checkpoint-every 20 --eval-every 20 --log-every 10 --warmup-steps 5 \
        --lr 6e-4 --out "$W/run" --resume --quiet
    step e2e_evaluate.log 50 orbitlaw evaluate --run "$W/run" --data "$W/data" --sequences 64 --lengths 1,2,4,8,16
    if [ "$DRY" = 0 ]; then
        cp "$W/run/metrics.jsonl" "$OUT/e2e_metrics.jsonl" 2>/dev/null
        cp "$W/run/eval.json" "$OUT/e2e_eval.json" 2>/dev/null
    fi
fi

if want 4; then
    section "4. gpt-109m: 50 compiled training steps, softmax and LSSAR (bf16)"
    step train_throughput.log 170 "$PY" benchmarks/train_throughput.py --device cuda --preset gpt-109m \
        --batch-size 16 --steps 50 --warmup 3 --attentions softmax,lssar --compile softmax,lssar --out "$OUT/train_throughput_cuda.json"
fi

section "done (failed: $FAILED)"
exit $FAILED
