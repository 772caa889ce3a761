#!/usr/bin/env bash
# session 9, call 3 (nvidia-h200): the CPU tower on 16 threads after this session's changes (GEMM
# workspace kept, bf16x6 attention on AMX, the row chain in 128-row chunks): attention alone in
# both modes, then scripts/bench-cpu.sh (f32 and bf16x6 beside HF f32, 27 blocks); test_cuda_ops
# (the CPU twins changed); the tower vs HF once more (the fa3 kernel of the eighth session).
set -u
source scripts/device-env.sh
t=/tmp/mv/tower-27b-d4
python3 scripts/make_random_tower.py $t --config 27b --depth 4 >/dev/null 2>&1 || echo "make_random_tower failed"
G="1,28,28;1,28,28;1,28,28;1,28,28"
for mode in f32 bf16x6; do
    echo "attn $mode -j 16: $(OMP_PROC_BIND=false timeout 40 $BIN/cpubench --model $t --grid "$G" -j 16 --iters 5 --what attn --cpu-gemm $mode 2>&1 | grep -E '^attn(_min|_lib)? ' | tr '\n' ' ')"
done
OMP_PROC_BIND=false THREADS=16 SIZES="4x448x448;1x1024x1024" DEPTH=27 ITERS=2 CPU_GEMM="f32 bf16x6" \
    CPUBENCH=$BIN/cpubench OUT=$OUT timeout 300 bash scripts/bench-cpu.sh 2>&1 | grep -E "^\||bench-cpu:"
timeout 150 $BIN/test_cuda_ops >"$OUT/tests.log" 2>&1; echo "test_cuda_ops exit $?: $(grep -c '^ok' "$OUT/tests.log") ok, $(grep -c '^not ok' "$OUT/tests.log") not ok"
grep -E "^not ok" "$OUT/tests.log" | cut -c1-200 | head -5
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
S=64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032
timeout 150 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 --sizes $S \
    --attention auto --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -11
