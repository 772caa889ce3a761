#!/usr/bin/env bash
# session 8, call 7 (nvidia-h200): after call 5 showed the "idle warpgroup" branch serialising
# every wgmma (ptxas C7518; reverted), the kernel is call 4's again with the persistent grid as
# default: test_fa3, parity (auto and --attention fa3), then the CPU tower on 16 threads, f32 and
# AMX bf16x6 (M blocks of 8 row tiles, next weight panel prefetched), beside HF f32.
set -u
source scripts/device-env.sh
timeout 90 $BIN/test_fa3 >"$OUT/fa3.log" 2>&1; echo "test_fa3 exit $?: $(grep -c '^ok' "$OUT/fa3.log") ok, $(grep -c '^not ok' "$OUT/fa3.log") not ok"
PARITY_FA3=1 timeout 170 bash scripts/device-run.sh parity 2>&1 | grep -E "^(PASS|FAIL)" | head -14
OMP_PROC_BIND=false THREADS=16 SIZES="4x448x448;1x1024x1024" DEPTH=27 ITERS=2 CPU_GEMM="f32 bf16x6" \
    CPUBENCH=$BIN/cpubench OUT=$OUT timeout 240 bash scripts/bench-cpu.sh 2>&1 | tail -8
