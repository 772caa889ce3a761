#!/usr/bin/env bash
# session 6, call 1 (nvidia-h200): fa3 layout probes + twin tests; sanitizers only when the
# twins pass; attnbench (fa3 beside builtin and cuDNN) either way.
set -u
source scripts/device-env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee "$OUT/fa3.log"
timeout 150 $BIN/test_fa3 >>"$OUT/fa3.log" 2>&1; echo "test_fa3 exit $?" | tee -a "$OUT/fa3.log"
grep -E "^not ok|^# diag|^1\.\.|Bail" "$OUT/fa3.log" | head -40
grep -E "^ok" "$OUT/fa3.log" | head -8
nok=$(grep -c '^not ok' "$OUT/fa3.log"); echo "fa3 tests: $(grep -c '^ok' "$OUT/fa3.log") ok, $nok not ok"
if [ "$nok" = 0 ] && grep -q '^ok' "$OUT/fa3.log"; then
    CS=/usr/local/cuda/bin/compute-sanitizer
    for tool in memcheck racecheck; do
        timeout 100 $CS --tool $tool --error-exitcode 9 $BIN/test_fa3 --quick >"$OUT/san_$tool.log" 2>&1
        echo "== $tool exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/san_$tool.log"
    done
fi
timeout 200 $BIN/attnbench --iters 10 >"$OUT/fa3_bench.jsonl" 2>>"$OUT/fa3.log"; echo "attnbench exit $?"
grep -v '^{' "$OUT/fa3_bench.jsonl" | head -30
grep -E '"attn_agree"|"error"' "$OUT/fa3_bench.jsonl" | head -20
