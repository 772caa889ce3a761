#!/usr/bin/env bash
# session 8, call 5 (nvidia-h200): the final fa3 defaults (3 warpgroups, swizzled K/V, keys per
# tile by segment length, persistent grid, idle warpgroups skip their products): test_fa3,
# test_cuda_ops, attnbench, memcheck + racecheck, the tower vs HF at every size.
set -u
source scripts/device-env.sh
timeout 150 $BIN/test_fa3 >"$OUT/fa3.log" 2>&1; echo "test_fa3 exit $?: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
timeout 150 $BIN/test_cuda_ops >"$OUT/tests.log" 2>&1; echo "test_cuda_ops exit $?: $(grep -c '^ok' "$OUT/tests.log") ok, $(grep -c '^not ok' "$OUT/tests.log") not ok"
grep -E "^not ok|Bail" "$OUT/fa3.log" "$OUT/tests.log" | cut -c1-220 | head -6
timeout 120 $BIN/attnbench --iters 12 >"$OUT/fa3_bench.jsonl" 2>&1; echo "attnbench exit $?"
grep -v '^{' "$OUT/fa3_bench.jsonl" | grep -vE "builtin_v1|fa3_v1|builtin_v2|fa3_wg2|nosw"
grep -E '"attn_agree"' "$OUT/fa3_bench.jsonl" | grep -v "e-0[45]" | cut -c1-160 | head -4
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
for t in memcheck racecheck; do
    timeout 90 $cs --tool $t --error-exitcode 9 $BIN/test_fa3 --quick >"$OUT/san_$t.log" 2>&1
    echo "$t exit $?: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/san_$t.log")"
done
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
timeout 200 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 \
    --sizes 64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032 --attention auto \
    --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -11
