#!/usr/bin/env bash
# session 10, call 2 (nvidia-h200): parity with fa3's split work items forced in the tower
# (MV_FA3_SPLIT=40: the last 40 items of every chunk in two pieces, short segments included),
# head dim 64 on 16 x 4096 (fa3 vs cuDNN, the one shape near a tie in call 1) six times
# interleaved, a 448² block's kernels under ncu (where the non-GEMM time goes), and the tower vs
# HF again.
set -u
source scripts/device-env.sh
MV_FA3_SPLIT=40 PARITY_FA3=1 timeout 200 bash scripts/device-run.sh parity 2>&1 | grep -E "^(PASS|FAIL)" | head -14
for i in 1 2 3 4 5 6; do
    D=64; [ $i -gt 4 ] && D=72
    timeout 40 $BIN/attnbench --iters 30 --only cudnn,fa3 --shape 16x4096 --dim $D 2>&1 | grep -E "^(cudnn|fa3) " | awk '{printf "%s %s %s %s | ", $1, $2, $3, $5} END {print ""}'
done
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
python3 scripts/bench_tower.py pixels --grid "$(python3 -c 'print(";".join(["1,28,28"]*64))')" --seed 1 --out /tmp/mv/p448.npy >/dev/null 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 120 $NCU --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 600 --launch-count 60 \
    $BIN/mvtower bench --model $m --pixels /tmp/mv/p448.npy --grid "$(python3 -c 'print(";".join(["1,28,28"]*64))')" \
    --iters 1 --warmup 1 >"$OUT/ncu448.csv" 2>"$OUT/ncu448.err"; echo "ncu exit $?"
python3 - "$OUT/ncu448.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value"); ui = hdr.index("Metric Unit")
tot = collections.OrderedDict()
for r in rows[1:]:
    v = float(r[vi].replace(",", "")) * (1e-3 if r[ui] == "nsecond" else 1.0 if r[ui] == "usecond" else 1e3)
    k = r[ki][:60]; tot[k] = tot.get(k, 0) + v
s = sum(tot.values())
for k, v in sorted(tot.items(), key=lambda x: -x[1]): print(f"{v:9.1f} us {100*v/s:5.1f} %  {k}")
print(f"{s:9.1f} us total over {len(rows)-1} launches")
PY
S=64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032
timeout 200 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower --iters 3 --sizes $S \
    --attention auto --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -11
