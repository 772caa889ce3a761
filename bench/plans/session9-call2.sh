#!/usr/bin/env bash
# session 9, call 2 (nvidia-h200): fa3 with each row's sum of P from the tensor cores (FA3_TSUM=1,
# the new default: not at D 72 x 128 keys where it spills), against the FADDs (tsum0) and the
# tensor sums everywhere (tsum2): test_fa3 (all) on the default, --quick on the variants,
# memcheck + racecheck; attnbench interleaved; the tower vs HF (default) and tsum0 without HF.
set -u
source scripts/device-env.sh
timeout 100 $BIN/test_fa3 >"$OUT/fa3.log" 2>&1; echo "test_fa3 exit $?: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
grep -E "^not ok" "$OUT/fa3.log" | cut -c1-200 | head -4
for v in tsum0 tsum2; do
    timeout 60 $BIN/test_fa3-$v --quick >"$OUT/fa3_$v.log" 2>&1
    echo "test_fa3-$v --quick exit $?: $(grep -c '^ok' "$OUT/fa3_$v.log") ok, $(grep -c '^not ok' "$OUT/fa3_$v.log") not ok"
done
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
for t in memcheck racecheck; do
    timeout 80 $cs --tool $t --error-exitcode 9 $BIN/test_fa3 --quick >"$OUT/san_$t.log" 2>&1
    echo "$t exit $?: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/san_$t.log")"
done
for v in "" -tsum0 -tsum2 "" -tsum0; do
    timeout 70 $BIN/attnbench$v --iters 20 --only cudnn,fa3 >"$OUT/ab.log" 2>&1; rc=$?
    echo "== attnbench${v:-} exit $rc"
    grep -E "^(cudnn|fa3) " "$OUT/ab.log" | awk '{printf "%s %s %s %s | ", $1, $2, $3, $5} END {print ""}'
    grep attn_agree "$OUT/ab.log" | grep fa3 | sed 's/.*"D": \([0-9]*\), "segments": "\([0-9x]*\)".*fa3_vs_builtin": \([0-9.e-]*\).*/\1 \2 \3/' | tr '\n' ';'; echo
done
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
S=64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032
timeout 200 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 --sizes $S \
    --attention auto --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -11
timeout 60 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower-tsum0 --iters 3 \
    --sizes $S --attention auto --no-hf 2>&1 | grep -E "mvembed" | sed 's/^/tsum0 /'
timeout 60 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 \
    --sizes 1x2048x2048,1x3024x4032 --attention auto --no-hf 2>&1 | grep -E "mvembed" | sed 's/^/again /'
