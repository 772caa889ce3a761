#!/usr/bin/env bash
# session 11, call 4 (nvidia-h200): the tower vs HF on every size, twice, with 32768 rows per
# chunk (--batch-tokens 32768: the new default workspace, DEFAULT_BATCH_TOKENS in
# cu/tower_cuda.cu; call 3 measured 448² +3.5 % and 1024² +1.5 % over 16384).
set -u
source scripts/device-env.sh
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
S=64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032
for i in 1 2; do
    timeout 200 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower-noidle --iters 3 --sizes $S \
        --attention auto --batch-tokens 32768 --json "$OUT/bench$i.json" 2>&1 | tee "$OUT/bench$i.log" | grep -vE "^\s*$" | tail -11
done
