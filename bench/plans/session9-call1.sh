#!/usr/bin/env bash
# session 9, call 1 (nvidia-h200): test_cuda_ops on the eighth session's kernel (not rerun there
# after call 5), then fa3 build variants (scripts/device-bundle.sh FA3_VARIANTS): some of the
# exponentials on the FMA pipe (emu1: 1 of 4 key groups, emu2: 2 of 4) and three K/V stages
# (st3): test_fa3 --quick each, attnbench cudnn + default fa3 row, base and variants interleaved.
set -u
source scripts/device-env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
timeout 150 $BIN/test_cuda_ops >"$OUT/tests.log" 2>&1; echo "test_cuda_ops exit $?: $(grep -c '^ok' "$OUT/tests.log") ok, $(grep -c '^not ok' "$OUT/tests.log") not ok"
grep -E "^not ok" "$OUT/tests.log" | cut -c1-200 | head -5
for v in emu1 emu2 st3; do
    timeout 60 $BIN/test_fa3-$v --quick >"$OUT/fa3_$v.log" 2>&1
    echo "test_fa3-$v --quick exit $?: $(grep -c '^ok' "$OUT/fa3_$v.log") ok, $(grep -c '^not ok' "$OUT/fa3_$v.log") not ok"
done
for v in "" -emu1 -emu2 -st3 "" -emu1; do
    timeout 70 $BIN/attnbench$v --iters 20 --only cudnn,fa3 >"$OUT/ab.log" 2>&1; rc=$?
    echo "== attnbench${v:-} exit $rc $(grep -c '"nonfinite": 0' "$OUT/ab.log") agree-lines"
    grep -E "^(cudnn|fa3) " "$OUT/ab.log" | awk '{printf "%s %s %s %s | ", $1, $2, $3, $5} END {print ""}'
    grep attn_agree "$OUT/ab.log" | grep fa3 | sed 's/.*"D": \([0-9]*\), "segments": "\([0-9x]*\)".*fa3_vs_builtin": \([0-9.e-]*\).*/\1 \2 \3/' | tr '\n' ';'; echo
done
