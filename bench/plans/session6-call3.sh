#!/usr/bin/env bash
# session 6, call 3 (nvidia-h200-x2): tower vs HF with cuDNN and fa3 v2 attention; then the video
# and repeat halves of issue 11's e2e (600 clips; 10 runs of --devices 0,1 on 200 photos).
set -u
source scripts/device-env.sh
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
timeout 300 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 \
    --sizes 64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032 --attention cudnn,fa3 \
    --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -16
E2E_STEPS="5 7" E2E_PHOTOS=200 E2E_VIDEOS=600 E2E_HF_VIDEOS=0 E2E_REPEAT=10 E2E_REPEAT_FILES=200 \
    timeout 270 bash scripts/device-e2e.sh >/dev/null 2>&1
echo "e2e exit $?"; cat "$OUT/e2e.log"
