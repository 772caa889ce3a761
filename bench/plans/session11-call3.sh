#!/usr/bin/env bash
# session 11, call 3 (nvidia-h200): the kernel as landed (test_fa3-noidle: main's fa3 + the SM
# count helper) and test_cuda_ops; the chunk cap at 448² (the workspace's rows per chunk,
# --batch-tokens: 16384 is the default; 64 x 784 rows make 5 chunks = 42 rounds of fa3 items
# for 38.8 rounds of work, 26400 or 32768 make 4 or 3 chunks = 40 rounds), alternated; the f32
# residual stream's cost (MV_CUDA_F32_RESIDUAL=0, bf16 residual, not the default); the tower
# vs HF a third time.
set -u
source scripts/device-env.sh
timeout 150 $BIN/test_fa3-noidle >"$OUT/fa3.log" 2>&1; echo "test_fa3-noidle exit $?: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
timeout 150 $BIN/test_cuda_ops >"$OUT/tests.log" 2>&1; echo "test_cuda_ops exit $?: $(grep -c '^ok' "$OUT/tests.log") ok, $(grep -c '^not ok' "$OUT/tests.log") not ok"
grep -E "^not ok" "$OUT/tests.log" | cut -c1-200 | head -5
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
for i in 1 2; do
    for bt in 16384 26400 32768 50176; do
        timeout 60 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower-noidle --iters 5 \
            --sizes 64x448x448,16x1024x1024 --attention auto --no-hf --batch-tokens $bt 2>&1 | grep -E "mvembed" | sed "s/^/bt $bt /"
    done
done
MV_CUDA_F32_RESIDUAL=0 timeout 60 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower-noidle --iters 5 \
    --sizes 64x448x448 --attention auto --no-hf 2>&1 | grep -E "mvembed" | sed "s/^/bf16-residual /"
S=64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032
timeout 200 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower-noidle --iters 3 --sizes $S \
    --attention auto --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -11
