#!/usr/bin/env bash
# session 13, call 5 (nvidia-h200): --attention auto now runs fa3 at head dim 64 too (call 4).
# test_cuda_ops (new: auto = fa3 bit for bit at D 72 and 64, fa3's tower vs the CPU's), what auto
# says it runs on the 2B layout, and the 2B tower with auto on two sizes.
set -u
source scripts/device-env.sh
timeout 240 $BIN/test_cuda_ops >"$OUT/tests.log" 2>&1
echo "test_cuda_ops exit $?: $(grep -c '^ok' "$OUT/tests.log") ok, $(grep -c '^not ok' "$OUT/tests.log") not ok"
grep -E "^not ok|auto runs fa3|fa3 attention vs cpu|^# tower" "$OUT/tests.log" | cut -c1-200 | head -12
m=/tmp/mv/model_2b
python3 scripts/hf_reference.py make-model --config 2b --seed 0 --out $m >/dev/null 2>&1
python3 scripts/bench_tower.py pixels --grid "1,32,32" --seed 1 --out /tmp/mv/p2b.npy
$BIN/mvtower bench --model $m --pixels /tmp/mv/p2b.npy --grid "1,32,32" --iters 3 2>&1 | grep -E "attention|mvembed" | cut -c1-200
timeout 120 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 5 \
    --sizes 64x448x448,1x2048x2048 --attention auto,cudnn --no-hf 2>&1 | grep -E "mvembed"
