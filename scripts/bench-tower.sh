#!/usr/bin/env bash
# bench-tower.sh - the tower benchmark on the GPU machine: mvembed's CUDA tower against HF
# transformers (bf16, sdpa) on a random 27B-layout tower for 64 x 448x448, 16 x 1024x1024 and
# 4 x 1920x1080 (grid 68x120), plus the cuBLASLt bf16 GEMM peak and MFU; then mvembed alone with
# the other attention kernel variant. A benchmark, not a test. Run through the device tool after
# scripts/device-bundle.sh here, with `.device` in carry:
#   OUT=$OUT BENCH_ITERS=5 scripts/bench-tower.sh        (results: $OUT/bench.log, bench.json)
# bench/RESULTS.md records the numbers and the exact command.
exec "$(dirname "$0")/device-run.sh" bench
