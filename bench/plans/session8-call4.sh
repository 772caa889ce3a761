#!/usr/bin/env bash
# session 8, call 4 (nvidia-h200): fa3 keys per tile by segment length (112 or 128,
# mv_cuda_fa3_keys) and the persistent grid option (MV_FA3_PERSIST=1): test_fa3, attnbench,
# memcheck + racecheck, tower vs HF (auto) and the persistent tower without HF; then the AMX
# bf16x6 GEMMs by M block (-DAMX_MT=16 default / 8 / 4) and threads beside f32.
set -u
source scripts/device-env.sh
timeout 200 $BIN/test_fa3 >"$OUT/fa3.log" 2>&1; echo "test_fa3 exit $?: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
grep -E "^not ok|^# diag|Bail" "$OUT/fa3.log" | cut -c1-220 | head -8
timeout 200 $BIN/attnbench --iters 20 >"$OUT/fa3_bench.jsonl" 2>&1; echo "attnbench exit $?"
grep -v '^{' "$OUT/fa3_bench.jsonl" | grep -vE "builtin_v1|fa3_v1|builtin_v2"
grep -E '"attn_agree"' "$OUT/fa3_bench.jsonl" | grep -v "e-0[45]" | cut -c1-160 | head -4
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
for t in memcheck racecheck; do
    timeout 100 $cs --tool $t --error-exitcode 9 $BIN/test_fa3 --quick >"$OUT/san_$t.log" 2>&1
    echo "$t exit $?: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/san_$t.log")"
done
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
S=64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032
timeout 200 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 --sizes $S \
    --attention auto --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -11
MV_FA3_PERSIST=1 timeout 60 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 \
    --sizes $S --attention auto --no-hf 2>&1 | grep -E "mvembed" | sed 's/^/persist /'
t=/tmp/mv/tower-27b-d8
python3 scripts/make_random_tower.py $t --config 27b --depth 8 >/dev/null 2>&1 || echo "make_random_tower failed"
G="1,28,28;1,28,28;1,28,28;1,28,28"
for j in 16 8 1; do
    for v in "" -mt8 -mt4; do
        [ "$j" = 1 ] && [ -n "$v" ] && continue
        echo "bf16x6 MT${v:-16} -j $j: $(OMP_PROC_BIND=false timeout 50 $BIN/cpubench$v --model $t --grid "$G" -j $j --iters 3 --what gemm --cpu-gemm bf16x6 2>&1 | grep -E '^gemm(_min)? ' | tr '\n' ' ')"
    done
    echo "f32 -j $j: $(OMP_PROC_BIND=false timeout 50 $BIN/cpubench --model $t --grid "$G" -j $j --iters 3 --what gemm --cpu-gemm f32 2>&1 | grep -E '^gemm(_min)? ' | tr '\n' ' ')"
done
