#!/usr/bin/env bash
# session 7, call 6 (nvidia-h200): why AMX bf16x6 GEMMs gained nothing on 16 threads at 4 x 448²
# (2.10 s = f32's) while one core measures 1.5x: GEMMs alone at 1, 4, 8, 16 threads, both modes.
set -u
source scripts/device-env.sh
M=/tmp/tw8; python3 scripts/make_random_tower.py $M --config 27b --depth 8 >/dev/null 2>&1
G="1,28,28;1,28,28;1,28,28;1,28,28"
for j in 1 4 8 16; do for mode in f32 bf16x6; do
  r=$(OMP_PROC_BIND=false timeout 60 $BIN/cpubench --model $M --grid "$G" -j $j --iters 2 --what gemm --cpu-gemm $mode 2>&1 | grep -E "gemm_min|gemm_tflop" | tr '\n' ' ')
  echo "j=$j $mode $r"
done; done
