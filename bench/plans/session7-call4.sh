#!/usr/bin/env bash
# session 7, call 4 (nvidia-h200): final defaults (fa3 at head dim 72 everywhere, its layout and Q
# placement by head dim; LayerNorm rows in registers): twins, tower vs HF at every size, the CPU
# tower on 16 cores (f32 and AMX bf16x6) vs HF f32, parity with auto attention.
set -u
source scripts/device-env.sh
timeout 120 $BIN/test_fa3 >"$OUT/fa3.log" 2>&1; echo "test_fa3 exit $?: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
timeout 200 $BIN/test_cuda_ops >"$OUT/tests.log" 2>&1; echo "test_cuda_ops exit $?: $(grep -c '^ok' "$OUT/tests.log") ok, $(grep -c '^not ok' "$OUT/tests.log") not ok"
grep -E "^not ok" "$OUT/tests.log" "$OUT/fa3.log" | cut -c1-200 | head -5
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
timeout 300 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 \
    --sizes 64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032 --attention auto,cudnn \
    --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -16
lscpu | grep -iE "model name|^CPU\(s\)" | head -2
OMP_PROC_BIND=false THREADS=16 SIZES="4x448x448;1x1024x1024" DEPTH=27 ITERS=2 CPU_GEMM="f32 bf16x6" \
    CPUBENCH=$BIN/cpubench OUT=$OUT timeout 330 bash scripts/bench-cpu.sh 2>&1 | tail -8
PARITY_FA3=1 timeout 150 bash scripts/device-run.sh parity 2>&1 | grep -E "^(PASS|FAIL)" | head -12
