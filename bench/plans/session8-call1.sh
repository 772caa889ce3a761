#!/usr/bin/env bash
# session 8, call 1 (nvidia-h200): fa3 version 2 with 3 consumer warpgroups (MV_FA3_WG=3: 192
# query rows per CTA, FlashAttention-3's choice at head dim 64) beside 2: test_fa3 (every option,
# both counts), attnbench, memcheck + racecheck, and the tower with --attention auto for 2 and 3
# without HF (its stderr line also checks session 7's last, untested, choose_attention change).
set -u
source scripts/device-env.sh
timeout 180 $BIN/test_fa3 >"$OUT/fa3.log" 2>&1; echo "test_fa3 exit $?: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
grep -E "^not ok|^# diag|Bail" "$OUT/fa3.log" | cut -c1-220 | head -12
timeout 280 $BIN/attnbench --iters 20 >"$OUT/fa3_bench.jsonl" 2>&1; echo "attnbench exit $?"
grep -v '^{' "$OUT/fa3_bench.jsonl" | grep -vE "builtin_v1|fa3_v1"
grep -E '"attn_agree"' "$OUT/fa3_bench.jsonl" | grep -v "e-0[45]" | cut -c1-160 | head
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
for t in memcheck racecheck; do
    timeout 100 $cs --tool $t --error-exitcode 9 $BIN/test_fa3 --quick >"$OUT/san_$t.log" 2>&1
    echo "$t exit $?: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/san_$t.log")"
done
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
for wg in 2 3; do
    MV_FA3_WG=$wg timeout 150 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 \
        --sizes 64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032 --attention auto --no-hf \
        --json "$OUT/tower_wg$wg.json" >"$OUT/tower_wg$wg.log" 2>&1
    echo "wg $wg exit $?"; grep -vE "^\s*$" "$OUT/tower_wg$wg.log" | tail -7
done
grep -m1 "attention:" "$OUT/tower_wg2.log"
