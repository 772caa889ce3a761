#!/usr/bin/env bash
# session 6, call 5 (nvidia-h200): after the fa3 versions share their softmax / store helpers:
# test_fa3 (probes + twins), racecheck on --quick, attnbench.
set -u
source scripts/device-env.sh
timeout 150 $BIN/test_fa3 >"$OUT/fa3.log" 2>&1; echo "test_fa3 exit $?"
grep -E "^not ok|^# diag|Bail" "$OUT/fa3.log" | head -20
echo "fa3 tests: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 $BIN/test_fa3 --quick >"$OUT/san_racecheck.log" 2>&1
echo "racecheck exit $?"; grep -E "RACECHECK SUMMARY" "$OUT/san_racecheck.log"
timeout 150 $BIN/attnbench --iters 10 >"$OUT/fa3_bench.jsonl" 2>>"$OUT/fa3.log"; echo "attnbench exit $?"
grep -v '^{' "$OUT/fa3_bench.jsonl" | grep -E "impl|cudnn|fa3 " | head -24
