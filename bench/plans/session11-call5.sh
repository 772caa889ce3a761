#!/usr/bin/env bash
# session 11, call 5 (nvidia-h200): the landed build (DEFAULT_BATCH_TOKENS 32768, fa3's SM-count
# helper): test_cuda_ops, test_fa3 --quick, parity with fa3, and the tower vs HF with the
# default workspace (no --batch-tokens).
set -u
source scripts/device-env.sh
timeout 150 $BIN/test_cuda_ops >"$OUT/tests.log" 2>&1; echo "test_cuda_ops exit $?: $(grep -c '^ok' "$OUT/tests.log") ok, $(grep -c '^not ok' "$OUT/tests.log") not ok"
grep -E "^not ok" "$OUT/tests.log" | cut -c1-200 | head -5
timeout 100 $BIN/test_fa3 --quick >"$OUT/fa3.log" 2>&1; echo "test_fa3 --quick exit $?: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
S=64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032
timeout 200 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 --sizes $S \
    --attention auto --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -11
PARITY_FA3=1 timeout 200 bash scripts/device-run.sh parity 2>&1 | grep -E "^(PASS|FAIL)" | head -14
