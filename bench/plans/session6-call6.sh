#!/usr/bin/env bash
# session 6, call 6 (nvidia-h200), after the review: fa3 twins, all kernel twins (auto's per-chunk
# choice now from fa3_min_rows), the tower with auto attention on a 2048² image (-v says which
# attention), device-e2e.sh step 1 (its environment now from scripts/device-env.sh).
set -u
source scripts/device-env.sh
timeout 120 $BIN/test_fa3 >"$OUT/fa3.log" 2>&1; echo "test_fa3 exit $?"
echo "fa3 tests: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
timeout 170 $BIN/test_cuda_ops >"$OUT/tests.log" 2>&1; echo "test_cuda_ops exit $?"
grep -E "^not ok|Bail" "$OUT/tests.log" | head -20
echo "tests: $(grep -c '^ok' "$OUT/tests.log") ok, $(grep -c '^not ok' "$OUT/tests.log") not ok"
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
python3 scripts/bench_tower.py pixels --grid "1,128,128" --seed 3 --out /tmp/mv/pix.npy
timeout 60 $BIN/mvtower run --model $m --pixels /tmp/mv/pix.npy --grid "1,128,128" --precision bf16 \
    --attention auto --out /tmp/mv/auto2048 2>&1 | grep -iE "attention|error" | head -4
E2E_STEPS="1" timeout 120 bash scripts/device-e2e.sh >/dev/null 2>&1; echo "e2e exit $?"; tail -3 "$OUT/e2e.log"
