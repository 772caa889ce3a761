#!/usr/bin/env bash
# session 10, call 4 (nvidia-h200): is attnbench's row order a bias? Calls 1-3 had the same fa3
# kernel in two consecutive rows (fa3_nosplit, then fa3; no split on those shapes) differ by 3-8 %
# at 4 x 8160, always against the later row, and cuDNN's row always runs before fa3's. Control:
# the two identical rows in both orders (--reverse), with and without a 2 s rest before each row;
# then cuDNN vs fa3 at head dim 64 on 16 x 4096 in both orders. SM clock, power and temperature
# sampled every 100 ms alongside.
set -u
source scripts/device-env.sh
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv,noheader -lms 100 >"$OUT/smi.csv" 2>&1 &
SMI=$!
ab() { timeout 60 $BIN/attnbench --iters 30 "$@" 2>&1 | grep -E "^(cudnn|fa3[a-z0-9_]*) " | awk '{printf "%s %s | ", $1, $5} END {print ""}'; }
for i in 1 2; do
    echo "4x8160 D64 fwd:      $(ab --only fa3_nosplit,fa3 --shape 4x8160 --dim 64)"
    echo "4x8160 D64 rev:      $(ab --only fa3_nosplit,fa3 --shape 4x8160 --dim 64 --reverse)"
    echo "4x8160 D64 fwd rest: $(ab --only fa3_nosplit,fa3 --shape 4x8160 --dim 64 --rest 2000)"
    echo "4x8160 D64 rev rest: $(ab --only fa3_nosplit,fa3 --shape 4x8160 --dim 64 --reverse --rest 2000)"
done
for i in 1 2; do
    echo "16x4096 D64 fwd:      $(ab --only cudnn,fa3 --shape 16x4096 --dim 64)"
    echo "16x4096 D64 rev:      $(ab --only cudnn,fa3 --shape 16x4096 --dim 64 --reverse)"
    echo "16x4096 D64 fwd rest: $(ab --only cudnn,fa3 --shape 16x4096 --dim 64 --rest 2000)"
    echo "16x4096 D64 rev rest: $(ab --only cudnn,fa3 --shape 16x4096 --dim 64 --reverse --rest 2000)"
done
kill $SMI 2>/dev/null
python3 - "$OUT/smi.csv" <<'PY'
import sys
v=[l.split(",") for l in open(sys.argv[1]) if l.count(",")>=4]
c=[float(x[0].split()[0]) for x in v]; p=[float(x[2].split()[0]) for x in v if x[2].strip()[0].isdigit()]; t=[float(x[4]) for x in v]
print(f"smi samples {len(v)}: SM clock min {min(c):.0f} max {max(c):.0f} MHz (max {v[0][1].strip()}), power max {max(p):.0f} W (limit {v[0][3].strip()}), temp {min(t):.0f}-{max(t):.0f} C")
import collections; h=collections.Counter(int(x//50*50) for x in c); print("clock histogram:", sorted(h.items()))
PY
