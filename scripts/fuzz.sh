#!/usr/bin/env bash
# fuzz.sh SECONDS NAME... - runs the libFuzzer harnesses build-fuzz/fuzz_NAME (make fuzz-build)
# for SECONDS each, one after the other. Before fuzzing, the corpora in build-fuzz/corpus/ are
# seeded from the fixtures (test/fuzz/seed-corpora.sh) and every saved reproducer
# test/fuzz/crashes/NAME-* is replayed: a reproducer that still crashes counts as a failure.
# New crashes land in build-fuzz/artifacts/NAME/; logs in build-fuzz/logs/NAME.log.
# Prints one line per harness and exits 1 if anything crashed (0 otherwise).
set -u
cd "$(dirname "$0")/.."
S=${1:?usage: fuzz.sh SECONDS NAME...}
shift
B=build-fuzz
test/fuzz/seed-corpora.sh "$B/corpus" || { echo "fuzz: seeding the corpora failed"; exit 1; }
mkdir -p "$B/logs"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# why LOG: the first line of LOG that is not libFuzzer's own chatter (the harness's complaint, the
# sanitizer report, or the UBSan "runtime error" line)
why() {
    grep -a -m1 -vE 'INFO:|Running|Executed|MS:|NOTE:|^#|^==[0-9]+== ERROR: libFuzzer|^\*\*\*|^ |^$|SUMMARY|^Dictionary|NEW_FUNC|^stat::|artifact_prefix|^(Base|Test unit)' "$1" | cut -c1-300
}
fail=0
for n in "$@"; do
    bin=$B/fuzz_$n
    if [ ! -x "$bin" ]; then
        echo "fuzz: $n: $bin is missing (make fuzz-build)"
        fail=1
        continue
    fi
    for c in test/fuzz/crashes/"$n"-*; do
        [ -f "$c" ] || continue
        log=$B/logs/$n.replay-$(basename "$c").log
        if "$bin" -runs=1 "$c" >"$log" 2>&1; then
            echo "fuzz: $n: reproducer $c no longer crashes"
        else
            echo "fuzz: $n: reproducer $c still crashes: $(why "$log")"
            fail=1
        fi
    done
    dict=()
    case $n in
        safetensors | config | manifest) dict=(-dict=test/fuzz/json.dict) ;;
        npy) dict=(-dict=test/fuzz/npy.dict) ;;
    esac
    # config: a config may declare a model of any size; the loader then asks malloc for it and
    # must refuse cleanly when it fails, so huge requests are allowed (and may return NULL).
    extra=()
    [ "$n" = config ] && extra=(-malloc_limit_mb=1048576)
    mkdir -p "$B/artifacts/$n"
    t0=$(date +%s)
    "$bin" -max_total_time="$S" -timeout=20 -print_final_stats=1 -artifact_prefix="$B/artifacts/$n/" \
        "${dict[@]}" "${extra[@]}" "$B/corpus/$n" >"$B/logs/$n.log" 2>&1
    rc=$?
    t1=$(date +%s)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/logs/$n.log" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$B/logs/$n.log" | tail -1)
    if [ $rc -eq 0 ]; then
        echo "fuzz: $n: $((t1 - t0))s, ${runs:-?} runs, ${cov:-no stats}: nothing found"
    else
        art=$(ls -t "$B/artifacts/$n/" 2>/dev/null | head -1)
        echo "fuzz: $n: $((t1 - t0))s, ${runs:-?} runs: FAILED (status $rc), input $B/artifacts/$n/$art, log $B/logs/$n.log"
        echo "    $(why "$B/logs/$n.log")"
        fail=1
    fi
done
exit $fail
