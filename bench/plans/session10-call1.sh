#!/usr/bin/env bash
# session 10, call 1 (nvidia-h200): fa3 with the last wave's work items split over their keys
# (mv_cuda_fa3_split; one 2048² image: 16 x 86 items of 192 rows on 132 SMs = 10 waves + 56):
# test_fa3 (all; split pieces forced on every mix), memcheck + racecheck, test_cuda_ops (the
# tower's call changed), attnbench (new shape 1 x 16384: fa3 vs fa3_nosplit vs cuDNN), the tower
# vs HF on every size, and 2048² without the split (MV_FA3_SPLIT=0) beside the default.
set -u
source scripts/device-env.sh
timeout 120 $BIN/test_fa3 >"$OUT/fa3.log" 2>&1; echo "test_fa3 exit $?: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
grep -E "^not ok" "$OUT/fa3.log" | cut -c1-220 | head -6
grep -E "^ok .*split 56|^ok .*split policy" "$OUT/fa3.log" | cut -c1-200 | head -3
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
for t in memcheck racecheck; do
    timeout 90 $cs --tool $t --error-exitcode 9 $BIN/test_fa3 --quick >"$OUT/san_$t.log" 2>&1
    echo "$t exit $?: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/san_$t.log")"
done
timeout 150 $BIN/test_cuda_ops >"$OUT/tests.log" 2>&1; echo "test_cuda_ops exit $?: $(grep -c '^ok' "$OUT/tests.log") ok, $(grep -c '^not ok' "$OUT/tests.log") not ok"
grep -E "^not ok" "$OUT/tests.log" | cut -c1-200 | head -5
for i in 1 2; do
    timeout 80 $BIN/attnbench --iters 20 --only cudnn,fa3,fa3_nosplit >"$OUT/ab$i.log" 2>&1; echo "== attnbench $i exit $?"
    grep -E "^(cudnn|fa3|fa3_nosplit) " "$OUT/ab$i.log" | awk '{printf "%s %s %s %s | ", $1, $2, $3, $5} END {print ""}'
    grep attn_agree "$OUT/ab$i.log" | grep fa3 | sed 's/.*"D": \([0-9]*\), "segments": "\([0-9x]*\)".*fa3_vs_builtin": \([0-9.e-]*\).*/\1 \2 \3/' | tr '\n' ';'; echo
done
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
S=64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032
timeout 200 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 --sizes $S \
    --attention auto --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -11
for sp in 0 "" 0 ""; do
    MV_FA3_SPLIT=$sp timeout 40 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 5 \
        --sizes 1x2048x2048 --attention auto --no-hf 2>&1 | grep -E "mvembed" | sed "s/^/split[${sp:-auto}] /"
done
