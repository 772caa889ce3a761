#!/usr/bin/env bash
# session 9, call 5 (nvidia-h200): the CPU tower as landed (GEMM workspace kept, rows split 32 at
# a time, the row chain in 128-row chunks with bf16x6, attention on oneDNN's f32 sgemm) on 16
# threads beside HF f32, 27 blocks: scripts/bench-cpu.sh, f32 and bf16x6.
set -u
source scripts/device-env.sh
OMP_PROC_BIND=false THREADS=16 SIZES="4x448x448;1x1024x1024" DEPTH=27 ITERS=2 CPU_GEMM="f32 bf16x6" \
    CPUBENCH=$BIN/cpubench OUT=$OUT timeout 400 bash scripts/bench-cpu.sh 2>&1 | grep -E "^\||bench-cpu:|^hf"
