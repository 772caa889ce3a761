#!/usr/bin/env bash
# session 9, call 4 (nvidia-h200): which of this session's CPU changes cost time on 16 threads
# (call 3: bf16x6 tower/GEMMs 1.26 at 4 x 448², 1.13 in the eighth session): cpubench (8 blocks,
# --what both, 16 threads) with bf16x6 attention on AMX or on the f32 sgemm (noattn), the row
# chain in 128-row chunks or not (nochunk), neither; f32 beside; twice, interleaved.
set -u
source scripts/device-env.sh
t=/tmp/mv/tower-27b-d8
python3 scripts/make_random_tower.py $t --config 27b --depth 8 >/dev/null 2>&1 || echo "make_random_tower failed"
G4="1,28,28;1,28,28;1,28,28;1,28,28"; G1="1,64,64"
for rep in 1 2; do
    for g in "$G4" "$G1"; do
        for v in "" -noattn -nochunk -neither; do
            echo "$rep ${g:0:8} bf16x6${v}: $(OMP_PROC_BIND=false timeout 60 $BIN/cpubench$v --model $t --grid "$g" -j 16 --iters 3 --what both --cpu-gemm bf16x6 2>&1 | grep -E '^(tower|gemm)_min ' | tr '\n' ' ')"
        done
        echo "$rep ${g:0:8} f32: $(OMP_PROC_BIND=false timeout 60 $BIN/cpubench --model $t --grid "$g" -j 16 --iters 3 --what both --cpu-gemm f32 2>&1 | grep -E '^(tower|gemm)_min ' | tr '\n' ' ')"
    done
done
