#!/usr/bin/env bash
# session 13, call 4 (nvidia-h200): which attention the 2B-layout tower (head dim 64) should get
# from --attention auto. Auto picks cuDNN at head dim 64 on the eighth session's kernel numbers
# (cuDNN 491 vs fa3 388 at 16 x 4096); since then fa3 measures ahead at 64 on every shape when
# neither row runs second (bench/RESULTS.md, tenth session). The whole tower decides: fa3 and cuDNN
# on every size, in both orders, with HF in the first round.
set -u
source scripts/device-env.sh
m=/tmp/mv/model_2b
python3 scripts/hf_reference.py make-model --config 2b --seed 0 --out $m >/dev/null 2>&1
S=64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032
echo "== round 1 (cudnn first, HF)"
timeout 280 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 5 --sizes $S \
    --attention cudnn,fa3 --json "$OUT/bench2b_1.json" 2>&1 | tee "$OUT/bench2b_1.log" | grep -vE "^\s*$" | tail -16
echo "== round 2 (fa3 first, no HF)"
timeout 200 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 5 --sizes $S \
    --attention fa3,cudnn --no-hf --json "$OUT/bench2b_2.json" 2>&1 | tee "$OUT/bench2b_2.log" | grep -vE "^\s*$" | tail -12
