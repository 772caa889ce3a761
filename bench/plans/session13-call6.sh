#!/usr/bin/env bash
# session 13, call 6 (nvidia-h200): fa3 vs cuDNN at head dim 64 on every shape, as the tenth session
# found fair (--rest 1000: an idle second before each row; both row orders, twice): call 3's full
# table had fa3 below cuDNN at 16 x 4096 with fa3's row last after eleven others.
set -u
source scripts/device-env.sh
for sh in 64x784 16x4096 4x8160 1x16384 1x47376; do
    for i in 1 2; do
        for ord in "" --reverse; do
            echo "$sh ${ord:-forward}: $(timeout 60 $BIN/attnbench --iters 30 --only fa3,cudnn --shape $sh --dim 64 \
                --rest 1000 $ord 2>&1 | grep -E "^(cudnn|fa3) " | awk '{printf "%s %s | ", $1, $5} END {print ""}')"
        done
    done
done
