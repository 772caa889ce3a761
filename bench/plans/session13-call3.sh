#!/usr/bin/env bash
# session 13, call 3 (nvidia-h200, chained after call 2): issue 13's kernel-side evidence again in
# this session, on the landed kernel: attnbench on every shape (fa3, cuDNN, builtin, both head dims)
# beside PyTorch's sdpa backends (FlashAttention-2, cuDNN) in the same call, test_fa3 (every
# segment mix), memcheck + racecheck on test_fa3 --quick, then parity with fa3 while time is left.
set -u
source scripts/device-env.sh
T0=$(date +%s)
timeout 150 $BIN/attnbench --iters 10 >"$OUT/attn.jsonl" 2>"$OUT/attn.log"; echo "attnbench exit $?"
timeout 120 python3 scripts/bench_attn_torch.py --iters 10 >>"$OUT/attn.jsonl" 2>>"$OUT/attn.log"; echo "torch exit $?"
grep -v '^{' "$OUT/attn.jsonl" | head -40
grep -E '"attn_agree"|"error"' "$OUT/attn.jsonl" | cut -c1-200 | head -12
timeout 150 $BIN/test_fa3 >"$OUT/fa3.log" 2>&1
echo "test_fa3 exit $?: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
grep -E "^not ok" "$OUT/fa3.log" | cut -c1-220 | head -6
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
for t in memcheck racecheck; do
    timeout 100 $cs --tool $t --error-exitcode 9 $BIN/test_fa3 --quick >"$OUT/san_$t.log" 2>&1
    echo "$t exit $?: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/san_$t.log")"
done
echo "elapsed $(( $(date +%s) - T0 )) s"
left=$(( 570 - ($(date +%s) - T0) ))
[ $left -gt 60 ] && PARITY_FA3=1 timeout $left scripts/device-run.sh parity 2>&1 | tail -24
