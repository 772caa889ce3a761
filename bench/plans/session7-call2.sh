#!/usr/bin/env bash
# session 7, call 2 (nvidia-h200): fa3 versions 3 (K/V in 32-byte-swizzled TMA boxes) and 4 (+ Q
# in registers): layout probes + twins (test_fa3), attnbench (all versions beside cuDNN), then the
# tower vs HF (bench_tower.py: pinned host buffers now) with cudnn and fa3 at every size.
set -u
source scripts/device-env.sh
timeout 150 $BIN/test_fa3 >"$OUT/fa3.log" 2>&1; echo "test_fa3 exit $?"
echo "fa3 tests: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
grep -E "^not ok|^# diag|Bail" "$OUT/fa3.log" | cut -c1-230 | head -24
timeout 200 $BIN/attnbench --iters 20 >"$OUT/fa3_bench.jsonl" 2>&1; echo "attnbench exit $?"
grep -v '^{' "$OUT/fa3_bench.jsonl" | grep -vE "builtin_v1"
grep -E '"attn_agree"|"error"' "$OUT/fa3_bench.jsonl" | cut -c1-200 | head -20
V=4
for v in 4 3; do
  if grep -E "^not ok" "$OUT/fa3.log" | grep -q "fa3 v$v "; then V=$((v-1)); fi
done
echo "tower bench with MV_FA3_VERSION=$V"
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
MV_FA3_VERSION=$V timeout 330 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 \
    --sizes 64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032 --attention cudnn,fa3 \
    --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -16
