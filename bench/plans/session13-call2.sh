#!/usr/bin/env bash
# session 13, call 2 (nvidia-h200): the tower vs HF on every size, host f32 pixels in one forward at
# a time (as before) and, new, as the CLI drives the tower (bench_tower.py --cli: uint8 frames in,
# two forwards in flight taking turns: "auto+cli"), twice (HF's rate moves between runs).
# Here first: BUNDLE_CLEAN=0 scripts/device-bundle.sh; then cp this to .device/plan2.sh and run
# "bash .device/plan2.sh" with .device carried.
set -u
source scripts/device-env.sh
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
S=64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032
for i in 1 2; do
    echo "== bench $i"
    timeout 270 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 5 --sizes $S \
        --attention auto --cli --json "$OUT/bench$i.json" 2>&1 | tee "$OUT/bench$i.log" | grep -vE "^\s*$" | tail -16
done
