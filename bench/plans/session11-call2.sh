#!/usr/bin/env bash
# session 11, call 2 (nvidia-h200): issue 15 on 16 threads with the tenth session's CPU code
# (session 9 call 5's command: 27 blocks, f32 and bf16x6 beside HF f32); the tower vs HF a second
# time with main's fa3 kernel (mvtower-noidle: call 1's idle-consumer skip made long segments
# slower and is not landed); a 448² forward's kernels under ncu without its cache flushes
# (--cache-control none: each kernel finds what the one before left in L2, as in a real run).
set -u
source scripts/device-env.sh
OMP_PROC_BIND=false THREADS=16 SIZES="4x448x448;1x1024x1024" DEPTH=27 ITERS=2 CPU_GEMM="f32 bf16x6" \
    CPUBENCH=$BIN/cpubench OUT=$OUT timeout 330 bash scripts/bench-cpu.sh 2>&1 | grep -E "^\||bench-cpu:|^hf"
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
S=64x448x448,16x1024x1024,4x1088x1920,1x2048x2048,1x3024x4032
timeout 200 python3 scripts/bench_tower.py bench --model $m --mvtower $BIN/mvtower-noidle --iters 3 --sizes $S \
    --attention auto --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^\s*$" | tail -11
G=$(python3 -c 'print(";".join(["1,28,28"]*64))')
python3 scripts/bench_tower.py pixels --grid "$G" --seed 1 --out /tmp/mv/p448.npy >/dev/null 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 100 $NCU --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --launch-skip 600 \
    --launch-count 60 $BIN/mvtower-noidle bench --model $m --pixels /tmp/mv/p448.npy --grid "$G" --iters 1 --warmup 1 \
    >"$OUT/ncu448.csv" 2>"$OUT/ncu448.err"; echo "ncu exit $?"
python3 - "$OUT/ncu448.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value"); ui = hdr.index("Metric Unit")
tot = collections.OrderedDict(); cnt = collections.Counter()
for r in rows[1:]:
    v = float(r[vi].replace(",", "")) * (1e-3 if r[ui] == "nsecond" else 1.0 if r[ui] == "usecond" else 1e3)
    k = r[ki][:60]; tot[k] = tot.get(k, 0) + v; cnt[k] += 1
s = sum(tot.values())
for k, v in sorted(tot.items(), key=lambda x: -x[1]): print(f"{v:9.1f} us {100*v/s:5.1f} % x{cnt[k]:<3d} {k}")
print(f"{s:9.1f} us total over {len(rows)-1} launches")
PY
