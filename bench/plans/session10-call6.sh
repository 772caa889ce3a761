#!/usr/bin/env bash
# session 10, call 6 (nvidia-h200): test_cuda_ops after cu/gemm.cu's measurement knobs (default
# path unchanged: one heuristic answer), then call 5's timing loop with fewer answers: proj
# (1152 -> 1152) answers 0, 3, 4, 6, 0 and fc2 (4304 -> 1152) answers 0, 3, 7: 64 x 448² images/s.
set -u
source scripts/device-env.sh
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
G=$(python3 -c 'print(";".join(["1,28,28"]*64))')
python3 scripts/bench_tower.py pixels --grid "$G" --seed 1 --out /tmp/mv/p448.npy >/dev/null 2>&1
run() { MV_GEMM_RANK=$1 timeout 40 $BIN/mvtower bench --model $m --pixels /tmp/mv/p448.npy --grid "$G" --iters 7 --warmup 2 2>/dev/null |
        python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("%.1f img/s" % d["images_per_s"])'; }
line="1152,1152:"; for k in 0 3 4 6 0; do line="$line k$k $(run 1152,1152,$k) |"; done; echo "$line"
line="4304,1152:"; for k in 0 3 7; do line="$line k$k $(run 4304,1152,$k) |"; done; echo "$line"
timeout 170 $BIN/test_cuda_ops >"$OUT/tests.log" 2>&1; echo "test_cuda_ops exit $?: $(grep -c '^ok' "$OUT/tests.log") ok, $(grep -c '^not ok' "$OUT/tests.log") not ok"
grep -E "^not ok" "$OUT/tests.log" | cut -c1-200 | head -5
