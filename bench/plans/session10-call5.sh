#!/usr/bin/env bash
# session 10, call 5 (nvidia-h200; its timing loop failed on a quoting error, fixed here and run
# as call 6 with fewer answers): the 448² tower's GEMMs. ncu (call 2) had proj (1152 -> 1152,
# f32 residual accumulated, cuBLASLt's first answer: 192x192 tiles) at ~530 TFLOP/s against ~720-775
# for qkv / fc1 / fc2. cuBLASLt's other heuristic answers for each Linear (MV_GEMM_RANK=in,out,k, a
# measurement knob of cu/gemm.cu), whole 64 x 448² forwards (mvtower bench, images/s), each
# answer twice; MV_GEMM_LIST=1 prints the answers (algorithm, tile, split-K, waves).
set -u
source scripts/device-env.sh
m=/tmp/mv/model_27b
python3 scripts/hf_reference.py make-model --config 27b --seed 0 --out $m >/dev/null 2>&1
G=$(python3 -c 'print(";".join(["1,28,28"]*64))')
python3 scripts/bench_tower.py pixels --grid "$G" --seed 1 --out /tmp/mv/p448.npy >/dev/null 2>&1
MV_GEMM_LIST=1 timeout 60 $BIN/mvtower bench --model $m --pixels /tmp/mv/p448.npy --grid "$G" --iters 1 --warmup 0 2>"$OUT/gemmlist.txt" >/dev/null
grep -E "answer" "$OUT/gemmlist.txt" | sed 's/ epi.*answer/ answer/' | sort -u -t: -k1,1 -k2 | head -60
run() { MV_GEMM_RANK=$1 timeout 40 $BIN/mvtower bench --model $m --pixels /tmp/mv/p448.npy --grid "$G" --iters 7 --warmup 2 2>/dev/null |
        python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("%.1f img/s" % d["images_per_s"])'; }
for rep in 1 2; do
    for sh in 1152,1152 1152,3456 1152,4304 4304,1152; do
        line="$sh:"
        for k in 0 1 2 3 4; do line="$line k$k $(run $sh,$k) |"; done
        echo "$line"
    done
done
