#!/usr/bin/env bash
# session 6, call 4 (nvidia-h200): kernel twins with auto's per-chunk fa3 choice, parity with the
# fa3 kernel beside the others, the tower with auto attention on the large sizes (no HF: call 3).
set -u
source scripts/device-env.sh
timeout 170 $BIN/test_cuda_ops >"$OUT/tests.log" 2>&1; echo "test_cuda_ops exit $?"
grep -E "^not ok|Bail" "$OUT/tests.log" | head -20
echo "tests: $(grep -c '^ok' "$OUT/tests.log") ok, $(grep -c '^not ok' "$OUT/tests.log") not ok"
grep -iE "fa3" "$OUT/tests.log" | head -8 | cut -c1-200
PARITY_FA3=1 timeout 300 bash scripts/device-run.sh parity 2>&1 | tail -40
timeout 110 python3 scripts/bench_tower.py bench --model /tmp/mv/model_27b --mvtower $BIN/mvtower --iters 3 \
    --sizes 4x1088x1920,1x2048x2048,1x3024x4032 --attention auto,cudnn --no-hf 2>&1 | grep -vE "^\s*$" | tail -8
