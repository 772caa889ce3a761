#!/usr/bin/env bash
# session 10, call 3 (nvidia-h200): head dim 64 on 16 x 4096, the one shape where fa3 trails cuDNN
# (~2 %, call 2): the existing fa3 options side by side (keys per tile 112 / 128, two consumer
# warpgroups, one CTA per item), three times; then attnbench on every shape (fa3 vs fa3_nosplit vs
# cuDNN) and the tower vs HF a third time.
set -u
source scripts/device-env.sh
for i in 1 2 3; do
    timeout 60 $BIN/attnbench --iters 30 --only cudnn,fa3,fa3_bn112,fa3_bn128,fa3_wg2,fa3_ps --shape 16x4096 --dim 64 2>&1 |
        grep -E "^(cudnn|fa3[a-z0-9_]*) " | awk '{printf "%s %s | ", $1, $5} END {print ""}'
done
timeout 80 $BIN/attnbench --iters 20 --only cudnn,fa3,fa3_nosplit >"$OUT/ab.log" 2>&1; echo "== attnbench exit $?"
grep -E "^(cudnn|fa3|fa3_nosplit) " "$OUT/ab.log" | awk '{printf "%s %s %s %s | ", $1, $2, $3, $5} END {print ""}'
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
S=64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032
timeout 200 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 --sizes $S \
    --attention auto --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -11
