#!/usr/bin/env bash
# session 7, call 3 (nvidia-h200): fa3 version 2 with the softmax instruction diet (ex2.ftz, one
# scale per row max, O rescale skipped when no max moved) and the layout / Q-placement knobs:
# test_fa3 (every combination), attnbench, memcheck + racecheck on the default, parity with fa3,
# test_cuda_ops, then the tower vs HF at every size.
set -u
source scripts/device-env.sh
timeout 150 $BIN/test_fa3 >"$OUT/fa3.log" 2>&1; echo "test_fa3 exit $?"
echo "fa3 tests: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
grep -E "^not ok|^# diag|Bail" "$OUT/fa3.log" | cut -c1-200 | head -12
timeout 200 $BIN/attnbench --iters 20 >"$OUT/fa3_bench.jsonl" 2>&1; echo "attnbench exit $?"
grep -v '^{' "$OUT/fa3_bench.jsonl" | grep -vE "builtin_v1|fa3_v1"
grep -E '"attn_agree"' "$OUT/fa3_bench.jsonl" | grep -v "e-0[45]" | cut -c1-160 | head
SAN_TIMEOUT=80 bash -c 'source scripts/device-env.sh; cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer); for t in memcheck racecheck; do timeout 80 $cs --tool $t --error-exitcode 9 $BIN/test_fa3 --quick > '"$OUT"'/san_$t.log 2>&1; echo "$t exit $?: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" '"$OUT"'/san_$t.log)"; done'
timeout 200 $BIN/test_cuda_ops >"$OUT/tests.log" 2>&1; echo "test_cuda_ops exit $?: $(grep -c '^ok' "$OUT/tests.log") ok, $(grep -c '^not ok' "$OUT/tests.log") not ok"
grep -E "^not ok" "$OUT/tests.log" | cut -c1-200 | head -5
PARITY_FA3=1 timeout 240 bash scripts/device-run.sh parity 2>&1 | grep -E "PASS|FAIL|output|bf16_fa3" | head -24
m=/tmp/mv/model_27b
timeout 330 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 \
    --sizes 64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032 --attention cudnn,fa3,auto \
    --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -20
