#!/usr/bin/env bash
# session 8, call 2 (nvidia-h200): fa3 defaults now 3 consumer warpgroups + swizzled K/V at both
# head dims, and 112-key tiles as an option (MV_FA3_BN=112: 784 = 7 x 112): test_fa3 (every
# option), attnbench, then the tower vs HF at every size with --attention auto.
set -u
source scripts/device-env.sh
timeout 200 $BIN/test_fa3 >"$OUT/fa3.log" 2>&1; echo "test_fa3 exit $?: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
grep -E "^not ok|^# diag|Bail" "$OUT/fa3.log" | cut -c1-220 | head -12
timeout 260 $BIN/attnbench --iters 20 >"$OUT/fa3_bench.jsonl" 2>&1; echo "attnbench exit $?"
grep -v '^{' "$OUT/fa3_bench.jsonl" | grep -vE "builtin_v1|fa3_v1"
grep -E '"attn_agree"' "$OUT/fa3_bench.jsonl" | grep -v "e-0[45]" | cut -c1-160 | head
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
timeout 300 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 \
    --sizes 64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032 --attention auto \
    --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -12
