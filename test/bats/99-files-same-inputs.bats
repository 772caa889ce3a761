#!/usr/bin/env bats
# Files-layout runs at once into one OUT over the same inputs (the same command launched twice,
# an unsharded fix-up run beside a --shard K/N array, arrays of two N): an input another live run
# embedded meanwhile is not written again; the other run's file and line stand for it and it
# counts as skipped, so the manifests hold one ok line per input and every line's "bytes" is its
# file's size. Oracles: json (the manifests), numpy + zstandard (the outputs), os.stat.
load test_helper

setup() {
    T="$BATS_TEST_TMPDIR"
}

# runs "$MVEMBED" once per --shard value given, all at once, over $T/in into $T/o; fails unless
# every run exits 0
run_at_once() {
    local pids=() p
    for sh in "$@"; do
        "$MVEMBED" -v --device cpu --model "$MODEL" --out "$T/o" --threads 1 --jobs 1 --shard "$sh" "$T/in" \
            2> "$T/err-${sh/\//-}" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
}

# one ok line per input over every manifest, its file there, np.load-able, of the line's bytes
check_once() {
    run "$PY" - "$T/o" "$1" <<'PY'
import collections, glob, io, json, os, sys
import numpy as np, zstandard
out, n = sys.argv[1], int(sys.argv[2])
ok = collections.defaultdict(list)
for m in glob.glob(out + "/manifest*.jsonl"):
    for line in open(m, encoding="utf-8"):
        r = json.loads(line)
        if r["status"] == "ok":
            ok[r.get("input_abs", r["input"])].append(r)
assert len(ok) == n, (len(ok), n)
dup = {i: len(v) for i, v in ok.items() if len(v) != 1}
assert not dup, ("inputs with several ok lines", len(dup))
for rs in ok.values():
    r = rs[0]
    p = os.path.join(out, r["output"])
    assert os.path.getsize(p) == r["bytes"], (p, r["bytes"])
    a = np.load(io.BytesIO(zstandard.ZstdDecompressor().stream_reader(open(p, "rb")).read()))
    assert list(a.shape) == r["shape"], (p, a.shape)
print("ok", len(ok))
PY
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "files layout: runs unsharded, --shard 0/2 and --shard 1/3 at once over one folder: one ok line per input" {
    inputs "$T/in" x 8
    n=$(ls "$T/in" | wc -l)
    run_at_once none 0/2 1/3
    check_once "$n"
    cat "$T"/err-* | grep -q 'embedded meanwhile by another run'
    [ -z "$(find "$T/o" -name '.tmp*')" ]
}

@test "files layout: the same command twice at once: one ok line per input, both exit 0" {
    inputs "$T/in" x 8
    n=$(ls "$T/in" | wc -l)
    run_at_once none none
    check_once "$n"
    # a resume finds everything done
    run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" "$T/in"
    [ "$status" -eq 0 ]
    [[ "$output" =~ " 0 ok, 0 failed, $n skipped" ]]
}

# pooled_shards OUT N: pooled-K-of-2 holds the inputs shard K takes, each row numpy's mean of
# that input's output (by its newest line in any manifest); the two together hold all N, once
# (pooled_check.py, the index's inputs matched to the manifests' as written)
pooled_shards() {
    pooled_check "$1" "$2" --key input
}

@test "files layout --pool mean: runs unsharded, --shard 0/2 and 1/2 at once: each shard's pooled directory has its inputs' rows" {
    inputs "$T/in" x 3
    n=$(ls "$T/in" | wc -l)
    pids=()
    for sh in none 0/2 1/2; do
        timeout 300 "$MVEMBED" -v --device cpu --model "$MODEL" --out "$T/o" --threads 1 --jobs 1 --pool mean \
            --shard "$sh" "$T/in" 2> "$T/err-${sh/\//-}" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    check_once "$n"
    pooled_shards "$T/o" "$n"
}

@test "files layout --pool mean: --shard K/2 runs after an unsharded run did every input: each shard's pooled directory has its inputs' rows" {
    inputs "$T/in" x 1
    n=$(ls "$T/in" | wc -l)
    for sh in none 0/2 1/2; do
        run "$MVEMBED" --device cpu --model "$MODEL" --out "$T/o" --pool mean --shard "$sh" "$T/in"
        echo "$output"
        [ "$status" -eq 0 ]
    done
    [[ "$output" =~ " 0 ok, 0 failed" ]] # the last shard's inputs were all done: skipped
    pooled_shards "$T/o" "$n"
}
