#!/usr/bin/env bash
# Written in the twelfth session; run as session 13, call 1 (results: bench/RESULTS.md, thirteenth session).
# Issue 13's last lever on one 2048² image: FlashAttention-4's conditional
# rescale (cu/attention_fa3.cu FA3_RESCALE_MIN: a row keeps its max unless a tile raises it by
# more than 2^8, so fa3_rescale_o's warp-uniform skip fires more often). One call, nvidia-h200:
#   FA3_VARIANTS="resc:-DFA3_RESCALE_MIN=8" BUNDLE_CLEAN=0 scripts/device-bundle.sh
#   cp bench/plans/session13-call1.sh .device/plan1.sh; run "bash .device/plan1.sh" (carry .device)
# test_fa3 on the variant (every segment mix, splits forced), attnbench default vs resc on the
# tower's shapes alternated with rests, mvtower default vs resc at 2048² and 448² alternated, and
# the tower vs HF on all five sizes with the variant. If resc wins everywhere: make 8 the default,
# then the next call runs parity (PARITY_FA3=1 scripts/device-run.sh parity) and test_cuda_ops.
set -u
source scripts/device-env.sh
timeout 150 $BIN/test_fa3-resc >"$OUT/fa3-resc.log" 2>&1
echo "test_fa3-resc exit $?: $(grep -c '^ok' "$OUT/fa3-resc.log") ok, $(grep -c '^not ok' "$OUT/fa3-resc.log") not ok"
grep -E "^not ok" "$OUT/fa3-resc.log" | cut -c1-220 | head -6
attn_ab resc 64x784 16x4096 4x8160 1x16384
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
tower_ab resc 1x2048x2048,64x448x448 $m
S=64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032
timeout 200 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower-resc --iters 3 --sizes $S \
    --attention auto --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -11
