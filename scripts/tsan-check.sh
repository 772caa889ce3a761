#!/usr/bin/env bash
# tsan-check.sh MVEMBED_TSAN - runs a ThreadSanitizer build of mvembed over the fixture media and
# the bad-input corpus with several decode threads, a packing tower thread (or, with the CPU test
# devices of MVEMBED_TEST_CPU_DEVICES, 8 or 12 tower threads) and the writers, and fails on any
# data race, deadlock or lock-order report. FFmpeg's frame threads and libgomp are not
# instrumented (their own atomics look like races to TSan): reports inside them are suppressed,
# nothing else is. Prints TAP lines and "N passed, N failed".
set -u
bin=$1
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'race:libavcodec.so\nrace:libavutil.so\nrace:libgomp.so\n' >"$tmp/supp"
pass=0 fail=0 n=0
if ldd "$bin" | grep -q libtsan; then
    echo "ok 1 - $bin is a ThreadSanitizer build"
    pass=1
else
    echo "not ok 1 - $bin is not linked with libtsan"
    fail=1
fi
n=1
check() { # NAME ARGS...: one run; ok when it finishes with status 0 or 2 and TSan said nothing
    local name=$1
    shift
    n=$((n + 1))
    [ "${KEEP:-0}" = 1 ] || rm -rf "$tmp/out"
    OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=0 exitcode=66 suppressions=$tmp/supp" \
        "$bin" ${QUIET--q} --device cpu --model "$root/fixtures/model-tiny" --out "$tmp/out" "$@" \
        "$root/fixtures/media" "$root/fixtures/bad" >"$tmp/log" 2>&1
    local rc=$? w
    w=$(grep -c 'WARNING: ThreadSanitizer' "$tmp/log")
    if { [ $rc -eq 0 ] || [ $rc -eq 2 ]; } && [ "$w" -eq 0 ]; then
        echo "ok $n - tsan: $name (exit $rc, no reports)"
        pass=$((pass + 1))
    else
        echo "not ok $n - tsan: $name (exit $rc, $w reports)"
        grep -A30 'WARNING: ThreadSanitizer' "$tmp/log" | head -60 | sed 's/^/# /'
        fail=$((fail + 1))
    fi
}
check "4 decode threads, one input per forward" --jobs 4 -j 1
check "4 decode threads, packed forwards (--batch-tokens 2048)" --jobs 4 -j 1 --batch-tokens 2048
check "8 decode threads, small forwards (--batch-tokens 512)" --jobs 8 -j 1 --batch-tokens 512
QUIET= check "progress ticker, -v lines and packed forwards sharing output slabs" --jobs 4 -j 1 \
    --batch-tokens 4096 -v --progress-every 0.01
check "tar layout: 4 writers each filling 16K shards, --pool mean" --jobs 8 -j 1 --layout tar --shard-size 16K --pool mean
check "files layout, --pool mean" --jobs 4 -j 1 --pool mean
# the CPU backend taking decoded images and rounding tokens to bf16, as CUDA does (--out-dtype auto)
MVEMBED_TEST_CPU_DEVICES=2 MVEMBED_TEST_CPU_RESIZES=1 MVEMBED_TEST_OUT_BF16=1 \
    check "2 test devices resizing decoded images, bf16 tokens, packed forwards" --jobs 4 -j 1 --batch-tokens 4096
# many devices without a GPU (src/run/run.c's test hook): a tower thread per backend, 8 or 12 of them
MVEMBED_TEST_CPU_DEVICES=4 check "4 test devices x 2 forwards in flight (8 tower threads)" --jobs 4 -j 1
MVEMBED_TEST_CPU_DEVICES=4 check "4 test devices x 3 in flight, packed forwards, tar layout" --jobs 4 -j 1 \
    --inflight 3 --batch-tokens 2048 --layout tar --shard-size 16K
# resuming the finished run (ok inputs skipped, failed ones retried), in the layout it wrote (an OUT
# holds one layout: another is refused)
KEEP=1 check "8 decode threads, resuming the finished tar-layout run" --jobs 8 -j 1 --layout tar --shard-size 16K
check "files layout" --jobs 4 -j 1
KEEP=1 check "8 decode threads, resuming the finished files-layout run" --jobs 8 -j 1
echo "1..$n"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
