#!/usr/bin/env bash
# session 10, call 7 (nvidia-h200): test_fa3 --quick after its check() refactor; then whether
# splitting items also pays at 448² (its chunks' last waves: 3920 rows -> 400 items = 3 waves + 4,
# 15680 -> 12 + 16, 10192 -> 7 + 116, 4704 -> 3 + 84; 7 key tiles, below the rule's 8): whole
# 64 x 448² forwards with MV_FA3_SPLIT=0 (off) / 4 / 16 (the last N items of every chunk), images/s.
set -u
source scripts/device-env.sh
timeout 90 $BIN/test_fa3 --quick >"$OUT/fa3.log" 2>&1; echo "test_fa3 --quick exit $?: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
grep -E "^not ok" "$OUT/fa3.log" | cut -c1-200 | head -4
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
G=$(python3 -c 'print(";".join(["1,28,28"]*64))')
python3 scripts/bench_tower.py pixels --grid "$G" --seed 1 --out /tmp/mv/p448.npy >/dev/null 2>&1
run() { MV_FA3_SPLIT=$1 timeout 40 $BIN/mvtower bench --model $m --pixels /tmp/mv/p448.npy --grid "$G" --iters 7 --warmup 2 2>/dev/null |
        python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("%.1f img/s" % d["images_per_s"])'; }
line="448² x64:"; for sp in 0 4 16 0 4 16; do line="$line split=$sp $(run $sp) |"; done; echo "$line"
