#!/usr/bin/env bash
# session 11, call 1 (nvidia-h200): fa3's idle consumers. A segment's last query tile can be
# shorter than the 192 rows of three consumer warpgroups (784 = 4 x 192 + 16: at 448² one item in
# five has two consumers without a single row); they now skip their wgmma and softmax and only
# keep the barrier protocol. test_fa3 (every segment mix; 1, 127, 128, 129 rows have idle
# consumers), attnbench new vs the previous kernel (attnbench-noidle: -DFA3V2_IDLE=0) alternated
# with rests, the tower vs HF on every size, and mvtower new vs noidle at 448² and 1024².
# (The idle skip was an uncommitted attempt, not landed; FA3V2_IDLE existed only in it.)
set -u
source scripts/device-env.sh
timeout 150 $BIN/test_fa3 >"$OUT/fa3.log" 2>&1; echo "test_fa3 exit $?: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
grep -E "^not ok" "$OUT/fa3.log" | cut -c1-220 | head -6
ab() { timeout 60 "$@" 2>&1 | grep -E "^(cudnn|fa3[a-z0-9_]*) " | awk '{printf "%s %s | ", $1, $5} END {print ""}'; }
for sh in 64x784 16x4096 4x8160; do
    for i in 1 2; do
        echo "$sh new:    $(ab $BIN/attnbench --iters 30 --only fa3,cudnn --shape $sh --dim 72 --rest 1000)"
        echo "$sh noidle: $(ab $BIN/attnbench-noidle --iters 30 --only fa3,cudnn --shape $sh --dim 72 --rest 1000)"
    done
done
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
S=64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032
timeout 200 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 --sizes $S \
    --attention auto --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -11
for i in 1 2; do
    for b in mvtower mvtower-noidle; do
        timeout 60 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/$b --iters 5 \
            --sizes 64x448x448,16x1024x1024 --attention auto --no-hf 2>&1 | grep -E "mvembed" | sed "s/^/$b /"
    done
done
