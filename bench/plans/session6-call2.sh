#!/usr/bin/env bash
# session 6, call 2 (nvidia-h200-x2): fa3 v2 probes + twins (+ sanitizers when they pass),
# attnbench; then the photo half of issue 11's e2e (HF loop, tower alone, --devices 0 and 0,1).
set -u
source scripts/device-env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee "$OUT/fa3.log"
timeout 150 $BIN/test_fa3 >>"$OUT/fa3.log" 2>&1; echo "test_fa3 exit $?" | tee -a "$OUT/fa3.log"
grep -E "^not ok|^# diag|^1\.\.|Bail" "$OUT/fa3.log" | head -30
nok=$(grep -c '^not ok' "$OUT/fa3.log"); echo "fa3 tests: $(grep -c '^ok' "$OUT/fa3.log") ok, $nok not ok"
if [ "$nok" = 0 ] && grep -q '^ok' "$OUT/fa3.log"; then
    CS=/usr/local/cuda/bin/compute-sanitizer
    for tool in memcheck racecheck; do
        timeout 60 $CS --tool $tool --error-exitcode 9 $BIN/test_fa3 --quick >"$OUT/san_$tool.log" 2>&1
        echo "== $tool exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/san_$tool.log"
    done
fi
timeout 150 $BIN/attnbench --iters 10 >"$OUT/fa3_bench.jsonl" 2>>"$OUT/fa3.log"; echo "attnbench exit $?"
grep -v '^{' "$OUT/fa3_bench.jsonl" | grep -v builtin_v1 | head -40
grep -E '"attn_agree"' "$OUT/fa3_bench.jsonl" | grep fa3 | cut -c1-120
grep -E '"error"' "$OUT/fa3_bench.jsonl" | head
E2E_STEPS="3 4" E2E_PHOTOS=2000 E2E_DEVICES="0 0,1" E2E_OUT=/dev/shm E2E_TOWER=1 timeout 380 bash scripts/device-e2e.sh >/dev/null 2>&1
echo "e2e exit $?"; cat "$OUT/e2e.log"
